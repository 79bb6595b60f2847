# SPDX-License-Identifier: Apache-2.0
"""Files the module writes and the errors about files (docs/RELIABILITY.md, "Output files")."""
import os
import stat

import numpy as np
import pytest

import canopy

MARKER = ".canopy-incomplete."  # canopy::trees::temporary_marker


def _points(n=10):
    return canopy.generate("uniform", n, seed=3)


def test_write_points_errors_are_oserrors_naming_the_path(tmp_path):
    # A folder in the way: IsADirectoryError naming it, and no temporary beside it ("/tmp" used to
    # raise a plain RuntimeError after creating "/tmp.tmp.<pid>.0" in its parent).
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(IsADirectoryError) as e:
        canopy.write_points(folder, _points())
    assert e.value.filename == str(folder)
    assert isinstance(e.value, OSError) and not isinstance(e.value, canopy.Error)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(FileNotFoundError) as e:
        canopy.write_points(tmp_path / "missing" / "p.bin", _points())
    assert e.value.filename == str(tmp_path / "missing" / "p.bin")
    with pytest.raises(canopy.InputError, match="the name is empty"):
        canopy.write_points("", _points())


def test_write_points_keeps_the_mode_and_follows_links(tmp_path):
    f = tmp_path / "p.bin"
    canopy.write_points(f, _points(5))
    os.chmod(f, 0o600)
    canopy.write_points(f, _points(7))
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
    assert len(canopy.read_points(f)) == 7
    link = tmp_path / "link.bin"
    link.symlink_to("p.bin")
    canopy.write_points(link, _points(9))
    assert link.is_symlink() and len(canopy.read_points(f)) == 9
    # As root, a private copy of /dev/null: a module that followed the link and renamed over its
    # target must not replace the machine's.
    device = "/dev/null"
    if os.geteuid() == 0:
        device = tmp_path / "private_null"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    null = tmp_path / "null"
    null.symlink_to(device)
    canopy.write_points(null, _points(9))
    assert null.is_symlink() and stat.S_ISCHR(os.lstat(device).st_mode)
    assert not any(MARKER in p.name for p in tmp_path.iterdir())


def test_reading_a_folder_as_a_dag_says_dot_file(tmp_path):
    with pytest.raises(IsADirectoryError, match="not a DOT file"):
        canopy.Dag.from_dot(tmp_path)
    with pytest.raises(IsADirectoryError, match="not a points file"):
        canopy.read_points(tmp_path)


def test_names_too_long_and_loops_of_links_say_so(tmp_path):
    with pytest.raises(OSError) as e:
        canopy.read_points(tmp_path / ("n" * 300))
    assert not isinstance(e.value, FileNotFoundError) and "too long" in str(e.value)
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OSError) as e:
        canopy.Dag.from_dot(tmp_path / "a")
    assert not isinstance(e.value, FileNotFoundError) and "symbolic links" in str(e.value)


def test_a_dag_from_a_fifo_is_refused_not_waited_for(tmp_path):
    fifo = tmp_path / "dag.fifo"
    os.mkfifo(fifo)
    with pytest.raises(canopy.InputError, match="not a regular file"):
        canopy.Dag.from_dot(fifo)


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="no /proc")
def test_a_proc_file_is_not_zero_bytes_of_points():
    with pytest.raises(canopy.InputError, match="/proc or /sys"):
        canopy.read_points("/proc/cpuinfo")
