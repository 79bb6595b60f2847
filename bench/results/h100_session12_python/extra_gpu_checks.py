# Not part of the repository: extra device-array checks for one run on the GPU machine (build/pygpu).
# The pytest suite feeds accumulate_device() CuPy arrays, i.e. the DLPack path only; this also drives
# the __cuda_array_interface__ path (device_accumulate_pointer), a DLPack-only producer, and the
# documented refusals. Prints one line per check; exit status 1 if any check fails.
import gc
import sys
import traceback

import numpy as np
import cupy

import canopy

failures = 0


def check(name, fn):
    global failures
    try:
        detail = fn()
        print(f"PASS {name}" + (f": {detail}" if detail else ""))
    except Exception:
        failures += 1
        print(f"FAIL {name}")
        traceback.print_exc(file=sys.stdout)


host = canopy.generate("plummer", 20000, seed=4)
dev = cupy.asarray(host)
ref = canopy.accumulate_device(dev, max_leaf=16)  # the DLPack path (cupy has __dlpack__)


class CaiOnly:
    """What Numba's device arrays look like to canopy: shape, dtype and __cuda_array_interface__."""
    def __init__(self, a):
        self._a, self.shape, self.dtype = a, a.shape, a.dtype
        self.__cuda_array_interface__ = a.__cuda_array_interface__


class DlpackOnly:
    """A producer with __dlpack__/__dlpack_device__ only (no CAI, not a CuPy array)."""
    def __init__(self, a):
        self._a, self.shape, self.dtype = a, a.shape, a.dtype

    def __dlpack__(self, *args, **kwargs):
        return self._a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def same_as_ref(r):
    assert r.node_count == ref.node_count and r.point_count == 20000, (r.node_count, ref.node_count)
    assert isinstance(r.mass, cupy.ndarray) and int(r.count[0]) == 20000
    cupy.testing.assert_array_equal(r.parent, ref.parent)
    cupy.testing.assert_array_equal(r.permutation, ref.permutation)
    cupy.testing.assert_allclose(r.mass, ref.mass, rtol=1e-5)
    cupy.testing.assert_allclose(r.com, ref.com, rtol=1e-4, atol=1e-6)
    assert r.validate()
    return f"{r.node_count} nodes, depth {r.depth}, {r.info}"


def ref_validates():
    assert ref.validate()
    return f"{ref.node_count} nodes, info {ref.info}"


check("dlpack path (cupy) validates", ref_validates)
check("__cuda_array_interface__ path matches the DLPack path",
      lambda: same_as_ref(canopy.accumulate_device(CaiOnly(dev), max_leaf=16)))
check("a DLPack-only producer matches", lambda: same_as_ref(canopy.accumulate_device(DlpackOnly(dev), max_leaf=16)))


def every_mode_cai():
    for mode in canopy.MODES:
        r = canopy.accumulate_device(CaiOnly(dev), max_leaf=16, mode=mode)
        assert r.validate(), mode
    return ", ".join(canopy.MODES)


check("every mode through __cuda_array_interface__ validates", every_mode_cai)


def host_tree_agrees():
    tree = canopy.build_octree(host, max_leaf=16)
    m = canopy.accumulate(tree, "gpu")
    assert canopy.compare(tree, m)
    return f"host-built tree of {tree.node_count} nodes, gpu backend ok"


check("host arrays through the gpu backend", host_tree_agrees)


def views_outlive_the_pass():
    r = canopy.accumulate_device(dev, max_leaf=16)
    mass = r.mass
    del r
    gc.collect()
    cupy.cuda.Device().synchronize()
    assert abs(float(mass[0]) - 1.0) < 1e-5 and float(mass.sum()) > 1.0
    return "mass view read after the DevicePass was dropped"


check("device views keep the pass alive", views_outlive_the_pass)


def expect(exc, fn, match=None):
    try:
        fn()
    except exc as e:
        if match and match not in str(e):
            raise AssertionError(f"{exc.__name__} without '{match}': {e}")
        return f"{type(e).__name__}: {str(e)[:120]}"
    raise AssertionError(f"no {exc.__name__}")


check("a GPU array to a host function is refused",
      lambda: expect(canopy.InputError, lambda: canopy.build_octree(dev), "a GPU array"))
check("a CAI array to a host function is refused",
      lambda: expect(canopy.InputError, lambda: canopy.build_octree(CaiOnly(dev)), "a GPU array"))
check("a NumPy array to accumulate_device is refused",
      lambda: expect(canopy.InputError, lambda: canopy.accumulate_device(host), "not a device array"))
check("float64 device points are refused",
      lambda: expect(canopy.InputError, lambda: canopy.accumulate_device(dev.astype(cupy.float64))))
check("a strided CAI array is refused",
      lambda: expect(canopy.InputError, lambda: canopy.accumulate_device(CaiOnly(cupy.asfortranarray(dev))),
                     "C-ordered"))


def fortran_dlpack():
    # Not documented beyond "C-ordered": report what happens (any exception is acceptable, a result
    # must still validate).
    try:
        r = canopy.accumulate_device(cupy.asfortranarray(dev), max_leaf=16)
    except Exception as e:
        return f"refused with {type(e).__name__}: {str(e)[:120]}"
    assert r.validate()
    return "accepted (copied?) and validates"


check("a Fortran-ordered CuPy array through DLPack", fortran_dlpack)

print(f"extra_gpu_checks: {failures} failure(s)")
sys.exit(1 if failures else 0)
