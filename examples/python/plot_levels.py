#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Nodes and mass per octree level of a snapshot, as a bar chart.

    plot_levels.py SNAPSHOT [--family dark] [--type 1] [--max-leaf 32] [-o levels.png]
    plot_levels.py --generate plummer:100000 [-o levels.png]

SNAPSHOT is any file Canopy reads (Canopy binary or CSV, Tipsy, Gadget-1/2, PLY, .npy); without
one, points are generated (DIST:N, DIST uniform, plummer or clusters; plummer:100000 by default).
The tree is built with canopy.build_octree and its upward pass run on the cpu backend (checked
against the double reference); the figure shows, per level, the number of nodes (and leaves) and
the mass held by the level's leaves, which is where the points sit. A table goes to stdout.
"""

import argparse
import sys

import numpy as np

import canopy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshot", nargs="?", help="points file (any format canopy reads)")
    ap.add_argument("--generate", default="plummer:100000", metavar="DIST:N",
                    help="points to generate when no file is given (default plummer:100000)")
    ap.add_argument("--family", default="all", help="Tipsy: gas, dark or star")
    ap.add_argument("--type", default=None, help="Gadget: particle type 0..5")
    ap.add_argument("--max-leaf", type=int, default=32)
    ap.add_argument("--max-depth", type=int, default=21)
    ap.add_argument("-o", "--output", default="levels.png", help="figure file (png, svg, pdf)")
    args = ap.parse_args()

    canopy.set_log_level("info")
    try:
        if args.snapshot:
            points = canopy.read_points(args.snapshot, family=args.family, type=args.type)
            title = args.snapshot
        else:
            dist, _, n = args.generate.partition(":")
            points = canopy.generate(dist, int(n or 100000), seed=1)
            title = f"{dist}, {len(points):,} points"
        tree = canopy.build_octree(points, max_leaf=args.max_leaf, max_depth=args.max_depth)
        moments = canopy.accumulate(tree, "cpu")
        check = canopy.compare(tree, moments)
    except (canopy.Error, OSError, ValueError) as e:
        print(f"plot_levels: error: {e}", file=sys.stderr)
        return 2
    if not check:
        print(f"plot_levels: the cpu pass is out of tolerance: {check.summary()}", file=sys.stderr)
        return 1

    levels = np.arange(tree.depth + 1)
    nodes = tree.nodes_per_level
    is_leaf = tree.child_count == 0
    leaves = np.bincount(tree.level[is_leaf], minlength=len(levels))
    # Mass of the points in each level's leaves (every point is in exactly one leaf), from the
    # pass's payloads; the level's total (all nodes) is the whole mass on every level above it.
    leaf_mass = np.bincount(tree.level[is_leaf], weights=moments["mass"][is_leaf], minlength=len(levels))
    total = float(moments["mass"][0])

    print(f"{'level':>5} {'nodes':>10} {'leaves':>10} {'leaf mass':>12}")
    for level in levels:
        print(f"{level:>5} {nodes[level]:>10,} {leaves[level]:>10,} {leaf_mass[level] / total:>12.4f}")

    import matplotlib
    if not hasattr(sys, "ps1"):
        matplotlib.use("Agg")  # a file, not a window
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    ax1.bar(levels, nodes, label="nodes", color="tab:blue")
    ax1.bar(levels, leaves, label="of which leaves", color="tab:orange", width=0.5)
    ax1.set_yscale("log")
    ax1.set_xlabel("level")
    ax1.set_ylabel("nodes")
    ax1.legend()
    ax2.bar(levels, leaf_mass / total, color="tab:green")
    ax2.set_xlabel("level")
    ax2.set_ylabel("fraction of the mass in the level's leaves")
    fig.suptitle(f"{title}: {tree.node_count:,} nodes, depth {tree.depth}, max_leaf {args.max_leaf}")
    fig.savefig(args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
