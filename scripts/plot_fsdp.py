"""Plots bench_fsdp's CSV: per-rank peak memory relative to P=1, per model and mode.

    "$(cat .venv-path)"/bin/python scripts/plot_fsdp.py docs/fsdp.csv docs/fsdp.png

Written for docs/results.md; needs matplotlib (installed by scripts/setup.sh).
"""
import argparse
import csv
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("csv")
    parser.add_argument("png")
    args = parser.parse_args()

    rows = list(csv.DictReader(open(args.csv)))
    models = sorted({r["model"] for r in rows}, key=lambda m: [r["model"] for r in rows].index(m))
    labels = sorted(
        {r["mode"] + ("" if r["chunk"] == "0" else f" (chunk {r['chunk']})") for r in rows
         if r["procs"] != "1"}
    )
    colours = {label: f"C{i}" for i, label in enumerate(labels)}  # one colour per mode everywhere
    fig, axes = plt.subplots(1, len(models), figsize=(4 * len(models), 3.8), squeeze=False)
    for ax, model in zip(axes[0], models):
        series = defaultdict(list)
        for r in rows:
            if r["model"] != model or r["procs"] == "1":
                continue
            label = r["mode"] + ("" if r["chunk"] == "0" else f" (chunk {r['chunk']})")
            series[label].append((int(r["procs"]), float(r["peak_vs_p1"])))
        for label, pts in sorted(series.items()):
            pts.sort()
            ax.plot([p for p, _ in pts], [v for _, v in pts], marker="o", label=label,
                    color=colours[label])
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_title(model)
        ax.set_xlabel("ranks P")
        ax.set_xticks(sorted({int(r["procs"]) for r in rows if r["procs"] != "1"}))
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel("per-rank peak / P=1 peak")
    handles = [plt.Line2D([], [], color=colours[label], marker="o") for label in labels]
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.suptitle("distcrown CROWN, per-rank peak memory vs one process (CPU, MPI)")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
