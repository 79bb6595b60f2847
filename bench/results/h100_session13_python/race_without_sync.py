# Shows the race the CAI stream test guards against: the same handover with stream=None (the
# interface claims the data is ready) while a non-blocking stream is still writing the points.
import cupy, canopy
source = cupy.asarray(canopy.generate("plummer", 50000, seed=7))
points = cupy.zeros_like(source)
cupy.cuda.Device().synchronize()
spin = cupy.RawKernel(r'''
    extern "C" __global__ void spin(long long cycles) {
      const long long start = clock64();
      while (clock64() - start < cycles) {}
    }''', "spin")
stream = cupy.cuda.Stream(non_blocking=True)
with stream:
    spin((1,), (1,), (cupy.int64(200_000_000),))
    points[...] = source
class Cai:
    def __init__(self, a, s):
        self.shape, self.dtype, self._a = a.shape, a.dtype, a
        self.__cuda_array_interface__ = dict(a.__cuda_array_interface__, version=3, stream=s)
r = canopy.accumulate_device(Cai(points, None), max_leaf=16)
print("stream=None while still writing: total mass", float(r.mass[0]), "(1.0 if the write had finished)")
