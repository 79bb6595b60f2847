# SPDX-License-Identifier: Apache-2.0
"""General DAGs: values checked by hand and against the topological reference in every mode, DOT
files, and graphs the scheduler must refuse."""

import numpy as np
import pytest

import canopy


def random_dag(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, 4 * n)
    b = rng.integers(0, n, 4 * n)
    keep = a < b  # edges go forward: acyclic
    edges = np.unique(np.stack([a[keep], b[keep]], axis=1), axis=0)
    return canopy.Dag(n, edges, rng.integers(0, 100, n))


def test_a_diamond_by_hand():
    d = canopy.Dag(4, [(0, 1), (0, 2), (1, 3), (2, 3)], weights=[1, 2, 3, 4])
    assert d.task_count == 4 and d.edge_count == 4 and d.sink_count == 1
    np.testing.assert_array_equal(d.sources, [0])
    expected = [2, 2 + 1 + 2, 3 + 1 + 2, 4 + 1 + 5 + 6]
    np.testing.assert_array_equal(d.reference(), expected)
    v = d.run("cpu")
    assert v.dtype == np.uint64 and v.shape == (4,)
    np.testing.assert_array_equal(v, expected)


@pytest.mark.parametrize("mode", canopy.MODES)
def test_every_mode_matches_the_reference(mode):
    check = canopy.validate_dag(random_dag(500, seed=11), "cpu", mode=mode, blocks=2)
    assert check, repr(check)
    assert check.mismatches == 0 and check.info["backend"] == "cpu"


def test_a_wrong_value_is_reported():
    d = random_dag(50, seed=2)
    check = canopy.DagCheck(d.reference() + np.uint64(1), d.reference(), {})
    assert not check and check.first_mismatch == 0 and "FAIL" in repr(check)


def test_dot_files_keep_names_and_weights(tmp_path):
    f = tmp_path / "g.dot"
    f.write_text('digraph { a [weight=5]; b; c [weight=1]; a -> b; a -> c; b -> c; }\n')
    d = canopy.Dag.from_dot(f)
    assert d.names == ["a", "b", "c"]
    np.testing.assert_array_equal(d.weights, [5, 0, 1])
    np.testing.assert_array_equal(d.run("cpu"), [6, 7, 1 + 1 + 6 + 7])


def test_cycles_and_bad_edges_raise_graph_errors(tmp_path):
    with pytest.raises(canopy.GraphError, match="cycle") as e:
        canopy.Dag(3, [(0, 1), (1, 2), (2, 0)])
    assert isinstance(e.value, ValueError)
    with pytest.raises(canopy.GraphError):
        canopy.Dag(2, [(0, 1), (0, 1)])
    with pytest.raises(canopy.GraphError):
        canopy.Dag(2, [(0, 5)])
    f = tmp_path / "cycle.dot"
    f.write_text("digraph { x -> y; y -> x; }\n")
    with pytest.raises(canopy.GraphError) as e:
        canopy.Dag.from_dot(f)
    assert e.value.kind == "cycle" and str(f) in str(e.value)
    f.write_text("digraph { x -> ; }\n")
    with pytest.raises(canopy.InputError) as e:
        canopy.Dag.from_dot(f)
    assert e.value.source == str(f)
    with pytest.raises(canopy.InputError, match="weights"):
        canopy.Dag(3, [(0, 1)], weights=[1, 2])


@pytest.mark.gpu
def test_the_gpu_backend_matches_the_reference():
    assert canopy.validate_dag(random_dag(2000, seed=5), "gpu", mode="lockfree")
