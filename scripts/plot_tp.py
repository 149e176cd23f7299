"""Plots bench_tp's CSVs: per-rank peak memory reduction of the wide MLP vs P, and the bound
drift max |b_P - b_1| of tp and tp-exact vs the number of sharded zones.

    "$(cat .venv-path)"/bin/python scripts/plot_tp.py docs/tp_wide.csv docs/tp_drift.csv docs/tp.png

Written for docs/results.md; needs matplotlib (installed by scripts/setup.sh).
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("wide_csv")
    parser.add_argument("drift_csv")
    parser.add_argument("png")
    args = parser.parse_args()

    wide = list(csv.DictReader(open(args.wide_csv)))
    drift = list(csv.DictReader(open(args.drift_csv)))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))

    procs = [int(r["procs"]) for r in wide]
    ax1.plot(procs, [float(r["peak_reduction"]) for r in wide], marker="o", label="peak memory")
    ax1.plot(procs, [float(r["speedup"]) for r in wide], marker="s", label="propagation speed-up")
    ax1.plot(procs, procs, color="grey", linestyle="--", linewidth=0.8, label="ideal (P)")
    ax1.set_xticks(procs)
    ax1.set_xlabel("ranks P")
    ax1.set_ylabel("P = 1 / P ranks (per rank)")
    ax1.set_title("wide MLP, tp (CPU, MPI)")
    ax1.legend(fontsize=8)

    for mode, marker in (("tp", "o"), ("tp-exact", "s")):
        for p, style in (("2", "-"), ("4", ":")):
            pts = sorted(
                (int(r["zones"]), max(float(r["delta_lower"]), float(r["delta_upper"])))
                for r in drift
                if r["mode"] == mode and r["procs"] == p
            )
            if not pts:
                continue
            ax2.plot([z for z, _ in pts], [max(d, 1e-10) for _, d in pts], marker=marker,
                     linestyle=style, label=f"{mode}, P={p}")
    ax2.set_yscale("log")
    ax2.set_xlabel("sharded zones (mnist 256x2/4/6, synthetic 256x8)")
    ax2.set_ylabel("max |b_P - b_1|")
    ax2.set_title("CROWN bound drift vs one process")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)


if __name__ == "__main__":
    main()
