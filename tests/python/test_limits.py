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


def test_values_beyond_float32_say_so_as_the_readers_do(tmp_path):
    # A finite float64 of 1e300 became inf in the float32 conversion and was "not finite".
    p = np.array([[0.5, 0.5, 0.5, 1.0], [1e300, 0.5, 0.5, 1.0]])
    with pytest.raises(canopy.InputError, match=r"point 1: coordinate x = 1\.0000000000000001e\+300 is beyond float32's "
                                                r"range \(\+-3\.4028235e\+38\)"):
        canopy.build_octree(p)
    p[1] = [0.5, 0.5, 0.5, -1e39]
    with pytest.raises(canopy.InputError, match="point 1: mass m = -9.9999999999999994e\\+38 is beyond float32.s range"):
        canopy.write_points(tmp_path / "p.bin", p)
    assert not (tmp_path / "p.bin").exists()
    with pytest.raises(canopy.InputError, match="beyond float32's range"):
        canopy.build_octree(np.array([[0.5, 0.5, 1e300]]))  # (n, 3)
    # NaN stays "not finite"; a float64 that rounds to float32's largest is in range.
    with pytest.raises(canopy.InputError, match="point 0 .* is not finite"):
        canopy.build_octree(np.array([[0.5, np.nan, 0.5, 1.0]]))
    canopy.write_points(tmp_path / "max.bin", np.array([[3.4028235e38, 0.0, 0.0, 1.0]]))
    assert canopy.read_points(tmp_path / "max.bin")[0, 0] == np.finfo(np.float32).max


def test_scalar_arguments_are_integers_never_truncated(tmp_path):
    p = canopy.generate("uniform", 200)
    t = canopy.build_octree(p)
    canopy.write_points(tmp_path / "p.bin", p)
    # A fraction, NaN or infinity: the module's InputError, a ValueError (max_leaf=2.5 ran with 2).
    for call in [lambda: canopy.build_octree(p, max_leaf=2.5), lambda: canopy.build_octree(p, max_depth=3.5),
                 lambda: canopy.generate("uniform", 10.5), lambda: canopy.generate("uniform", 10, seed=1.5),
                 lambda: canopy.generate("clusters", 10, clusters=2.5), lambda: canopy.complete_octree(2.5, 1),
                 lambda: canopy.generate("lattice", depth=1, per_leaf=1.5), lambda: canopy.set_host_threads(1.5),
                 lambda: canopy.Dag(2.5, []), lambda: canopy.generate("uniform", float("nan")),
                 lambda: canopy.build_octree(p, max_leaf=float("inf"))]:
        with pytest.raises(canopy.InputError, match="must be an integer, not"):
            call()
    with pytest.raises(canopy.InputError, match="not 2.5"):
        canopy.read_points(tmp_path / "p.bin", type=2.5)  # was read as type 2
    # Not a number at all: TypeError, as Python and NumPy raise it (int("8") was parsed).
    for call in [lambda: canopy.build_octree(p, max_leaf="8"), lambda: canopy.generate("uniform", "10"),
                 lambda: canopy.build_octree(p, max_depth=None), lambda: canopy.Dag("2", []),
                 lambda: canopy.accumulate(t, "cpu", deadline_ms="100"), lambda: canopy.accumulate(t, "cpu", blocks="2"),
                 lambda: canopy.Dag(2, [[0, 1]]).run("cpu", deadline_ms=[1])]:
        with pytest.raises(TypeError, match="must be an? (integer|number), not"):
            call()
    # Beyond the C++ type: the module's InputError, not nanobind's TypeError.
    with pytest.raises(canopy.InputError, match="max_leaf"):
        canopy.build_octree(p, max_leaf=2**40)
    with pytest.raises(canopy.InputError, match="seed"):
        canopy.generate("uniform", 10, seed=2**64)
    with pytest.raises(canopy.InputError, match="seed"):
        canopy.complete_octree(1, 1, seed=-1)
    # Integers in any form, and floats of integral value, are integers.
    t = canopy.build_octree(p, max_leaf=np.int64(8), max_depth=5.0)
    assert t.depth <= 5 and int(t.npoints[t.leaves].max()) <= 8 or t.depth == 5
    assert canopy.generate("uniform", np.uint16(10), seed=np.uint64(2**64 - 1)).shape == (10, 4)
    assert len(canopy.read_points(tmp_path / "p.bin", type=None)) == 200


def test_arguments_of_the_wrong_type_are_type_errors():
    t = canopy.build_octree(canopy.generate("uniform", 100))
    d = canopy.Dag(2, [[0, 1]])
    # Name arguments: an int was nanobind's "incompatible function arguments", an array NumPy's
    # "truth value of an array ... is ambiguous".
    for call in [lambda: canopy.accumulate(t, "cpu", mode=5), lambda: canopy.accumulate(t, "cpu", push_policy=None),
                 lambda: canopy.accumulate(t, np.array(["cpu", "gpu"])), lambda: canopy.accumulate(t, "cpu", tasks=np.zeros(2)),
                 lambda: d.run("cpu", mode=b"lockfree"), lambda: canopy.set_log_level(np.array(["info", "off"]))]:
        with pytest.raises(TypeError, match=r"^(mode|push_policy|backend|tasks|level): must be"):
            call()
    with pytest.raises(canopy.InputError, match="unknown backend 'cpux'"):
        canopy.accumulate(t, "cpux")
    # parse_points takes bytes: an int n used to become n zero bytes (10**10 would take 10 GB).
    with pytest.raises(TypeError, match="data: must be bytes-like"):
        canopy.parse_points(10**10)
    assert canopy.parse_points(bytearray(b"x,y,z,m\n0.5,0.5,0.5,1\n")).shape == (1, 4)
    # An array as a Gadget type: one line, no array printed across lines.
    with pytest.raises(canopy.InputError, match="not a ndarray") as e:
        canopy.parse_points(b"x,y,z,m\n", type=np.zeros((3, 3)))
    assert "\n" not in str(e.value)


def test_write_points_refuses_a_write_protected_file(tmp_path):
    # The tool's rule (RELIABILITY.md): a file made read-only is not replaced; PermissionError.
    f = tmp_path / "ro.bin"
    canopy.write_points(f, canopy.generate("uniform", 10))
    f.chmod(0o444)
    before = f.read_bytes()
    with pytest.raises(PermissionError) as e:
        canopy.write_points(f, canopy.generate("uniform", 20))
    assert e.value.filename == str(f)
    assert f.read_bytes() == before and not [p for p in tmp_path.iterdir() if "canopy-incomplete" in p.name]
    f.chmod(0o644)
    canopy.write_points(f, canopy.generate("uniform", 20))
    assert len(canopy.read_points(f)) == 20
