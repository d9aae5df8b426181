#!/usr/bin/env python3
"""plot_peers.py: the bar chart of `tapedeck bench --peers` (a PNG, the picture a slide would use).

    python3 plot_peers.py peers.tsv peers.png

peers.tsv is what peers_report.lua writes: "#title", "#subtitle" and "#versions" lines (a key, a
tab, the text), then one line per bar: workload, column, min µs, median µs, the workload's title
(tab-separated). The chart: one group of bars per workload, labelled with its name and title, one
bar per column (tapedeck eager and frozen, then the peers, in the file's order), the bar's height
the minimum, a black tick at the median; µs on a log scale; a column with no time in a workload
has no bar there. matplotlib, Agg backend.
"""
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# tapedeck in blues, PyTorch in oranges, TensorFlow in greens: a framework's modes side by side.
COLORS = {"tapedeck eager": "#6baed6", "tapedeck frozen": "#08519c", "PyTorch eager": "#fdae6b",
          "TorchScript": "#e6550d", "torch.compile": "#a63603", "TF eager": "#a1d99b", "tf.function": "#31a354"}


def read_tsv(path):
    """(header {key: text}, workloads in order, columns in order, {(workload, column): (min, median)},
    {workload: title})."""
    header, workloads, columns, times, titles = {}, [], [], {}, {}
    with open(path, encoding="utf-8") as file:
        for line in file:
            fields = line.rstrip("\n").split("\t")
            if fields[0].startswith("#"):
                header[fields[0][1:]] = fields[1]
                continue
            workload, column, lo, mid, titles[workload] = fields
            if workload not in workloads:
                workloads.append(workload)
            if column not in columns:
                columns.append(column)
            times[(workload, column)] = (float(lo), float(mid))
    return header, workloads, columns, times, titles


def plot(header, workloads, columns, times, titles, png):
    width = 0.8 / len(columns)
    figure, axes = plt.subplots(figsize=(max(10, 1.3 * len(workloads) + 3), 6.2), dpi=130)
    for i, column in enumerate(columns):
        xs = [w + (i - (len(columns) - 1) / 2) * width for w in range(len(workloads))]
        present = [(x, times[(name, column)]) for x, name in zip(xs, workloads) if (name, column) in times]
        if not present:
            continue
        axes.bar([x for x, _ in present], [t[0] for _, t in present], width, label=column,
                 color=COLORS.get(column), edgecolor="white", linewidth=0.4)
        axes.scatter([x for x, _ in present], [t[1] for _, t in present], marker="_", color="black", s=40,
                     linewidths=1.2, zorder=3)
    axes.set_yscale("log")
    axes.set_ylabel("µs per call (log scale)")
    axes.set_xticks(range(len(workloads)))
    axes.set_xticklabels([name + "\n" + textwrap.fill(titles[name], 16) for name in workloads], fontsize=7.5)
    axes.grid(axis="y", which="major", linestyle=":", linewidth=0.6)
    axes.set_axisbelow(True)
    axes.set_title(header.get("title", "") + "\n" + header.get("subtitle", ""), fontsize=10)
    # below the workloads' labels: the legend, then the versions in small print
    figure.legend(*axes.get_legend_handles_labels(), loc="lower center", ncol=len(columns), fontsize=8,
                  bbox_to_anchor=(0.5, 0.045), frameon=False)
    figure.text(0.5, 0.01, header.get("versions", ""), ha="center", fontsize=6.5, color="#555555", wrap=True)
    figure.tight_layout(rect=(0, 0.1, 1, 1))
    figure.savefig(png)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_peers.py peers.tsv peers.png")
    header, workloads, columns, times, titles = read_tsv(sys.argv[1])
    if not times:
        sys.exit(f"plot_peers.py: no times in {sys.argv[1]}")
    plot(header, workloads, columns, times, titles, sys.argv[2])


if __name__ == "__main__":
    main()
