#!/usr/bin/env python3
"""Branch and bound across ranks (issue 14): `distcrown verify --deterministic --max-rounds R`
on a property that alpha-CROWN does not prove, at several (ranks P, domain groups G, sharding)
layouts, one layout at a time. Prints, per layout, the verdict, the domains bounded (the same at
every layout: deterministic), the seconds spent in branch and bound (from the report), the
throughput (domains bounded per second of branch and bound), its ratio to (1, 1), the domains
moved between groups and the largest per-rank peaks: resident memory (LibTorch alone is ~380 MB)
and the tensors' own (the memory accountant).

  python3 benchmarks/bench_bab_parallel.py                       # mnist_256x6, 8 rounds, batch 64
  python3 benchmarks/bench_bab_parallel.py --rounds 4 --batch 128 --layouts 1,1,none 2,2,none
  python3 benchmarks/bench_bab_parallel.py --layouts 1,1,none 2,2,none -- --device cuda --backend mpi
  python3 benchmarks/bench_bab_parallel.py --rounds 11 --batch 512 --csv docs/bab_parallel.csv

--csv appends one row per layout (with the batch and rounds, so that runs at several batch sizes
share a file); scripts/plot_bab_parallel.py draws it.

Arguments after `--` go to every `verify` (on a GPU: `--device cuda`; P > 1 ranks on one GPU need
`--backend mpi`, since NCCL refuses two ranks on one device). With --device cuda the tensor column
is the CUDA caching allocator's peak.

Exit status 1 when a layout fails, or its verdict or domain count differs from the first layout's.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_LAYOUTS = ["1,1,none", "2,2,none", "2,1,fsdp", "2,1,fsdp,spec", "4,4,none", "4,2,fsdp"]


def parse_layout(layout):
    """P,G,shard[,spec]: spec adds --spec-parallel (the group's ranks share each batch)."""
    parts = layout.split(",")
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] != "spec"):
        raise SystemExit(f"bad layout {layout!r}: P,G,shard[,spec]")
    return parts[0], parts[1], parts[2], len(parts) == 4


def run(args, layout):
    """One run of a layout: its report."""
    ranks, groups, shard, spec = parse_layout(layout)
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [args.binary, "verify", "--model", args.model, "--vnnlib", args.spec,
               "--deterministic", "--max-rounds", str(args.rounds), "--bab-batch-size",
               str(args.batch), "--timeout", "0", "--quiet", "--domain-groups", groups,
               "--shard", shard, "--report", report] + (["--spec-parallel"] if spec else [])
        cmd += args.extra
        if ranks != "1":
            cmd = ["mpirun", "--oversubscribe", "-np", ranks] + cmd
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["(no output)"]
            raise RuntimeError(f"exit status {done.returncode}: {lines[-1]}")
        with open(report) as f:
            return json.load(f)


def main():
    fixtures = os.path.join(ROOT, "..", "shared", "fixtures")
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"))
    ap.add_argument("--model", default=os.path.join(fixtures, "models", "mnist_256x6.onnx"))
    ap.add_argument("--spec", default=os.path.join(fixtures, "specs", "mnist_prop_2_0.05.vnnlib"))
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per layout, the layouts in turn (medians reported)")
    ap.add_argument("--layouts", nargs="+", default=DEFAULT_LAYOUTS, help="P,G,shard[,spec] ...")
    ap.add_argument("--csv", help="append one row per layout to this CSV file")
    ap.add_argument("extra", nargs="*", help="arguments for every verify (after --)")
    args = ap.parse_args()

    print(f"model {os.path.basename(args.model)}, spec {os.path.basename(args.spec)}, "
          f"{args.rounds} rounds per disjunct, batch {args.batch}, --deterministic"
          + (f", verify {' '.join(args.extra)}" if args.extra else ""))
    print(f"{'P':>2} {'G':>2} {'shard':>10} {'result':>8} {'domains':>8} {'bab s':>7} "
          f"{'dom/s':>8} {'vs 1,1':>7} {'moved':>6} {'in grp':>6} {'RSS MB':>7} {'tensor MB':>9}")
    base = None
    first = None
    ok = True
    rows = []
    # The layouts in turn, `repeat` times: this machine's speed drifts over minutes, so that
    # layouts run one after the other would compare different machines.
    reports = {layout: [] for layout in args.layouts}
    failed = {}
    for _ in range(args.repeat):
        for layout in args.layouts:
            if layout in failed:
                continue
            try:
                reports[layout].append(run(args, layout))
            except RuntimeError as e:  # the other layouts still run; the exit status says it
                failed[layout] = e
    for layout in args.layouts:
        if layout in failed:
            print(f"{layout}: failed, {failed[layout]}")
            ok = False
            continue
        reps = reports[layout]
        r = reps[0]
        seconds = statistics.median(x["bab_time_s"] for x in reps)
        rate = r["domains_bounded"] / seconds if seconds > 0 else float("nan")
        base = base or rate
        first = first or r
        if (r["result"], r["domains_bounded"]) != (first["result"], first["domains_bounded"]):
            ok = False
        ranks, groups, shard, spec = parse_layout(layout)
        shard = shard + "+spec" if spec else shard
        # Spec-parallel: domains balanced between the ranks of a group (each keeps its own).
        in_groups = r.get("domains_moved_in_groups", 0)
        peak = max(x["memory"]["peak_bytes"] for x in reps) / 1e6
        tensors = max(x["memory"]["peak_tensor_bytes"] for x in reps) / 1e6
        print(f"{ranks:>2} {groups:>2} {shard:>10} {r['result']:>8} {r['domains_bounded']:>8} "
              f"{seconds:>7.2f} {rate:>8.1f} {rate / base:>6.2f}x {r['domains_moved']:>6} {in_groups:>6} "
              f"{peak:>7.0f} {tensors:>9.1f}")
        rows.append({"model": os.path.basename(args.model), "spec": os.path.basename(args.spec),
                     "batch": args.batch, "rounds": args.rounds, "ranks": ranks,
                     "groups": groups, "shard": shard, "result": r["result"],
                     "domains": r["domains_bounded"], "bab_s": f"{seconds:.3f}",
                     "domains_per_s": f"{rate:.1f}", "vs_1_1": f"{rate / base:.3f}",
                     "moved": r["domains_moved"],
                     "moved_in_groups": in_groups, "rss_mb": f"{peak:.1f}",
                     "tensor_mb": f"{tensors:.1f}"})
    if args.csv and rows:
        new = not os.path.exists(args.csv) or os.path.getsize(args.csv) == 0
        if not new:
            with open(args.csv, newline="") as f:
                header = next(csv.reader(f), [])
            if header != list(rows[0]):
                print(f"error: {args.csv} has other columns ({','.join(header)}); "
                      "write to a new file", file=sys.stderr)
                return 1
        with open(args.csv, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            if new:
                w.writeheader()
            w.writerows(rows)
    if not ok:
        print("error: a layout failed, or layouts disagree on the verdict or the number of domains",
              file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
