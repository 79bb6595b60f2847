#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Cross-check of canopy's readers against independent ones: numpy for .npy, plyfile for PLY,
pynbody for Tipsy and Gadget. Files are written here (by numpy and plyfile themselves, Tipsy and
Gadget by hand with struct), read by the independent library and by `canopy convert FILE out.csv`,
and the points must agree (as float32, in file order for npy/PLY, as multisets for the snapshots,
whose family order pynbody chooses), and every file also round-trips through Canopy's binary
format (converted to it and back to CSV, byte for byte). Each part runs only when its module imports; with none of
them importable the test is skipped (exit 77, ctest SKIP_RETURN_CODE), saying which are missing.

usage: point_formats_crosscheck.py CANOPY_BINARY
"""
import importlib.util
import os
import struct
import subprocess
import sys
import tempfile

SKIP = 77
tool = sys.argv[1]
modules = ("numpy", "plyfile", "pynbody")
have = {m: importlib.util.find_spec(m) is not None for m in modules}
missing = [m for m in modules if not have[m]]
if not have["numpy"]:
    # numpy is what every part compares with; plyfile and pynbody need it too.
    print("SKIPPED: numpy is not importable by %s (missing: %s); install numpy, plyfile, pynbody to "
          "cross-check the readers" % (sys.executable, ", ".join(missing)))
    sys.exit(SKIP)
import numpy as np  # noqa: E402

work = tempfile.mkdtemp(prefix="canopy_crosscheck_")
failures = []
checked = []


def convert(src, dst, *options):
    r = subprocess.run([tool, "--log-level", "off", "convert", src, dst, *options], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("canopy convert %s failed: %s" % (src, r.stderr.strip()))


def canopy_points(path, *options):
    """The points canopy reads from `path` (through `canopy convert` to CSV), after checking the
    round trip: the same file converted to Canopy's binary format and that to CSV give the same
    CSV, byte for byte."""
    out, pts, again = (os.path.join(work, name) for name in ("out.csv", "out.pts", "again.csv"))
    convert(path, out, *options)
    convert(path, pts, *options)
    convert(pts, again)
    with open(out, "rb") as a, open(again, "rb") as b:
        if a.read() != b.read():
            failures.append("%s: converting through Canopy's binary format changed the points" % path)
    return np.loadtxt(out, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2).reshape(-1, 4).astype(np.float32)


def compare(name, got, want, ordered=True):
    want = np.asarray(want, dtype=np.float32).reshape(-1, 4)
    if not ordered:
        got = got[np.lexsort(got.T[::-1])]
        want = want[np.lexsort(want.T[::-1])]
    if got.shape != want.shape or not np.array_equal(got, want):
        failures.append("%s: canopy read %s, the independent reader %s\n%s\n%s" % (name, got.shape, want.shape, got[:5], want[:5]))
    else:
        checked.append("%s (%d points)" % (name, len(got)))


rng = np.random.default_rng(7)
xyz = rng.normal(size=(257, 3)) * 100.0
mass = rng.uniform(0.0, 2.0, size=257)

# ------------------------------------------------------------------ numpy .npy
for version in ((1, 0), (2, 0), (3, 0)):
    for dtype in ("<f4", ">f4", "<f8", ">f8"):
        for cols in (3, 4):
            for fortran in (False, True):
                a = np.column_stack([xyz, mass])[:, :cols].astype(dtype)
                if fortran:
                    a = np.asfortranarray(a)
                path = os.path.join(work, "a.npy")
                with open(path, "wb") as f:
                    np.lib.format.write_array(f, a, version=version)
                b = np.load(path).astype(np.float32)
                want = np.column_stack([b, np.ones(len(b), np.float32)]) if cols == 3 else b
                compare("npy v%d %s cols %d fortran %s" % (version[0], dtype, cols, fortran), canopy_points(path), want)

# ------------------------------------------------------------------ PLY (plyfile)
if have["plyfile"]:
    from plyfile import PlyData, PlyElement

    vertex = np.empty(len(xyz), dtype=[("x", "f8"), ("red", "u1"), ("y", "f4"), ("z", "f8"), ("mass", "f4")])
    vertex["x"], vertex["y"], vertex["z"], vertex["mass"], vertex["red"] = xyz[:, 0], xyz[:, 1], xyz[:, 2], mass, 200
    faces = np.empty(3, dtype=[("vertex_indices", "O"), ("flag", "i2")])
    faces["vertex_indices"] = [np.array([0, 1, 2], "i4"), np.array([3, 4, 5, 6], "i4"), np.array([], "i4")]
    faces["flag"] = -1
    for text, order in ((True, "="), (False, "<"), (False, ">")):
        path = os.path.join(work, "c.ply")
        PlyData([PlyElement.describe(vertex, "vertex"), PlyElement.describe(faces, "face")], text=text,
                byte_order=order).write(path)
        v = PlyData.read(path)["vertex"]
        want = np.column_stack([v["x"], v["y"], v["z"], v["mass"]]).astype(np.float32)
        compare("ply %s" % ("ascii" if text else "binary " + order), canopy_points(path), want)

# ------------------------------------------------------------------ Tipsy and Gadget (pynbody)
if have["pynbody"]:
    import pynbody

    def tipsy(path, big, counts):
        e = ">" if big else "<"
        n = sum(counts)
        with open(path, "wb") as f:
            f.write(struct.pack(e + "diiiiii", 1.0, n, 3, counts[0], counts[1], counts[2], 0))
            k = 0
            for family, floats in zip(range(3), (12, 9, 11)):
                for _ in range(counts[family]):
                    f.write(struct.pack(e + "4f", mass[k], *xyz[k]) + struct.pack(e + "%df" % (floats - 4), *([0.01] * (floats - 4))))
                    k += 1

    for big in (True, False):
        path = os.path.join(work, "snap.tipsy")
        tipsy(path, big, (40, 150, 60))
        s = pynbody.load(path)
        want = np.column_stack([np.asarray(s["pos"]), np.asarray(s["mass"])])
        compare("tipsy %s-endian" % ("big" if big else "little"), canopy_points(path), want, ordered=False)
        for fam, sub in (("gas", s.gas), ("dark", s.dm), ("star", s.star)):
            want = np.column_stack([np.asarray(sub["pos"]), np.asarray(sub["mass"])])
            compare("tipsy family %s" % fam, canopy_points(path, "--family", fam), want, ordered=False)

    # A file written by pynbody's own Tipsy writer (the layout its users' files have).
    w = pynbody.new(dm=120, gas=50, star=30)
    w["pos"] = xyz[:200].astype(np.float32)
    w["vel"] = np.zeros((200, 3), dtype=np.float32)
    w["mass"] = np.asarray(mass[:200], dtype=np.float32)
    w.properties["time"] = 1.0
    path = os.path.join(work, "pynbody.tipsy")
    w.write(fmt=pynbody.snapshot.tipsy.TipsySnap, filename=path)
    s = pynbody.load(path)
    want = np.column_stack([np.asarray(s["pos"]), np.asarray(s["mass"])])
    compare("tipsy written by pynbody", canopy_points(path), want, ordered=False)

    def gadget(path, big, npart, table):
        e = ">" if big else "<"
        n = sum(npart)

        def block(f, payload):
            f.write(struct.pack(e + "i", len(payload)) + payload + struct.pack(e + "i", len(payload)))

        head = struct.pack(e + "6i6dddii6Iiiddddii6Ii", *npart, *table, 0.5, 1.0, 0, 0, *npart, 0, 1, 100.0, 0.3, 0.7,
                           0.7, 0, 0, *([0] * 6), 0).ljust(256, b"\0")
        with open(path, "wb") as f:
            block(f, head)
            block(f, struct.pack(e + "%df" % (3 * n), *xyz[:n].ravel()))
            block(f, struct.pack(e + "%df" % (3 * n), *([0.0] * (3 * n))))
            block(f, struct.pack(e + "%di" % n, *range(n)))
            m = [mass[i] for t in range(6) for i in range(sum(npart[:t]), sum(npart[:t + 1])) if table[t] == 0]
            if m:
                block(f, struct.pack(e + "%df" % len(m), *m))

    for big in (False, True):
        path = os.path.join(work, "snapshot_000")
        gadget(path, big, (30, 100, 0, 0, 20, 0), (0.0, 0.25, 0.0, 0.0, 0.0, 0.0))
        s = pynbody.load(path)
        want = np.column_stack([np.asarray(s["pos"]), np.asarray(s["mass"])])
        compare("gadget format 1 %s-endian" % ("big" if big else "little"), canopy_points(path), want, ordered=False)

    # A file written by pynbody's own Gadget writer (format 2, block labels, the layout its users'
    # files have): its writer wants units on every array and the cosmology in the properties.
    w = pynbody.new(dm=120, gas=50, star=30)
    w["pos"] = xyz[:200].astype(np.float32)
    w["vel"] = np.zeros((200, 3), dtype=np.float32)
    w["mass"] = np.asarray(mass[:200], dtype=np.float32)
    w["iord"] = np.arange(200, dtype=np.int32)
    w["pos"].units, w["vel"].units, w["mass"].units = "kpc", "km s**-1", "1e10 Msol"
    for key, value in dict(time=1.0, a=1.0, z=0.0, boxsize=pynbody.units.Unit("1000 kpc"), omegaM0=0.3,
                           omegaL0=0.7, h=0.7).items():
        w.properties[key] = value
    path = os.path.join(work, "pynbody_gadget")
    w.write(fmt=pynbody.snapshot.gadget.GadgetSnap, filename=path)
    s = pynbody.load(path)
    want = np.column_stack([np.asarray(s["pos"]), np.asarray(s["mass"])])
    compare("gadget written by pynbody", canopy_points(path), want, ordered=False)

print("checked:\n  " + "\n  ".join(checked))
if missing:
    print("not checked (module not importable by %s): %s" % (sys.executable, ", ".join(missing)))
if failures:
    print("FAILED:\n" + "\n".join(failures))
    sys.exit(1)
