#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plot the results of the atomics lab (`canopy bench atomics --json F`, `canopy-atomics-lab --json F`):
G elements/s against size, one line per variant, one panel per experiment, log-x. Writes STEM.png
and STEM.svg (each to a temporary name first, then renamed: never half-written).

    /usr/bin/python3 tools/plot/plot_atomics.py atomics.json -o atomics    # atomics.png, atomics.svg

Only validated results (status "ok") are drawn; a failed or skipped variant simply has no point at
that size. The naive baseline of each panel is drawn dashed. Needs matplotlib (Debian:
python3-matplotlib; run it with /usr/bin/python3).
"""
import argparse
import json
import math
import os
import sys

EXPERIMENT_TITLES = {
    "containers": "containers over a limit (seed 000)",
    "max": "global max of A*B/C+D (seed 002)",
    "filter": "filter / stream compaction (seeds 003, 004)",
    "histogram": "256-bin histogram (seed 004)",
    "copy": "copy int / int2 / int4 (seed 003)",
}


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not str(doc.get("schema", "")).startswith("canopy-bench-results/") or doc.get("benchmark") != "atomics_lab":
        sys.exit(f"plot_atomics.py: {path}: not an atomics lab result "
                 f"(schema {doc.get('schema')!r}, benchmark {doc.get('benchmark')!r})")
    return doc


def save(fig, stem):
    for ext in ("png", "svg"):
        final = f"{stem}.{ext}"
        temp = f"{final}.tmp.{os.getpid()}"
        try:
            fig.savefig(temp, format=ext, dpi=80 if ext == "png" else None, bbox_inches="tight")
            os.replace(temp, final)
        finally:
            if os.path.exists(temp):
                os.remove(temp)


def size_label(n):
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{suffix}"
    return str(n)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", help="output of canopy bench atomics --json")
    parser.add_argument("-o", "--output", required=True, help="output stem: writes STEM.png and STEM.svg")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    args = parser.parse_args()
    stem = args.output
    for ext in (".png", ".svg"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]

    doc = load(args.json)
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: a smaller SVG
    import matplotlib.pyplot as plt

    rows = [r for r in doc.get("results", []) if r.get("status") == "ok" and r.get("gelem_per_s")]
    if not rows:
        sys.exit(f"plot_atomics.py: {args.json}: no validated results to plot")
    experiments = []
    for r in doc.get("results", []):
        if r["experiment"] not in experiments:
            experiments.append(r["experiment"])
    sizes = sorted({r["size"] for r in doc.get("results", [])})

    cols = min(3, len(experiments))
    nrows = math.ceil(len(experiments) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 3.9 * nrows), squeeze=False)
    colors = plt.get_cmap("tab10").colors
    for k, experiment in enumerate(experiments):
        ax = axes[k // cols][k % cols]
        series = {}  # variant -> rows, in file order (the naive baseline first)
        for r in rows:
            if r["experiment"] == experiment:
                series.setdefault(r["variant"], []).append(r)
        for i, (variant, rs) in enumerate(series.items()):
            rs = sorted(rs, key=lambda r: r["size"])
            baseline = any(r.get("baseline") for r in rs)
            ax.plot([r["size"] for r in rs], [r["gelem_per_s"] for r in rs], "--" if baseline else "-",
                    marker="s" if baseline else "o", markersize=4, color=colors[i % len(colors)],
                    label=variant + (" (naive)" if baseline else ""))
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([size_label(n) for n in sizes])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_title(EXPERIMENT_TITLES.get(experiment, experiment), fontsize=10)
        ax.set_xlabel("elements")
        ax.set_ylabel("G elements/s (median)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    for k in range(len(experiments), nrows * cols):
        axes[k // cols][k % cols].axis("off")

    meta = doc.get("metadata", {})
    reps = meta.get("reps")
    reps = int(reps) if isinstance(reps, (int, float)) else "?"
    fig.suptitle(f"Atomics lab on {meta.get('device', '?')} (median of {reps} runs, each variant validated)")
    fig.tight_layout()
    save(fig, stem)
    if not args.quiet:
        print(f"wrote {stem}.png and {stem}.svg")


if __name__ == "__main__":
    main()
