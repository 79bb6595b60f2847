# SPDX-License-Identifier: Apache-2.0
"""What the module says about itself, logging and progress, and the example script."""

import os
import subprocess
import sys
import threading

import pytest

import canopy


def test_build_info_lists_the_mode_table():
    info = canopy.build_info()
    assert info["version"] == canopy.__version__
    assert info["gpu_backend"] == canopy.has_gpu_backend()
    assert info["modes"][0] == "mutex" and "continuation" in info["modes"] and len(info["modes"]) == 8
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


def test_long_stages_release_the_gil():
    # With forced GIL switches rare (1 s), this thread runs while the other is inside the build
    # only if the build released the GIL.
    points = canopy.generate("uniform", 200_000)
    inside = threading.Event()
    done = threading.Event()

    def build():
        inside.set()
        canopy.build_octree(points, max_leaf=1)
        done.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        ticks = 0
        t = threading.Thread(target=build)
        t.start()
        inside.wait()
        while not done.is_set():
            ticks += 1
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert ticks > 0


def test_the_plot_levels_example_writes_a_figure(tmp_path):
    pytest.importorskip("matplotlib")
    source = os.environ.get("CANOPY_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    script = os.path.join(source, "examples", "python", "plot_levels.py")
    out = tmp_path / "levels.png"
    r = subprocess.run([sys.executable, script, "--generate", "plummer:5000", "-o", str(out)],
                       capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 1000 and "level" in r.stdout
