#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`canopy accumulate|validate|bench` under mpiexec, as a user runs them (CPU ranks, MPI exchange).

    tool_across_ranks.py CANOPY MPIEXEC [MPIEXEC_FLAGS...]

Checks: every node validated on 1 and 3 ranks, from a Canopy binary file (read in parts) and from a
CSV file (read by rank 0 and scattered); the root on 3 ranks equals the one-process root; a bad
point in one rank's part stops every rank with one line naming that rank; bench writes its JSON
from rank 0 only; commands that run on one process refuse several ranks. Exit 0 when all pass.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

canopy, mpiexec, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
failures = []


def run(args, ranks=None, timeout=120):
    cmd = ([mpiexec, "-n", str(ranks)] + flags if ranks else []) + [canopy] + args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def check(ok, what, detail=""):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        print("      " + detail.replace("\n", "\n      "))
        failures.append(what)


def error_lines(text):
    return [l for l in text.splitlines() if l.startswith("canopy: error:")]


with tempfile.TemporaryDirectory() as d:
    os.chdir(d)
    rc, _, err = run(["gen", "--dist", "plummer", "-n", "20000", "--seed", "1", "-o", "p.bin"])
    check(rc == 0, "gen p.bin", err)
    rc, _, err = run(["convert", "p.bin", "p.csv"])
    check(rc == 0, "convert p.csv", err)

    for ranks in (1, 3):
        rc, out, err = run(["validate", "p.bin", "--backend", "cpu"], ranks)
        check(rc == 0 and "PASS: within tolerance" in out and f"in {ranks} parts" in out,
              f"validate p.bin (read in parts) on {ranks} ranks", out + err)
    rc, out, err = run(["validate", "p.csv", "--backend", "cpu", "--max-leaf", "8"], 2)
    check(rc == 0 and "PASS: within tolerance" in out, "validate p.csv (scattered by rank 0) on 2 ranks", out + err)

    # The same points on one process and on 3 ranks (file and generator spec): the same root.
    rc, out, err = run(["accumulate", "p.bin", "--backend", "cpu", "--json"])
    one = json.loads(out)["root"] if rc == 0 else None
    check(one is not None, "accumulate on one process", err)
    for source in ("p.bin", "gen:plummer:20000"):
        rc, out, err = run(["accumulate", source, "--backend", "cpu", "--json"], 3)
        doc = json.loads(out) if rc == 0 else None
        ok = doc is not None and one is not None and doc["ranks"] == 3 and doc["points"] == 20000
        if ok:
            root = doc["root"]
            scale = max(abs(v) for v in one["bbox"]["lo"] + one["bbox"]["hi"])
            ok = (root["count"] == one["count"] and math.isclose(root["mass"], one["mass"], rel_tol=1e-6)
                  and all(abs(a - b) <= 1e-5 * scale for a, b in zip(root["com"], one["com"]))
                  and root["bbox"] == one["bbox"]
                  and all(math.isclose(root["m2"][k], one["m2"][k], rel_tol=1e-4, abs_tol=1e-6 * scale * scale)
                          for k in one["m2"]))
        check(ok, f"accumulate {source} on 3 ranks: the one-process root", out + err)

    # Point 19000 of 20000 is NaN: in rank 2's part of 3 (it reads [13334, 20000)).
    data = bytearray(open("p.bin", "rb").read())
    data[24 + 16 * 19000: 24 + 16 * 19000 + 4] = bytes.fromhex("0000c07f")
    open("nan.bin", "wb").write(data)
    rc, out, err = run(["validate", "nan.bin", "--backend", "cpu"], 3, timeout=60)
    lines = error_lines(err)
    check(rc != 0 and len(lines) == 1 and "rank 2: read: nan.bin: point 19000" in lines[0],
          "a bad point in rank 2's part: one line naming rank 2, non-zero exit", f"exit {rc}\n{err}")

    # A build without the benchmarks (CANOPY_BUILD_BENCH off, as in the sanitizer presets) has a
    # `bench` that only says so: its cases are skipped there.
    has_bench = "--dist" in run(["bench", "--help"])[1]
    if not has_bench:
        print("skip  bench cases: this canopy was built without the benchmarks")
    if has_bench:
        rc, out, err = run(["bench", "--dist", "plummer", "-n", "20000", "--modes", "continuation+node,warp-rounds",
                            "--reps", "3", "--warmup", "1", "--backend", "cpu", "--json", "b.json"], 3)
        doc = json.load(open("b.json")) if rc == 0 and os.path.exists("b.json") else None
        check(doc is not None and doc["ranks"] == 3 and len(doc["results"]) == 2
              and all(r["validated"] and r["pass_ms"]["min"] <= r["pass_ms"]["max"] for r in doc["results"])
              and out.count("wrote b.json") == 1 and not [f for f in os.listdir(".") if f.startswith("b.json.")],
              "bench on 3 ranks: validated, JSON written once by rank 0", out + err)

        rc, out, err = run(["bench", "--dist", "plummer", "-n", "1000", "--backend", "cpu", "--json", "no/such/dir/b.json"], 2)
        check(rc == 2 and len(error_lines(err)) == 1 and not os.path.exists("no"),
              "bench --json into a missing folder: one line, exit 2, nothing written", f"exit {rc}\n{err}")
    rc, out, err = run(["accumulate", "p.bin", "--backend", "reference"], 2)
    check(rc == 2 and len(error_lines(err)) == 1 and "--backend reference" in err,
          "--backend reference refused on 2 ranks", f"exit {rc}\n{err}")
    rc, out, err = run(["gen", "--dist", "uniform", "-n", "10", "-o", "u.bin"], 2)
    check(rc == 2 and len(error_lines(err)) == 1 and "runs on one process" in err and not os.path.exists("u.bin"),
          "gen on 2 ranks refused in one line", f"exit {rc}\n{err}")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
