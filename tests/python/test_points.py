# SPDX-License-Identifier: Apache-2.0
"""Generators and point files: shapes, dtypes, determinism, every reader through NumPy, and errors
that name the file and the problem."""

import numpy as np
import pytest

import canopy


@pytest.mark.parametrize("dist", ["uniform", "plummer", "clusters"])
def test_generators_are_seeded_float32_with_unit_total_mass(dist):
    a = canopy.generate(dist, 1000, seed=5)
    assert a.shape == (1000, 4) and a.dtype == np.float32 and a.flags.c_contiguous
    np.testing.assert_array_equal(a, canopy.generate(dist, 1000, seed=5))
    assert not np.array_equal(a, canopy.generate(dist, 1000, seed=6))
    assert a[:, 3].sum() == pytest.approx(1.0, rel=1e-5)


def test_uniform_points_lie_in_the_unit_cube_and_plummer_within_its_cutoff():
    u = canopy.generate("uniform", 5000)
    assert u[:, :3].min() >= 0 and u[:, :3].max() < 1
    p = canopy.generate("plummer", 5000)
    assert np.linalg.norm(p[:, :3].astype(np.float64), axis=1).max() <= 10.0 + 1e-5


def test_lattice_has_per_leaf_points_in_every_finest_cell():
    a = canopy.generate("lattice", depth=2, per_leaf=3)
    assert a.shape == (64 * 3, 4)
    cells = np.floor(a[:, :3] * 4).astype(int)
    _, counts = np.unique(cells, axis=0, return_counts=True)
    assert len(counts) == 64 and (counts == 3).all()


def test_generator_arguments_are_checked():
    with pytest.raises(canopy.InputError, match="unknown|uniform"):
        canopy.generate("gaussian", 10)
    with pytest.raises(canopy.InputError) as e:
        canopy.generate("uniform", -1)
    assert e.value.source == "n" and isinstance(e.value, ValueError)
    with pytest.raises(canopy.InputError):
        canopy.generate("lattice", 10)


@pytest.mark.parametrize("name", ["p.bin", "p.csv"])
def test_written_files_read_back_bit_for_bit(tmp_path, name):
    a = canopy.generate("clusters", 777, seed=2)
    canopy.write_points(tmp_path / name, a)
    b = canopy.read_points(tmp_path / name)
    np.testing.assert_array_equal(a, b)
    assert canopy.detect_format(tmp_path / name) == name.split(".")[1].replace("bin", "binary")


@pytest.mark.parametrize("columns,dtype", [(3, "<f4"), (4, "<f8"), (4, ">f4")])
def test_npy_files_read_with_their_masses(tmp_path, columns, dtype):
    rng = np.random.default_rng(1)
    a = rng.random((50, columns)).astype(dtype)
    np.save(tmp_path / "p.npy", a)
    b = canopy.read_points(tmp_path / "p.npy")
    assert b.shape == (50, 4) and b.dtype == np.float32
    np.testing.assert_array_equal(b[:, :3], a[:, :3].astype(np.float32))
    np.testing.assert_array_equal(b[:, 3], a[:, 3].astype(np.float32) if columns == 4 else 1.0)


def _tipsy(gas, dark, star):
    """A little-endian Tipsy file (28-byte header) of the given particle rows (mass, x, y, z)."""
    header = np.array([(0.0, len(gas) + len(dark) + len(star), 3, len(gas), len(dark), len(star))],
                      dtype=[("t", "<f8"), ("n", "<i4"), ("ndim", "<i4"), ("ngas", "<i4"), ("ndark", "<i4"),
                             ("nstar", "<i4")])
    out = [header.tobytes()]
    for rows, width in ((gas, 12), (dark, 9), (star, 11)):
        for mass, x, y, z in rows:
            rec = np.zeros(width, "<f4")
            rec[:4] = (mass, x, y, z)
            out.append(rec.tobytes())
    return b"".join(out)


def test_tipsy_families_are_chosen_by_name(tmp_path):
    f = tmp_path / "snap.std"
    f.write_bytes(_tipsy([(1, 0, 0, 0)], [(2, 1, 1, 1), (3, 2, 2, 2)], [(4, 3, 3, 3)]))
    assert canopy.detect_format(f) == "tipsy"
    np.testing.assert_array_equal(canopy.read_points(f)[:, 3], [1, 2, 3, 4])
    np.testing.assert_array_equal(canopy.read_points(f, family="dark")[:, 3], [2, 3])
    np.testing.assert_array_equal(canopy.read_points(f, family="star"), [[3, 3, 3, 4]])
    with pytest.raises(canopy.InputError, match="family"):
        canopy.read_points(f, family="stars")
    with pytest.raises(canopy.InputError, match="Gadget"):
        canopy.read_points(f, type=1)  # a Gadget type for a Tipsy file is an error, not ignored


def test_ply_from_memory_names_its_source():
    ply = b"ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\nproperty float z\n" \
          b"property float mass\nend_header\n0 0 0 1\n1 2 3 0.5\n"
    np.testing.assert_array_equal(canopy.parse_points(ply), [[0, 0, 0, 1], [1, 2, 3, 0.5]])
    with pytest.raises(canopy.InputError) as e:
        canopy.parse_points(ply[:-4], source="cloud.ply")
    assert e.value.source == "cloud.ply" and str(e.value).startswith("cloud.ply: ")


def test_a_truncated_file_raises_an_error_naming_the_file_and_the_problem(tmp_path):
    f = tmp_path / "p.bin"
    canopy.write_points(f, canopy.generate("uniform", 100))
    with open(f, "r+b") as h:
        h.truncate(24 + 16 * 60)
    with pytest.raises(canopy.InputError) as e:
        canopy.read_points(f)
    assert isinstance(e.value, canopy.Error) and isinstance(e.value, ValueError)
    assert e.value.source == str(f)
    assert "truncated data" in e.value.problem and "100 points" in e.value.problem
    assert str(e.value) == f"{f}: {e.value.problem}"


def test_bad_values_in_a_file_name_the_line(tmp_path):
    f = tmp_path / "n.csv"
    f.write_text("x,y,z,m\n0,0,0,1\n1,nan,0,1\n")
    with pytest.raises(canopy.InputError, match=r"n\.csv: line 3: .*non-finite"):
        canopy.read_points(f)


def test_missing_files_and_folders_are_os_errors(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        canopy.read_points(tmp_path / "nope.bin")
    assert e.value.filename == str(tmp_path / "nope.bin")
    with pytest.raises(IsADirectoryError):
        canopy.read_points(tmp_path)
