#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpora of the Tipsy, Gadget, PLY and .npy fuzz targets (fuzz/corpus/points_*/).

Hand-made files, standard library only: valid files of each layout the readers accept, and one
of each kind of defect they must reject (truncations, counts, markers, NaN, negative masses).
The files are committed; rerun this (python3 fuzz/make_format_seeds.py) after changing it.
"""
import math
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


PTS = [(1.0, 2.0, 3.0, 0.5), (-1.0, 0.25, 7.0, 2.0), (0.0, -0.0, 1e-3, 0.0)]


# ---------------------------------------------------------------------------------- Tipsy
def tipsy(gas, dark, star, big=True, padded=True, nbodies=None, ndim=3):
    e = ">" if big else "<"
    n = len(gas) + len(dark) + len(star)
    out = struct.pack(e + "diiiii", 0.5, n if nbodies is None else nbodies, ndim, len(gas), len(dark), len(star))
    if padded:
        out += struct.pack(e + "i", 0)
    for recs, floats in ((gas, 12), (dark, 9), (star, 11)):
        for x, y, z, m in recs:
            out += struct.pack(e + "4f", m, x, y, z) + struct.pack(e + "%df" % (floats - 4), *range(floats - 4))
    return out


good = tipsy(PTS[:1], PTS[1:], PTS[:1])
put("points_tipsy", "big_padded.tipsy", good)
put("points_tipsy", "little_padded.tipsy", tipsy(PTS[:1], PTS[1:], PTS[:1], big=False))
put("points_tipsy", "big_short_header.tipsy", tipsy(PTS, [], PTS[:2], padded=False))
put("points_tipsy", "little_short_header.tipsy", tipsy([], PTS, [], big=False, padded=False))
put("points_tipsy", "empty.tipsy", tipsy([], [], []))
put("points_tipsy", "truncated_header.tipsy", good[:20])
put("points_tipsy", "truncated_data.tipsy", good[:-5])
put("points_tipsy", "nbodies_wrong.tipsy", tipsy(PTS, [], [], nbodies=4))
put("points_tipsy", "ndim_2.tipsy", tipsy(PTS, [], [], ndim=2))
put("points_tipsy", "trailing_bytes.tipsy", good + b"junk")
put("points_tipsy", "nan.tipsy", tipsy([], [(1.0, math.nan, 0.0, 1.0)], []))
put("points_tipsy", "negative_mass.tipsy", tipsy([], [], [(1.0, 1.0, 0.0, -1.0)]))


# ---------------------------------------------------------------------------------- Gadget
def gadget(types, table, big=False, fmt2=False, f64=False, num_files=1):
    """types: 6 lists of (x, y, z, m); m is written to MASS where table[t] == 0."""
    e = ">" if big else "<"
    out = b""

    def block(label, payload):
        nonlocal out
        if fmt2:
            out += struct.pack(e + "i4sii", 8, label, len(payload) + 8, 8)
        out += struct.pack(e + "i", len(payload)) + payload + struct.pack(e + "i", len(payload))

    npart = [len(t) for t in types]
    head = struct.pack(e + "6i6dddii6Iiid", *npart, *table, 0.5, 1.0, 0, 0, *npart, 0, num_files, 10.0)
    block(b"HEAD", head.ljust(256, b"\0"))
    pos = b"".join(struct.pack(e + ("3d" if f64 else "3f"), x, y, z) for t in types for x, y, z, _ in t)
    block(b"POS ", pos)
    block(b"VEL ", struct.pack(e + "f", 0.0) * (3 * sum(npart)))
    block(b"ID  ", b"".join(struct.pack(e + "I", i) for i in range(sum(npart))))
    masses = b"".join(struct.pack(e + "f", p[3]) for t, ps in enumerate(types) if table[t] == 0 for p in ps)
    if masses:
        block(b"MASS", masses)
    return out


T = [PTS[:2], PTS, [], [], PTS[1:2], []]
TABLE = [0.0, 1.5, 0.0, 0.0, 0.0, 0.0]
g1 = gadget(T, TABLE)
put("points_gadget", "format1_little.gadget", g1)
put("points_gadget", "format1_big.gadget", gadget(T, TABLE, big=True))
put("points_gadget", "format2_little.gadget", gadget(T, TABLE, fmt2=True))
put("points_gadget", "format2_big_f64.gadget", gadget(T, TABLE, big=True, fmt2=True, f64=True))
put("points_gadget", "table_masses_only.gadget", gadget(T, [1.0, 1.5, 0, 0, 2.0, 0], fmt2=True))
put("points_gadget", "empty.gadget", gadget([[]] * 6, [0.0] * 6))
put("points_gadget", "truncated_header.gadget", g1[:100])
put("points_gadget", "truncated_mass.gadget", g1[:-6])
put("points_gadget", "no_mass_block.gadget", g1[: len(g1) - (8 + 4 * 3)])
put("points_gadget", "num_files_2.gadget", gadget(T, TABLE, num_files=2))
bad_marker = bytearray(g1)
bad_marker[260] = 1
put("points_gadget", "marker_mismatch.gadget", bytes(bad_marker))
put("points_gadget", "nan.gadget", gadget([[(math.nan, 0.0, 0.0, 1.0)], [], [], [], [], []], [0.0] * 6))
put("points_gadget", "negative_mass.gadget", gadget([[(0.0, 0.0, 0.0, -1.0)], [], [], [], [], []], [0.0] * 6))


# ---------------------------------------------------------------------------------- PLY
ASCII = (b"ply\nformat ascii 1.0\ncomment seed\nelement vertex 3\nproperty float x\nproperty uchar red\n"
         b"property float y\nproperty list uchar int idx\nproperty double z\nproperty float mass\n"
         b"element face 1\nproperty list uchar int vertex_indices\nend_header\n"
         b"1 255 2 0 3 0.5\n-1.5 0 2.5 2 7 8 1e3 2\n0.25 7 -0.125 1 9 0 0\n3 0 1 2\n")


def ply_binary(big, weight=True):
    e = ">" if big else "<"
    head = ("ply\nformat %s 1.0\nelement vertex %d\nproperty double x\nproperty int label\nproperty double y\n"
            "property double z\n%selement face 1\nproperty list uchar uint vertex_index\nend_header\n"
            % ("binary_big_endian" if big else "binary_little_endian", len(PTS),
               "property float weight\n" if weight else "")).encode()
    body = b"".join(struct.pack(e + "did" + "d" + ("f" if weight else ""), x, 7, y, z, *([m] if weight else []))
                    for x, y, z, m in PTS)
    return head + body + struct.pack(e + "B3I", 3, 0, 1, 2)


put("points_ply", "ascii.ply", ASCII)
put("points_ply", "ascii_crlf.ply", ASCII.replace(b"\n", b"\r\n"))
put("points_ply", "binary_little.ply", ply_binary(False))
put("points_ply", "binary_big_no_weight.ply", ply_binary(True, weight=False))
put("points_ply", "truncated_header.ply", ASCII[:50])
put("points_ply", "truncated_data.ply", ply_binary(False)[:-7])
put("points_ply", "trailing_bytes.ply", ply_binary(True) + b"!")
put("points_ply", "huge_count.ply", b"ply\nformat ascii 1.0\nelement vertex 99999999999\nproperty float x\n"
    b"property float y\nproperty float z\nend_header\n1 2 3\n")
put("points_ply", "nan.ply", b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
    b"property float z\nend_header\n1 nan 3\n")
put("points_ply", "no_z.ply", b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
    b"end_header\n1 2\n")


# ---------------------------------------------------------------------------------- NumPy
def npy(major, descr, fortran, rows, shape=None):
    cols = len(rows[0]) if rows else 3
    shape = shape or "(%d, %d)" % (len(rows), cols)
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    pre = 10 if major == 1 else 12
    d = d + " " * ((64 - (pre + len(d) + 1) % 64) % 64) + "\n"
    out = b"\x93NUMPY" + bytes([major, 0]) + (struct.pack("<H", len(d)) if major == 1 else struct.pack("<I", len(d)))
    out += d.encode()
    e = descr[0]
    values = [r[c] for c in range(cols) for r in rows] if fortran else [v for r in rows for v in r]
    return out + b"".join(struct.pack(e + descr[1:].replace("f4", "f").replace("f8", "d"), v) for v in values)


R3 = [p[:3] for p in PTS]
put("points_npy", "v1_c_f4_n3.npy", npy(1, "<f4", False, R3))
put("points_npy", "v1_fortran_f8_n4.npy", npy(1, "<f8", True, PTS))
put("points_npy", "v2_big_f4_n4.npy", npy(2, ">f4", False, PTS))
put("points_npy", "v3_big_f8_fortran_n3.npy", npy(3, ">f8", True, R3))
put("points_npy", "empty.npy", npy(1, "<f4", False, [], "(0, 3)"))
put("points_npy", "truncated.npy", npy(1, "<f4", False, R3)[:-3])
put("points_npy", "trailing_bytes.npy", npy(1, "<f4", False, R3) + b"xyzw")
put("points_npy", "int_dtype.npy", npy(1, "<f4", False, R3).replace(b"<f4", b"<i4"))
put("points_npy", "shape_1d.npy", npy(1, "<f4", False, R3, "(9,)"))
put("points_npy", "nan.npy", npy(1, "<f8", False, [(1.0, math.nan, 0.0)]))
put("points_npy", "negative_mass.npy", npy(2, "<f4", False, [(1.0, 1.0, 0.0, -2.0)]))
