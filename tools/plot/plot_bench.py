#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plot the results of `canopy bench --json F`: median time of one upward pass against tree depth,
one line per mode and baseline, log scale, with the min..max spread as a band. Writes STEM.png and
STEM.svg (each to a temporary name first, then renamed: never half-written).

    /usr/bin/python3 tools/plot/plot_bench.py bench.json -o bench      # bench.png, bench.svg

Only validated results (status "ok") are drawn; a mode skipped over budget or failed at some
depth simply has no point there. A benchmark of one adaptive tree is drawn as a bar chart.
Needs matplotlib (Debian: python3-matplotlib; run it with /usr/bin/python3).
"""
import argparse
import json
import os
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not str(doc.get("schema", "")).startswith("canopy-bench-octree/"):
        sys.exit(f"plot_bench.py: {path}: not a canopy bench result (schema {doc.get('schema')!r})")
    return doc


def title_of(doc):
    device = (doc.get("device") or {}).get("name") or doc.get("backend", "?")
    opts = doc.get("options", {})
    return f"Octree upward pass on {device} (median of {opts.get('reps', '?')} runs)"


def save(fig, stem):
    for ext in ("png", "svg"):
        final = f"{stem}.{ext}"
        temp = f"{final}.tmp.{os.getpid()}"
        try:
            fig.savefig(temp, format=ext, dpi=150 if ext == "png" else None, bbox_inches="tight")
            os.replace(temp, final)
        finally:
            if os.path.exists(temp):
                os.remove(temp)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", help="output of canopy bench --json")
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
    import matplotlib.pyplot as plt

    rows = [r for r in doc.get("results", []) if r.get("status") == "ok" and r.get("median_us")]
    series = {}  # mode -> list of rows, in file order
    for r in rows:
        series.setdefault((r["mode"], r.get("baseline", False)), []).append(r)
    complete = all(r.get("tree_kind") == "complete" for r in doc.get("results", []))
    depths = sorted({r["depth"] for r in doc.get("results", [])})

    fig, ax = plt.subplots(figsize=(10, 5.5))
    colors = plt.get_cmap("tab20").colors  # up to 13 series on a GPU: no colour twice
    if complete and len(depths) > 1:
        for i, ((mode, baseline), rs) in enumerate(series.items()):
            rs = sorted(rs, key=lambda r: r["depth"])
            x = [r["depth"] for r in rs]
            y = [r["median_us"] for r in rs]
            style = "--" if baseline else "-"
            color = colors[(2 * i) % len(colors)] if i < len(colors) // 2 else colors[(2 * i + 1) % len(colors)]
            ax.plot(x, y, style, color=color, marker="s" if baseline else "o", markersize=4, label=mode)
            ax.fill_between(x, [r["min_us"] for r in rs], [r["max_us"] for r in rs], color=color, alpha=0.08)
            e2e = [(r["depth"], r["e2e_median_us"]) for r in rs if r.get("e2e_median_us") and r["e2e_median_us"] != r["median_us"]]
            if e2e:  # end to end (host clock until the result is known), where it differs from stream time
                ax.plot([d for d, _ in e2e], [v for _, v in e2e], ":", color=color, marker="x", markersize=3, linewidth=1)
        ax.set_xlabel("depth of the complete octree (8^depth leaves)")
        ax.set_xticks(depths)
        ax.set_yscale("log")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="stream time:\nsolid: scheduler\ndashed: baselines\nband: min..max\ndotted, x: end to end",
                  title_fontsize=8)
    else:
        names = [mode for (mode, _), _ in series.items()]
        med = [rs[0]["median_us"] for rs in series.values()]
        e2e = [rs[0].get("e2e_median_us") or rs[0]["median_us"] for rs in series.values()]
        ys = list(range(len(names)))
        colors_ = ["tab:gray" if b else "tab:blue" for (_, b) in series.keys()]
        ax.barh([y - 0.2 for y in ys], med, height=0.4, color=colors_, label="stream time")
        ax.barh([y + 0.2 for y in ys], e2e, height=0.4, color=colors_, alpha=0.45, hatch="//", label="end to end")
        ax.set_yticks(ys)
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        ax.legend(fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("median time of one pass (us), log scale; grey: baselines; solid: stream time, hatched: end to end")
        trees = sorted({r["tree"] for r in doc.get("results", [])})
        ax.set_title(", ".join(trees), fontsize=9)
    if complete and len(depths) > 1:
        ax.set_ylabel("median time of one pass (us)")
    ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(title_of(doc), fontsize=11)
    save(fig, stem)
    if not args.quiet:
        print(f"wrote {stem}.png and {stem}.svg")


if __name__ == "__main__":
    main()
