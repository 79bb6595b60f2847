# SPDX-License-Identifier: Apache-2.0
"""Extreme inputs to the module (issue 39): edge arrays NumPy would reshape or truncate, NaN
weights, negative masses, overflowing deadlines and payloads, one huge leaf. Each failed before
its fix."""

import numpy as np
import pytest

import canopy


@pytest.mark.parametrize("edges", [
    [[0, 1, 2], [3, 4, 5]],      # (2, 3): used to become three edges
    [0, 1, 2, 3],                # flat: used to become two edges
    [[[0, 1]], [[1, 2]]],        # three dimensions
])
def test_dag_refuses_edge_arrays_of_the_wrong_shape(edges):
    with pytest.raises(canopy.InputError, match="shape"):
        canopy.Dag(6, edges)


def test_dag_refuses_non_integer_edges_and_weights():
    with pytest.raises(canopy.InputError, match="integers"):
        canopy.Dag(2, [[0.5, 1.7]])  # used to be truncated to the edge 0 -> 1
    with pytest.raises(canopy.InputError, match="NaN"):
        canopy.Dag(1, [], weights=[float("nan")])  # used to raise NumPy's own ValueError
    with pytest.raises(canopy.InputError, match="integers"):
        canopy.Dag(2, [["a", "b"]])
    with pytest.raises(canopy.InputError, match="shape"):
        canopy.Dag(2, [[0, 1]], weights=[[1, 2]])
    # Whole numbers in a float array are integers.
    d = canopy.Dag(2, np.array([[0.0, 1.0]]), weights=np.array([3.0, 4.0]))
    np.testing.assert_array_equal(d.reference(), [4, 4 + 1 + 4])
    assert canopy.Dag(3, []).edge_count == 0


def test_build_octree_refuses_negative_masses_like_the_readers():
    with pytest.raises(canopy.InputError, match="negative mass"):
        canopy.build_octree(np.array([[0, 0, 0, 1], [1, 1, 1, -2]], np.float32))


def test_build_octree_refuses_masses_whose_moments_would_overflow():
    p = np.zeros((1000, 4), np.float32)
    p[:, 0] = np.arange(1000) % 10
    p[:, 3] = 1e36
    with pytest.raises(canopy.InputError, match="would overflow"):
        canopy.build_octree(p)


def test_deadlines_beyond_the_range_are_refused():
    t = canopy.build_octree(canopy.generate("uniform", 100))
    with pytest.raises(canopy.InputError, match="at most 1e12"):
        canopy.accumulate(t, "cpu", deadline_ms=1e300)
    with pytest.raises(canopy.InputError, match="at most 1e12"):
        canopy.Dag(2, [[0, 1]]).run("cpu", deadline_ms=1e19)
    canopy.accumulate(t, "cpu", deadline_ms=1e12)


def test_queue_capacity_beyond_the_task_count_is_capped():
    t = canopy.build_octree(canopy.generate("plummer", 2000))
    assert canopy.validate(t, "cpu", queue_capacity=2**31 - 1)
    # Beyond int32: the module's InputError (it was nanobind's TypeError); too many workers: refused.
    with pytest.raises(canopy.InputError, match="queue_capacity"):
        canopy.accumulate(t, "cpu", queue_capacity=2**31)
    with pytest.raises(canopy.InputError, match="blocks"):
        canopy.Dag(2, [[0, 1]]).run("cpu", blocks=2.5)
    with pytest.raises(canopy.OptionError, match="at most 4096"):
        canopy.accumulate(t, "cpu", blocks=100000)


def test_one_huge_leaf_is_summed_accurately():
    p = canopy.generate("uniform", 300_000)
    t = canopy.build_octree(p, max_depth=0)
    m = canopy.accumulate(t, "cpu")
    assert abs(float(m["mass"][0]) - float(p[:, 3].astype(np.float64).sum())) < 1e-6
    c = canopy.validate(t, "cpu")
    assert c and c.bounds_meaningful and c.mass.bound < 1e-4, c.summary()
    # Summed plainly (the gpu backend's lanes), a leaf this large has no meaningful bound: not a PASS.
    assert not canopy.compare(t, m).bounds_meaningful


def test_generate_caps_the_number_of_clusters_as_the_tool_does():
    # 50M clusters took 1.6 GB for 10 points; the cap is the tool's --clusters bound, 2^20.
    with pytest.raises(canopy.InputError, match="1048576"):
        canopy.generate("clusters", 10, clusters=50_000_000)
    assert canopy.generate("clusters", 10, clusters=1 << 20).shape == (10, 4)
