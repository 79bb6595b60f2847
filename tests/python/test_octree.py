# SPDX-License-Identifier: Apache-2.0
"""The host octree from Python: array shapes and dtypes, the layout's invariants checked with
NumPy (independently of the C++ check), views that keep the tree alive, and errors."""

import gc

import numpy as np
import pytest

import canopy


def test_arrays_have_one_entry_per_node_and_the_documented_dtypes(plummer):
    points, tree = plummer
    n = tree.node_count
    assert len(tree) == n and tree.point_count == len(points)
    for name, dtype in [("parent", np.int32), ("first_child", np.int32), ("child_count", np.int32),
                        ("point_begin", np.int32), ("npoints", np.int32), ("level", np.uint8)]:
        a = getattr(tree, name)
        assert a.shape == (n,) and a.dtype == dtype, name
        assert not a.flags.writeable, name
    assert tree.cell_lo.shape == (n, 3) and tree.cell_lo.dtype == np.float64
    assert tree.points.shape == (len(points), 4) and tree.points.dtype == np.float32
    assert tree.level_offset.shape == (tree.depth + 2,)
    assert tree.leaves.shape == (tree.leaf_count,)


def test_layout_invariants_hold(plummer):
    points, tree = plummer
    tree.check()
    parent, first, count = tree.parent, tree.first_child, tree.child_count
    assert parent[0] == -1 and tree.level[0] == 0 and tree.npoints[0] == len(points)
    # Levels are contiguous ranges, and every node's parent is one level up.
    lo = tree.level_offset
    for level in range(tree.depth + 1):
        assert (tree.level[lo[level]:lo[level + 1]] == level).all()
    assert (tree.level[1:] == tree.level[parent[1:]] + 1).all()
    # Children are contiguous, point back, and tile their parent's points.
    inner = np.flatnonzero(count > 0)
    for node in inner:
        kids = np.arange(first[node], first[node] + count[node])
        assert (parent[kids] == node).all()
        assert tree.npoints[kids].sum() == tree.npoints[node]
        assert tree.point_begin[kids[0]] == tree.point_begin[node]
    leaves = tree.leaves
    assert (count[leaves] == 0).all() and tree.npoints[leaves].sum() == len(points)
    assert (tree.npoints[leaves] <= 8).all()
    # Cells are cubes containing their points, the same multiset of points as the input.
    edge = tree.cell_hi - tree.cell_lo
    np.testing.assert_allclose(edge[:, 0], edge[:, 1])
    np.testing.assert_allclose(edge[:, 0], edge[:, 2])
    for leaf in leaves[:200]:
        p = tree.points[tree.point_begin[leaf]:tree.point_begin[leaf] + tree.npoints[leaf], :3]
        assert (p >= tree.cell_lo[leaf]).all() and (p < tree.cell_hi[leaf]).all()
    np.testing.assert_array_equal(np.sort(tree.points, axis=0), np.sort(points, axis=0))


def test_nodes_per_level_and_the_structured_table(plummer):
    _, tree = plummer
    per_level = tree.nodes_per_level
    assert per_level.sum() == tree.node_count and per_level[0] == 1 and len(per_level) == tree.depth + 1
    table = tree.nodes()
    assert table.shape == (tree.node_count,)
    assert table.dtype.names == ("parent", "first_child", "child_count", "level", "point_begin", "npoints",
                                 "cell_lo", "cell_hi")
    np.testing.assert_array_equal(table["parent"], tree.parent)
    np.testing.assert_array_equal(table["cell_hi"], tree.cell_hi)


def test_views_keep_the_tree_alive():
    tree = canopy.build_octree(canopy.generate("uniform", 2000, seed=3), max_leaf=4)
    parent, points = tree.parent.copy(), tree.points.copy()
    view, pview = tree.parent, tree.points
    del tree
    gc.collect()
    canopy.generate("uniform", 100000)  # reuse freed memory, if any was freed
    np.testing.assert_array_equal(view, parent)
    np.testing.assert_array_equal(pview, points)


def test_complete_octree_is_full():
    tree = canopy.complete_octree(3, 4, seed=2)
    np.testing.assert_array_equal(tree.nodes_per_level, [1, 8, 64, 512])
    assert tree.point_count == 512 * 4 and (tree.npoints[tree.leaves] == 4).all()
    np.testing.assert_array_equal(tree.points, canopy.generate("lattice", depth=3, per_leaf=4, seed=2))


def test_three_columns_mean_unit_masses_and_max_depth_caps_the_tree():
    xyz = np.zeros((10, 3))  # ten coincident points: only max_depth stops the split
    tree = canopy.build_octree(xyz, max_leaf=1, max_depth=4)
    assert tree.depth == 4 and tree.point_count == 10
    np.testing.assert_array_equal(tree.points[:, 3], 1.0)


def test_empty_input_gives_one_empty_root():
    tree = canopy.build_octree(np.zeros((0, 4), np.float32))
    assert tree.node_count == 1 and tree.npoints[0] == 0 and tree.parent[0] == -1


def test_bad_points_and_options_raise_input_errors():
    with pytest.raises(canopy.InputError, match="point 1 .*not finite"):
        canopy.build_octree([[0, 0, 0, 1], [np.nan, 0, 0, 1]])
    with pytest.raises(canopy.InputError) as e:
        canopy.build_octree(np.zeros((4, 4)), max_leaf=0)
    assert "max_leaf" in e.value.source
    with pytest.raises(canopy.InputError, match=r"shape \(n, 3\) or \(n, 4\)"):
        canopy.build_octree(np.zeros((4, 5)))
    with pytest.raises(canopy.InputError, match="max_depth"):
        canopy.build_octree(np.zeros((4, 4)), max_depth=22)
