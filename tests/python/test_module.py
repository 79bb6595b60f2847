# SPDX-License-Identifier: Apache-2.0
"""What the module says about itself, logging and progress, and the example script."""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import canopy


def test_build_info_lists_the_mode_table():
    info = canopy.build_info()
    assert info["version"] == canopy.__version__
    assert info["gpu_backend"] == canopy.has_gpu_backend()
    assert info["modes"][0] == "mutex" and "continuation" in info["modes"] and "warp-rounds" in info["modes"] and len(info["modes"]) == 9
    assert info["push_policies"] == ("round-robin", "least-loaded", "locality")


def test_progress_callbacks_see_every_stage():
    seen = []
    cb = canopy.set_progress(lambda stage, message, seconds: seen.append((stage, message, seconds)))
    try:
        tree = canopy.build_octree(canopy.generate("uniform", 500), max_leaf=8)
        canopy.validate(tree, "cpu")
    finally:
        canopy.set_progress(None)
    assert cb is not None
    assert [s for s, _, _ in seen] == ["generate", "build", "pass", "reference", "compare"]
    assert "500 points" in seen[0][1] and all(t >= 0 for _, _, t in seen)
    with pytest.raises(canopy.InputError):
        canopy.set_progress(42)


def test_log_levels(caplog):
    with pytest.raises(canopy.InputError, match="unknown log level"):
        canopy.set_log_level("loud")
    canopy.set_log_level("info")
    try:
        with caplog.at_level("INFO", logger="canopy"):
            canopy.build_octree(canopy.generate("uniform", 100))
        assert any("built octree" in r.getMessage() for r in caplog.records)
    finally:
        canopy.set_log_level("off")


def _runs_without_the_gil(work, repeats=20):
    """Whether this thread ran while `work` ran on another thread, with forced GIL switches made
    rare (30 s, far longer than any of these calls): a call that keeps the GIL lets this thread
    count nothing until it returns; one that releases it lets it count. This thread hands the GIL
    back after every count (time.sleep(0)), so the worker never waits for a switch. The worker
    repeats `work` (up to `repeats` times, until this thread has counted), so that a loaded machine,
    which may wake this thread only after a short call has already returned, still gives it a
    chance inside one of them."""
    inside = threading.Event()
    done = threading.Event()
    ticked = threading.Event()

    def run():
        inside.set()
        for _ in range(repeats):
            work()
            if ticked.is_set():
                break
        done.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        ticks = 0
        t = threading.Thread(target=run)
        t.start()
        inside.wait()
        while not done.is_set():
            ticks += 1
            ticked.set()
            time.sleep(0)
        t.join()
    finally:
        sys.setswitchinterval(old)
    return ticks > 0


def test_long_stages_release_the_gil():
    points = canopy.generate("uniform", 200_000)
    assert _runs_without_the_gil(lambda: canopy.build_octree(points, max_leaf=1))
    tree = canopy.build_octree(points, max_leaf=4)
    assert _runs_without_the_gil(lambda: canopy.reference_upward_pass(tree))
    assert _runs_without_the_gil(lambda: canopy.accumulate(tree, "cpu"))
    dag = canopy.Dag(100_000, np.column_stack([np.arange(99_999), np.arange(1, 100_000)]))
    assert _runs_without_the_gil(lambda: dag.run("cpu"))


def test_the_gil_check_sees_a_call_that_keeps_it():
    # The check itself: pure-Python work keeps the GIL between forced switches, so this thread
    # counts nothing while it runs (were the check always true, the test above would prove nothing).
    def spin():
        x = 0
        for i in range(300_000):
            x += i
    assert not _runs_without_the_gil(spin)


def test_the_plot_levels_example_writes_a_figure(tmp_path):
    pytest.importorskip("matplotlib")
    source = os.environ.get("CANOPY_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    script = os.path.join(source, "examples", "python", "plot_levels.py")
    out = tmp_path / "levels.png"
    r = subprocess.run([sys.executable, script, "--generate", "plummer:5000", "-o", str(out)],
                       capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 1000 and "level" in r.stdout
