# SPDX-License-Identifier: Apache-2.0
"""Canopy from Python: points in, octree and upward-pass moments out, as NumPy arrays.

    import canopy
    points = canopy.generate("plummer", 100_000, seed=1)     # (n, 4) float32: x, y, z, m
    tree = canopy.build_octree(points, max_leaf=32)
    moments = canopy.accumulate(tree, backend="cpu", mode="lockfree")
    print(moments["mass"][0], moments["com"][0])             # the root's
    assert canopy.validate(tree, backend="cpu")              # against the double reference

The work is done by the C++ library (canopy._canopy, a nanobind extension) with the GIL
released; this module checks arguments, gives the payload records their NumPy dtype, and reports
each finished stage to the ``canopy`` logger and to progress callbacks.
"""

import builtins
import contextlib
import errno
import logging
import math
import operator
import os
import stat
import time

import numpy as np

from . import _canopy
from .errors import (
    BackendUnavailableError,
    Error,
    GraphError,
    InputError,
    InvariantError,
    OptionError,
    RunError,
)

__version__ = _canopy.__version__

__all__ = [
    "BACKENDS", "MODES", "PUSH_POLICIES", "TASKS", "PAYLOAD_DTYPE", "REFERENCE_PAYLOAD_DTYPE",
    "Octree", "Dag", "DevicePass",
    "accumulate", "accumulate_device", "brute_force_moments", "build_info", "build_octree", "compare",
    "complete_octree", "detect_format", "generate", "gpu_available", "has_gpu_backend", "host_threads",
    "parse_points", "read_points", "reference_upward_pass", "set_host_threads", "set_log_level",
    "set_progress", "validate", "validate_dag", "write_points",
    "Error", "InputError", "InvariantError", "GraphError", "OptionError", "RunError", "BackendUnavailableError",
]

#: Scheduler modes, from the C++ mode table (canopy::mode_table), in the ladder's order.
MODES = tuple(name for name, _ in _canopy.modes())
#: Push policies (canopy::push_policy_table).
PUSH_POLICIES = tuple(name for name, _ in _canopy.push_policies())
#: Backends of accumulate() and validate(); "auto" is gpu when usable, else cpu.
BACKENDS = ("reference", "cpu", "gpu", "auto")
#: How the pass is cut into tasks (upward_runner.hpp); "auto": twig on the GPU, node on the CPU.
TASKS = ("auto", "node", "twig", "bucket")
_DISTRIBUTIONS = ("uniform", "plummer", "clusters", "lattice")
_MAX_CLUSTERS = 1 << 20  # as the tool's gen --clusters


def _payload_dtype(is_double):
    # The C++ struct multipole<T> (multipole.hpp), field for field at its own offsets, so that
    # records cross without conversion.
    layout = _canopy.payload_layout(is_double)
    f = np.float64 if is_double else np.float32
    return np.dtype({
        "names": ["count", "mass", "com", "m2", "lo", "hi"],
        "formats": [np.uint32, f, (f, 3), (f, 6), (f, 3), (f, 3)],
        "offsets": [layout[k] for k in ("count", "mass", "com", "m2", "lo", "hi")],
        "itemsize": layout["itemsize"],
    })


#: One node's payload from the scheduler backends (float): count, mass, com[3], m2[6] (xx, xy, xz,
#: yy, yz, zz: central second moments), lo[3], hi[3] (bounding box of the points).
PAYLOAD_DTYPE = _payload_dtype(False)
#: The same in double, from the reference pass.
REFERENCE_PAYLOAD_DTYPE = _payload_dtype(True)


def _records(raw, dtype):
    # (n, itemsize) uint8 from the extension -> (n,) structured, sharing its memory.
    return raw.reshape(-1).view(dtype)


# --- information -------------------------------------------------------------------------------

def has_gpu_backend():
    """Whether this module was built with CUDA (the gpu backend, device arrays, GPU DAG runs)."""
    return bool(_canopy.built_with_gpu)


def gpu_available():
    """Whether the gpu backend can run now: built with CUDA and a CUDA device is usable."""
    return bool(_canopy.gpu_available())


def build_info():
    """What this module has: version, GPU support, modes, push policies, backends, task kinds."""
    return {
        "version": __version__,
        "gpu_backend": has_gpu_backend(),
        "gpu_available": gpu_available(),
        "device_arrays": hasattr(_canopy, "device_accumulate"),
        "modes": MODES,
        "push_policies": PUSH_POLICIES,
        "backends": BACKENDS,
        "tasks": TASKS,
        "host_threads": _canopy.host_threads(),
    }


def set_host_threads(count):
    """Threads for generating and building trees (0 = all cores); results never depend on it."""
    count = _int32(count, "count")
    if count < 0:
        raise InputError.of("count", f"must be >= 0, not {count}")
    _canopy.set_host_threads(count)


def host_threads():
    return _canopy.host_threads()


# --- logging and progress ----------------------------------------------------------------------

log = logging.getLogger("canopy")
log.addHandler(logging.NullHandler())
_progress_callbacks = []
_handler = None
_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
           "warning": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 1}


class _ToolFormatter(logging.Formatter):
    """``canopy: info: <message>``, the tool's stderr lines."""

    def format(self, record):
        return f"canopy: {record.levelname.lower()}: {record.getMessage()}"


def set_log_level(level):
    """Print each finished stage (reading, building, each pass, with its time) on stderr, as the
    tool does: ``"trace"``, ``"debug"``, ``"info"``, ``"warn"``, ``"error"`` or ``"off"`` (or a
    ``logging`` level number). The messages go to the ``logging`` logger ``"canopy"``; this adds
    one stderr handler to it (once). The environment variable CANOPY_LOG_LEVEL sets it at import."""
    global _handler
    if isinstance(level, (bool, np.bool_)) or not isinstance(level, (str, int, np.integer)):
        raise TypeError(f"level: must be a level name or a logging level number, not {type(level).__name__}")
    if isinstance(level, str):
        if level.lower() not in _LEVELS:
            raise InputError.of("level", f"unknown log level '{level}' ({', '.join(_LEVELS)})")
        level = _LEVELS[level.lower()]
    if _handler is None:
        _handler = logging.StreamHandler()
        _handler.setFormatter(_ToolFormatter())
        log.addHandler(_handler)
    log.setLevel(level)


def set_progress(callback):
    """Call ``callback(stage, message, seconds)`` after every finished stage (``stage`` is
    ``"read"``, ``"generate"``, ``"build"``, ``"reference"``, ``"pass"``, ``"compare"``,
    ``"dag"``). ``None`` removes every callback. Returns ``callback``, so it can decorate."""
    if callback is None:
        _progress_callbacks.clear()
    elif not callable(callback):
        raise InputError.of("callback", "must be callable or None")
    else:
        _progress_callbacks.append(callback)
    return callback


@contextlib.contextmanager
def _stage(stage, describe):
    # `describe` is called after the stage, so that it can name what the stage produced.
    t0 = time.perf_counter()
    yield
    seconds = time.perf_counter() - t0
    message = describe()
    log.info("%s (%.1f ms)", message, seconds * 1e3)
    for cb in list(_progress_callbacks):
        cb(stage, message, seconds)


if os.environ.get("CANOPY_LOG_LEVEL"):
    set_log_level(os.environ["CANOPY_LOG_LEVEL"])


# --- arguments ----------------------------------------------------------------------------------

def _integer(value, what):
    """``value`` as a Python int, the way Python and NumPy take an integer argument: an int, a NumPy
    integer or a bool, or else a float of integral value (``2.0``). A float with a fraction, NaN or
    infinity is an InputError (a ValueError), anything else (a string, None, an array) a TypeError,
    both naming ``what``. ``int()`` used to truncate 2.5 to 2 and parse the string "3"."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        pass
    if isinstance(value, (float, np.floating)):
        if math.isfinite(value) and float(value).is_integer():
            return int(value)
        raise InputError.of(what, f"must be an integer, not {value!r}")
    raise TypeError(f"{what}: must be an integer, not {type(value).__name__}")


def _int32(value, what):
    """``value`` (as _integer takes it) as an int that fits the C++ int32 it becomes (a larger one
    was nanobind's TypeError, "incompatible function arguments"); the C++ layer checks its range
    further (blocks >= 0, queue_capacity >= 0, max_leaf >= 1, ...)."""
    v = _integer(value, what)
    if not -2**31 <= v <= 2**31 - 1:
        raise InputError.of(what, f"must fit int32 (at most 2^31 - 1), not {value}")
    return v


def _seed(value, what="seed"):
    """A seed: an integer in [0, 2^64 - 1] (the tool's --seed and gen: spec's SEED)."""
    v = _integer(value, what)
    if not 0 <= v <= 2**64 - 1:
        raise InputError.of(what, f"must be an integer in [0, 2^64 - 1], not {value}")
    return v


def _number(value, what):
    """``value`` as a float: an int or float (Python or NumPy); a string or anything else is a
    TypeError naming ``what`` (``float()`` used to parse the string "10")."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{what}: must be a number, not {type(value).__name__}")
    return float(value)


# --- points -------------------------------------------------------------------------------------

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _check_float32_range(a, what):
    """A finite value beyond float32's range became inf in the conversion, and the C++ check then
    called it "not finite": refused as the file readers refuse it (one rule for float's range)."""
    if a.dtype.kind != "f" or a.dtype.itemsize <= 4 or a.size == 0:
        return
    with np.errstate(over="ignore", invalid="ignore"):
        bad = np.isinf(a.astype(np.float32)) & np.isfinite(a)
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        field = f"mass m" if j == 3 else f"coordinate {'xyz'[j]}"
        raise InputError.of(what, f"point {i}: {field} = {format(float(a[i, j]), '.17g')} is beyond float32's range "
                                  f"(+-{_FLOAT32_MAX:.8g})")


def _as_points(points, what="points"):
    """(n, 4) float32, C order: x, y, z, m; (n, 3) gets mass 1 (as the .npy reader does)."""
    if hasattr(points, "__cuda_array_interface__") or _dlpack_device_type(points) == _DLPACK_CUDA:
        raise InputError.of(what, "a GPU array: use canopy.accumulate_device() (host functions take NumPy arrays)")
    a = np.asarray(points)
    if a.ndim != 2 or a.shape[1] not in (3, 4):
        raise InputError.of(what, f"points must have shape (n, 3) or (n, 4) (x, y, z[, m]), not {a.shape}")
    if a.dtype.kind not in "fiu":
        raise InputError.of(what, f"points must be numbers, not dtype {a.dtype}")
    _check_float32_range(a, what)
    if a.shape[1] == 3:
        a = np.concatenate([a.astype(np.float32, copy=False), np.ones((a.shape[0], 1), np.float32)], axis=1)
    return np.ascontiguousarray(a, dtype=np.float32)


def generate(dist, n=None, seed=1, *, clusters=16, depth=None, per_leaf=None):
    """Seeded points (the library's generators; the same seed gives the same points everywhere):
    ``"uniform"`` (unit cube), ``"plummer"`` (scale radius 1, cut at 10), ``"clusters"``
    (``clusters`` Gaussian blobs), each mass 1/n; ``"lattice"`` takes ``depth`` and ``per_leaf``
    instead of ``n`` (exactly ``per_leaf`` points in every finest cell). Returns (n, 4) float32."""
    if not isinstance(dist, str):
        raise InputError.of("dist", f"must be one of {', '.join(_DISTRIBUTIONS)}")
    seed = _seed(seed)
    if dist.lower() == "lattice":
        if depth is None or per_leaf is None or n is not None:
            raise InputError.of("generate", "lattice points take depth= and per_leaf=, not n")
        depth, per_leaf = _int32(depth, "depth"), _int32(per_leaf, "per_leaf")
        with _stage("generate", lambda: f"generated {len(p):,} points (lattice, depth {depth}, {per_leaf} per leaf)"):
            p = _canopy.generate_lattice(depth, per_leaf, seed)
        return p
    if n is None:
        raise InputError.of("n", "the number of points is missing")
    n = _integer(n, "n")
    if not 0 <= n <= 2**31 - 1:
        raise InputError.of("n", f"the number of points must be in [0, 2^31 - 1], not {n}")
    clusters = _integer(clusters, "clusters")
    # The tool's --clusters bound: each cluster costs memory whatever n is (50M took 1.6 GB).
    if dist.lower() == "clusters" and not 1 <= clusters <= _MAX_CLUSTERS:
        raise InputError.of("clusters", f"the number of clusters must be in [1, {_MAX_CLUSTERS}], not {clusters}")
    with _stage("generate", lambda: f"generated {len(p):,} points ({dist}, seed {seed})"):
        p = _canopy.generate(dist, n, seed, clusters if dist.lower() == "clusters" else 16)  # else unused
    return p


def _gadget_type(type):
    if type is None or (isinstance(type, str) and type == "all"):
        return -1
    if isinstance(type, str) and type.isdigit():  # "1", as the tool's --type takes it
        type = int(type)
    shown = repr(type) if isinstance(type, (str, int, float, np.number)) else f"a {builtins.type(type).__name__}"
    try:
        t = _integer(type, "type")
    except (TypeError, ValueError):  # 2.5, "gas", an array: never truncated
        raise InputError.of("type", f"a Gadget particle type is 0..5 or 'all', not {shown}") from None
    if not 0 <= t <= 5:
        raise InputError.of("type", f"a Gadget particle type is 0..5 or 'all', not {type!r}")
    return t


def _check_readable(path, what="points file"):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "no such file", path) from None
    # Any other OSError (a name too long, a loop of links, permission denied) says what it is.
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, f"is a directory, not a {what}", path)


def read_points(path, *, family="all", type=None):
    """Points from any file the library reads, told apart by content: Canopy binary or CSV,
    Tipsy, Gadget-1/2, PLY, NumPy .npy. ``family`` (``"gas"``, ``"dark"``, ``"star"``) picks one
    Tipsy family, ``type`` (0..5) one Gadget particle type; either one for another format is an
    InputError. Returns (n, 4) float32. A bad file raises InputError whose ``source`` is the path."""
    path = os.fspath(path)
    _check_readable(path)
    with _stage("read", lambda: f"read {len(p):,} points from {path} ({detect_format(path)})"):
        p = _canopy.read_points(path, str(family), _gadget_type(type))
    return p


def parse_points(data, *, family="all", type=None, source="<memory>"):
    """The same readers over a whole file's bytes; errors name ``source``."""
    try:
        data = memoryview(data)  # bytes-like only: bytes(n) of an int n made n zero bytes
    except TypeError:
        raise TypeError(f"data: must be bytes-like (bytes, bytearray, memoryview), not {builtins.type(data).__name__}") from None
    with _stage("read", lambda: f"parsed {len(p):,} points from {source}"):
        p = _canopy.parse_points(bytes(data), str(family), _gadget_type(type), str(source))
    return p


def detect_format(path):
    """``"binary"``, ``"csv"``, ``"tipsy"``, ``"gadget"``, ``"ply"`` or ``"npy"``, from the content."""
    path = os.fspath(path)
    _check_readable(path)
    return _canopy.detect_format(path)


def write_points(path, points):
    """Canopy binary, or CSV when the name ends in .csv (temporary file + rename; a device or FIFO
    is written in place). An I/O failure raises OSError naming ``path`` (IsADirectoryError for a
    directory, ...)."""
    _canopy.write_points(os.fspath(path), _as_points(points))


# --- octrees ------------------------------------------------------------------------------------

class Octree:
    """The host octree: level-ordered, each level in Morton order, a node's children contiguous.
    Node 0 is the root. Every array is a read-only NumPy view of the tree's own memory (it keeps
    the tree alive)."""

    def __init__(self, impl):
        if not isinstance(impl, _canopy.Octree):
            raise TypeError("make an Octree with canopy.build_octree() or canopy.complete_octree()")
        self._impl = impl

    depth = property(lambda self: self._impl.depth, doc="deepest level (the root is level 0)")
    node_count = property(lambda self: self._impl.node_count)
    leaf_count = property(lambda self: self._impl.leaf_count)
    point_count = property(lambda self: self._impl.point_count, doc="points in the tree")
    points = property(lambda self: self._impl.points, doc="(n, 4) float32, sorted by Morton code")
    parent = property(lambda self: self._impl.parent, doc="int32 per node, -1 for the root")
    first_child = property(lambda self: self._impl.first_child, doc="int32 per node, -1 for leaves")
    child_count = property(lambda self: self._impl.child_count, doc="int32 per node, 0 for leaves")
    point_begin = property(lambda self: self._impl.point_begin, doc="a node covers points[point_begin:+npoints]")
    npoints = property(lambda self: self._impl.point_count_per_node, doc="int32 per node: its points")
    level = property(lambda self: self._impl.level, doc="uint8 per node")
    level_offset = property(lambda self: self._impl.level_offset, doc="level L is nodes [lo[L], lo[L+1])")
    leaves = property(lambda self: self._impl.leaves, doc="leaf ids in Morton order")
    cell_lo = property(lambda self: self._impl.cell_lo, doc="(nodes, 3) float64: the node's cubic cell")
    cell_hi = property(lambda self: self._impl.cell_hi)

    @property
    def nodes_per_level(self):
        """int32 array of depth + 1 entries."""
        return np.diff(self.level_offset)

    def nodes(self):
        """One structured array (a copy), a record per node: parent, first_child, child_count,
        level, point_begin, npoints, cell_lo[3], cell_hi[3]."""
        dt = np.dtype([("parent", np.int32), ("first_child", np.int32), ("child_count", np.int32),
                       ("level", np.uint8), ("point_begin", np.int32), ("npoints", np.int32),
                       ("cell_lo", np.float64, 3), ("cell_hi", np.float64, 3)])
        out = np.empty(self.node_count, dt)
        for name in dt.names:
            out[name] = getattr(self, name)
        return out

    def check(self):
        """Checks the layout invariants; raises InvariantError naming the first bad node."""
        self._impl.check()

    def __len__(self):
        return self.node_count

    def __repr__(self):
        return (f"<canopy.Octree {self.node_count:,} nodes, {self.leaf_count:,} leaves, depth {self.depth}, "
                f"{self.point_count:,} points>")


def build_octree(points, max_leaf=32, max_depth=21):
    """The adaptive octree of ``points`` ((n, 3) or (n, 4)): a cell of more than ``max_leaf``
    points is split, down to level ``max_depth`` (0..21)."""
    max_leaf, max_depth = _int32(max_leaf, "max_leaf"), _int32(max_depth, "max_depth")
    a = _as_points(points)
    with _stage("build", lambda: f"built octree: depth {t.depth}, {t.node_count:,} nodes, {t.leaf_count:,} leaves"):
        t = Octree(_canopy.build_octree(a, max_leaf, max_depth))
    return t


def complete_octree(depth, per_leaf, seed=1):
    """The complete octree of the unit cube (every leaf on level ``depth``, ``per_leaf`` points
    each), built in closed form: the points of generate("lattice", depth=..., per_leaf=...)."""
    depth, per_leaf, seed = _int32(depth, "depth"), _int32(per_leaf, "per_leaf"), _seed(seed)
    with _stage("build", lambda: f"built complete octree of depth {depth}: {t.node_count:,} nodes"):
        t = Octree(_canopy.complete_octree(depth, per_leaf, seed))
    return t


def _tree_impl(tree):
    if not isinstance(tree, Octree):
        raise TypeError(f"expected a canopy.Octree, not {type(tree).__name__}")
    return tree._impl


# --- the upward pass ----------------------------------------------------------------------------

def _name(value, what, choices=None):
    """A name argument (backend, mode, tasks, push_policy): anything but a string is a TypeError
    (an array raised NumPy's "truth value is ambiguous", an int nanobind's "incompatible function
    arguments"); a string not among ``choices`` is left to the caller's InputError."""
    if not isinstance(value, str):
        listed = f" ({', '.join(choices)})" if choices else ""
        raise TypeError(f"{what}: must be a string{listed}, not {builtins.type(value).__name__}")
    return value


def _resolve_backend(backend):
    _name(backend, "backend", BACKENDS)
    if backend not in BACKENDS:
        raise InputError.of("backend", f"unknown backend '{backend}' ({', '.join(BACKENDS)})")
    if backend == "auto":
        return "gpu" if gpu_available() else "cpu"
    return backend


def reference_upward_pass(tree):
    """The serial double-precision reference: one REFERENCE_PAYLOAD_DTYPE record per node."""
    impl = _tree_impl(tree)
    with _stage("reference", lambda: "reference upward pass"):
        r = _records(_canopy.reference_upward_pass(impl), REFERENCE_PAYLOAD_DTYPE)
    return r


def brute_force_moments(tree):
    """Every node's moments straight from its points (double): the oracle of the reference."""
    impl = _tree_impl(tree)
    with _stage("reference", lambda: "brute-force moments of every node"):
        r = _records(_canopy.brute_force_moments(impl), REFERENCE_PAYLOAD_DTYPE)
    return r


def accumulate(tree, backend="cpu", *, mode="continuation", tasks="auto", push_policy="round-robin", blocks=0,
               threads=128, queue_capacity=0, deadline_ms=10000, report=False):
    """The upward pass of ``tree`` on ``backend``: ``"reference"`` (serial, double), ``"cpu"``
    (the scheduler on threads, float), ``"gpu"`` (the persistent kernel, float) or ``"auto"``.
    ``mode`` is one of MODES; ``blocks`` the GPU blocks or CPU workers (0 = all); a run still
    going after ``deadline_ms`` stops with RunError(status="timeout"). Returns one record per
    node (PAYLOAD_DTYPE; REFERENCE_PAYLOAD_DTYPE for the reference): ``m["mass"]``,
    ``m["com"]`` (nodes, 3), ... With ``report=True`` returns ``(moments, info)``, info a dict of
    backend, device, tasks and elapsed_us (the pass alone)."""
    impl = _tree_impl(tree)
    backend = _resolve_backend(backend)
    if _name(tasks, "tasks", TASKS) not in TASKS:
        raise InputError.of("tasks", f"unknown task kind '{tasks}' ({', '.join(TASKS)})")
    if backend == "reference":
        t0 = time.perf_counter()
        m = reference_upward_pass(tree)
        info = {"backend": "reference", "device": "host (double)", "tasks": "node",
                "elapsed_us": (time.perf_counter() - t0) * 1e6}
        return (m, info) if report else m
    blocks, threads = _int32(blocks, "blocks"), _int32(threads, "threads")
    queue_capacity = _int32(queue_capacity, "queue_capacity")
    deadline_ms = _number(deadline_ms, "deadline_ms")
    mode, push_policy = _name(mode, "mode", MODES), _name(push_policy, "push_policy", PUSH_POLICIES)
    _canopy.check_scheduler_options(mode, push_policy, blocks, threads, queue_capacity, deadline_ms)
    with _stage("pass", lambda: f"{r.backend} backend upward pass on {r.device} ({r.elapsed_us:.1f} us)"):
        raw, r = _canopy.accumulate(impl, backend, tasks, mode, push_policy, blocks, threads, queue_capacity,
                                    deadline_ms)
    m = _records(raw, PAYLOAD_DTYPE)
    info = {"backend": r.backend, "device": r.device, "tasks": r.tasks, "elapsed_us": r.elapsed_us}
    return (m, info) if report else m


def _as_records(moments, what):
    m = np.asarray(moments)
    if m.dtype not in (PAYLOAD_DTYPE, REFERENCE_PAYLOAD_DTYPE):
        raise InputError.of(what, f"expected records of canopy.PAYLOAD_DTYPE or REFERENCE_PAYLOAD_DTYPE, not {m.dtype}")
    if m.ndim != 1:
        raise InputError.of(what, f"expected one record per node (1-d), not shape {m.shape}")
    return np.ascontiguousarray(m)


def compare(tree, moments, reference=None, *, blocked_leaves=False):
    """Compares ``moments`` (float or double records, one per node) with ``reference`` (double;
    default: reference_upward_pass(tree)) as ``canopy validate`` does: the worst normalised error
    of mass, com, m2 and bbox against bounds from the precision and the depth, and exact counts.
    ``blocked_leaves``: the moments summed leaves as the cpu backend does (blocks, compensated),
    which allows a tighter bound for large leaves. A bound too loose to check anything (a leaf of
    thousands of points summed plainly) is not within tolerance (``bounds_meaningful`` false).
    Returns a Comparison (true when within tolerance)."""
    impl = _tree_impl(tree)
    m = _as_records(moments, "moments")
    if len(m) != tree.node_count:
        raise InputError.of("moments", f"{len(m)} records for {tree.node_count} nodes")
    ref = reference_upward_pass(tree) if reference is None else _as_records(reference, "reference")
    if ref.dtype != REFERENCE_PAYLOAD_DTYPE or len(ref) != tree.node_count:
        raise InputError.of("reference", "must be REFERENCE_PAYLOAD_DTYPE records, one per node")
    with _stage("compare", lambda: f"compared: {c.summary()}"):
        c = _canopy.compare(impl, m.view(np.uint8), m.dtype == REFERENCE_PAYLOAD_DTYPE, ref.view(np.uint8),
                            bool(blocked_leaves))
    return c


def validate(tree, backend="cpu", **options):
    """Runs the pass on ``backend`` (options as accumulate()) and compares every node with the
    double reference; ``backend="reference"`` checks the reference against brute-force moments.
    Returns the Comparison (``bool(c)``: within tolerance; ``c.summary()``: one line)."""
    backend = _resolve_backend(backend)
    if backend == "reference":
        return compare(tree, brute_force_moments(tree), reference_upward_pass(tree))
    return compare(tree, accumulate(tree, backend, **options), blocked_leaves=backend == "cpu")


# --- device arrays ------------------------------------------------------------------------------

_DLPACK_CUDA = 2  # kDLCUDA


def _dlpack_device_type(x):
    f = getattr(x, "__dlpack_device__", None)
    if f is None:
        return None
    try:
        return int(f()[0])
    except Exception:  # an object that only pretends: treated as no DLPack device
        return None


def _on_device(x):
    """A DLPack view of the device -> CuPy when it is installed, else the DLPack object itself
    (``torch.from_dlpack``, ``jax.dlpack`` and others take it)."""
    try:
        import cupy
    except ImportError:
        return x
    return cupy.from_dlpack(x)


class DevicePass:
    """An octree built on the GPU from device points and its upward pass, all left on the device.
    Payload fields (``count``, ``mass``, ``com``, ``m2``, ``lo``, ``hi``) and tree arrays
    (``parent``, ``first_child``, ``child_count``, ``point_begin``, ``npoints``, ``level``,
    ``points`` sorted, ``permutation``: sorted position -> input index) are device arrays (CuPy
    when installed) that view this object's memory and keep it alive."""

    _PAYLOAD = ("count", "mass", "com", "m2", "lo", "hi")
    _TREE = {"parent": "parent", "first_child": "first_child", "child_count": "child_count",
             "point_begin": "point_begin", "npoints": "point_count_per_node", "level": "level",
             "points": "points", "permutation": "permutation"}

    def __init__(self, impl):
        self._impl = impl
        self.node_count = impl.node_count
        self.leaf_count = impl.leaf_count
        self.point_count = impl.point_count
        self.depth = impl.depth
        self.info = {"backend": "gpu", "device": impl.device, "tasks": impl.tasks, "elapsed_us": impl.elapsed_us}

    def __getattr__(self, name):
        if name in DevicePass._PAYLOAD:
            return _on_device(getattr(self._impl, name))
        if name in DevicePass._TREE:
            return _on_device(getattr(self._impl, DevicePass._TREE[name]))
        raise AttributeError(name)

    def download(self):
        """(Octree, moments): host copies, for checks and plots."""
        tree, raw = self._impl.download()
        return Octree(tree), _records(raw, PAYLOAD_DTYPE)

    def validate(self):
        """The device result against the double reference of the downloaded tree."""
        tree, moments = self.download()
        return compare(tree, moments)


def _dlpack_for_legacy_stream(x):
    """The DLPack capsule of `x` for a consumer on the legacy default stream: the protocol's
    ``stream=1``, so that the producer makes that stream wait for its pending work on `x` (CuPy,
    PyTorch and JAX do) before the module reads it. A producer whose ``__dlpack__`` takes no
    ``stream`` (DLPack before 0.6) gives its capsule as it is, the data taken to be ready."""
    try:
        return x.__dlpack__(stream=1)
    except TypeError:
        return x.__dlpack__()


def accumulate_device(points, max_leaf=32, max_depth=21, *, mode="continuation", tasks="auto",
                      push_policy="round-robin", blocks=0, threads=128, queue_capacity=0, deadline_ms=10000):
    """Builds the octree of device points on the GPU and runs the gpu upward pass there, copying
    nothing to the host. ``points``: an (n, 4) float32 C-ordered array on a CUDA device, through
    ``__dlpack__`` (CuPy, PyTorch, JAX) or ``__cuda_array_interface__`` (Numba). Work runs on the
    legacy default stream (it waits for other blocking streams); DLPack's producer is asked for the
    array with ``stream=1`` (that stream), an interface's ``stream`` (version 3) is synchronised
    first, so work still writing the points on a non-blocking stream finishes before they are
    read. Returns a DevicePass."""
    if not hasattr(_canopy, "device_accumulate"):
        raise BackendUnavailableError("accumulate_device: this canopy module was built without CUDA support "
                                      "(CANOPY_GPU=OFF)")
    if _name(tasks, "tasks", TASKS) not in TASKS:
        raise InputError.of("tasks", f"unknown task kind '{tasks}' ({', '.join(TASKS)})")
    sched = (_name(mode, "mode", MODES), _name(push_policy, "push_policy", PUSH_POLICIES), _int32(blocks, "blocks"),
             _int32(threads, "threads"), _int32(queue_capacity, "queue_capacity"), _number(deadline_ms, "deadline_ms"))
    max_leaf, max_depth = _int32(max_leaf, "max_leaf"), _int32(max_depth, "max_depth")
    shape = tuple(getattr(points, "shape", ()))
    if len(shape) != 2 or shape[1] != 4 or str(getattr(points, "dtype", "")) != "float32":
        raise InputError.of("points", f"device points must be an (n, 4) float32 array, not shape {shape}, "
                                      f"dtype {getattr(points, 'dtype', None)}")
    with _stage("pass", lambda: f"gpu build and upward pass on {r.device} ({r.elapsed_us:.1f} us pass)"):
        if _dlpack_device_type(points) == _DLPACK_CUDA:
            r = _canopy.device_accumulate(_dlpack_for_legacy_stream(points), max_leaf, max_depth, tasks, *sched)
        elif hasattr(points, "__cuda_array_interface__"):
            cai = points.__cuda_array_interface__
            if cai.get("typestr") != "<f4" or cai.get("strides") not in (None, (16, 4)):
                raise InputError.of("points", "device points must be C-ordered little-endian float32")
            # Version 3's stream: None (or absent) when the data is ready; else the stream the
            # producer's work on it runs on, which the module waits for. 0 is not allowed.
            stream = cai.get("stream")
            if stream is not None and (not isinstance(stream, int) or stream <= 0):
                raise InputError.of("points", f"__cuda_array_interface__ stream must be None or a positive "
                                              f"integer, not {stream!r}")
            r = _canopy.device_accumulate_pointer(int(cai["data"][0]), int(shape[0]), int(stream or 0),
                                                  max_leaf, max_depth, tasks, *sched)
        else:
            raise InputError.of("points", "not a device array (no __dlpack__ on a CUDA device, no "
                                          "__cuda_array_interface__): use build_octree() and accumulate()")
    return DevicePass(r)


# --- general DAGs -------------------------------------------------------------------------------

def _integer_array(values, what):
    """``values`` as an int64 array: integers, or floats that are whole numbers; anything else (0.5,
    NaN, strings) raises InputError (NumPy would truncate 1.7 to 1, or raise its own ValueError)."""
    try:
        a = np.asarray(values)
    except (ValueError, TypeError) as e:
        raise InputError.of(what, f"not an array of integers ({e})") from None
    if a.size == 0:
        return a.astype(np.int64)
    if a.dtype.kind in "iu":
        if a.dtype.kind == "u" and a.max() > np.iinfo(np.int64).max:
            raise InputError.of(what, "values must fit int64")
        return a.astype(np.int64)
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)):
            raise InputError.of(what, "must be integers, not NaN or infinite")
        if np.any(a != np.floor(a)):
            bad = a[a != np.floor(a)].flat[0]
            raise InputError.of(what, f"must be integers, not {bad!r}")
        if np.any(np.abs(a) >= 2.0**63):
            raise InputError.of(what, "values must fit int64")
        return a.astype(np.int64)
    raise InputError.of(what, f"must be integers, not dtype {a.dtype}")


class Dag:
    """A dependency DAG: ``task_count`` tasks, ``edges`` an (E, 2) integer array where (a, b)
    means b depends on a, an int64 ``weight`` per task (default 0). Every task computes
    ``value[t] = weight[t] + 1 + sum of its predecessors' values`` (mod 2^64), which a serial
    topological execution (reference()) checks. Cycles, self-loops, duplicate edges and tasks out
    of range raise GraphError."""

    def __init__(self, task_count, edges, weights=None):
        n = _integer(task_count, "task_count")
        if n < 0 or n > 2**31 - 1:
            raise InputError.of("task_count", f"must be in [0, 2^31 - 1], not {task_count}")
        e = _integer_array(edges, "edges")
        if e.size == 0:
            e = np.zeros((0, 2), np.int64)
        elif e.ndim != 2 or e.shape[1] != 2:
            # Never reshaped: [[0, 1, 2], [3, 4, 5]] used to become three edges.
            raise InputError.of("edges", f"must have shape (E, 2): (a, b) means b depends on a; not {e.shape}")
        if e.size and (e.min() < -2**31 or e.max() > 2**31 - 1):
            raise InputError.of("edges", "task ids must fit int32")
        w = np.zeros(n, np.int64) if weights is None else _integer_array(weights, "weights")
        if w.ndim != 1:
            raise InputError.of("weights", f"must have shape ({n},), one per task; not {w.shape}")
        self._impl = _canopy.dag_from_edges(n, np.ascontiguousarray(e, dtype=np.int32), w)

    @classmethod
    def from_dot(cls, path):
        """A DAG from a Graphviz DOT file (optional ``weight`` per node); ``names`` keeps the
        DOT node names. A syntax error raises InputError, a cycle GraphError naming its nodes."""
        path = os.fspath(path)
        _check_readable(path, "DOT file")
        self = cls.__new__(cls)
        self._impl = _canopy.read_dag(path)
        return self

    task_count = property(lambda self: self._impl.task_count)
    edge_count = property(lambda self: self._impl.edge_count)
    sink_count = property(lambda self: self._impl.sink_count)
    sources = property(lambda self: np.asarray(self._impl.sources, dtype=np.int32))
    names = property(lambda self: self._impl.names)
    weights = property(lambda self: self._impl.weights)

    def reference(self):
        """uint64 values of the serial topological execution."""
        with _stage("dag", lambda: f"reference topological execution of {self.task_count:,} tasks"):
            v = self._impl.reference()
        return v

    def run(self, backend="cpu", *, mode="continuation", push_policy="round-robin", blocks=0, threads=128,
            queue_capacity=0, deadline_ms=10000, report=False):
        """uint64 values computed by the scheduler on ``backend`` (``"cpu"``, ``"gpu"``, ``"auto"``)."""
        backend = _resolve_backend(backend)
        if backend == "reference":
            t0 = time.perf_counter()
            v = self.reference()
            info = {"backend": "reference", "device": "serial host", "elapsed_us": (time.perf_counter() - t0) * 1e6}
            return (v, info) if report else v
        with _stage("dag", lambda: f"{backend} backend DAG run on {device} ({us:.1f} us)"):
            v, device, us = self._impl.run(backend, _name(mode, "mode", MODES),
                                           _name(push_policy, "push_policy", PUSH_POLICIES), _int32(blocks, "blocks"),
                                           _int32(threads, "threads"), _int32(queue_capacity, "queue_capacity"),
                                           _number(deadline_ms, "deadline_ms"))
        return (v, {"backend": backend, "device": device, "elapsed_us": us}) if report else v

    def __repr__(self):
        return f"<canopy.Dag {self.task_count:,} tasks, {self.edge_count:,} edges>"


class DagCheck:
    """validate_dag()'s result: true when every value matches the reference."""

    def __init__(self, values, expected, info):
        self.values = values
        self.expected = expected
        self.info = info
        bad = np.flatnonzero(values != expected)
        self.mismatches = int(bad.size)
        self.first_mismatch = int(bad[0]) if bad.size else -1

    def __bool__(self):
        return self.mismatches == 0

    def __repr__(self):
        if self:
            return f"<canopy.DagCheck PASS: {len(self.values):,} tasks match the reference>"
        t = self.first_mismatch
        return (f"<canopy.DagCheck FAIL: {self.mismatches:,} of {len(self.values):,} tasks differ (first: task {t}: "
                f"got {self.values[t]}, expected {self.expected[t]})>")


def validate_dag(dag, backend="cpu", **options):
    """Runs ``dag`` on ``backend`` and compares every task's value with the reference."""
    values, info = dag.run(backend, report=True, **options)
    return DagCheck(values, dag.reference(), info)
