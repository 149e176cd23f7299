"""Plots bench_bab_parallel's CSV: branch-and-bound throughput relative to one process, and the
largest per-rank tensor peak, per (P, G, sharding) layout, one bar per batch size.

    "$(cat .venv-path)"/bin/python scripts/plot_bab_parallel.py docs/bab_parallel.csv docs/bab_parallel.png

Written for docs/results.md; needs matplotlib (installed by scripts/setup.sh).
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("csv")
    parser.add_argument("png")
    args = parser.parse_args()

    rows = list(csv.DictReader(open(args.csv)))
    layouts = list(dict.fromkeys(f"({r['ranks']},{r['groups']}) {r['shard']}" for r in rows))
    batches = sorted({int(r["batch"]) for r in rows})
    width = 0.8 / len(batches)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for k, batch in enumerate(batches):
        at = {f"({r['ranks']},{r['groups']}) {r['shard']}": r for r in rows
              if int(r["batch"]) == batch}
        xs = [i + (k - (len(batches) - 1) / 2) * width for i in range(len(layouts))]
        label = f"batch {batch}"
        for ax, key in ((ax1, "vs_1_1"), (ax2, "tensor_mb")):
            ax.bar([x for x, name in zip(xs, layouts) if name in at],
                   [float(at[name][key]) for name in layouts if name in at], width, label=label)
    ax1.axhline(1.0, color="grey", linewidth=0.8)
    ax1.axhline(1.8, color="grey", linestyle="--", linewidth=0.8, label="target of (2,2): 1.8x")
    ax1.set_ylabel("domains/s relative to (1,1)")
    ax1.set_title("throughput (mnist_256x6, deterministic)")
    ax2.set_ylabel("largest per-rank tensor peak, MB")
    ax2.set_title("memory per rank")
    for ax in (ax1, ax2):
        ax.set_xticks(range(len(layouts)))
        ax.set_xticklabels(layouts, rotation=30, ha="right", fontsize=8)
        ax.set_xlabel("(P, G) sharding")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)


if __name__ == "__main__":
    main()
