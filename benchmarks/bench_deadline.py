#!/usr/bin/env python3
"""Deadline overshoot of `distcrown verify --timeout T`: runs instances that cannot be decided in
T seconds (the ResNet and the CNN stop inside the root CROWN / alpha-CROWN pass, mnist_256x6 there
or in ReLU branch and bound, ACAS Xu property 2 in input branch and bound) and prints, per run,
the answer and the overshoot = (wall time from process launch to process exit) - T, then the
median and maximum overshoot per T and overall. One process at a time.

  python3 benchmarks/bench_deadline.py                    # T in 2 5 10, one run each
  python3 benchmarks/bench_deadline.py --timeouts 2 5 10 --repeat 2 --csv out.csv

Exit status 1 when an answer is not `timeout` (these instances must not be decided in T).
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, model, spec): undecided within 10 s on this class of CPU.
INSTANCES = [
    ("cifar10_resnet_2b", "cifar10_resnet_2b.onnx", "cifar10_resnet_2b_prop_1_eps_0.008.vnnlib"),
    ("oval21_base", "oval21_base.onnx",
     "oval21_cifar_base_kw-img9410-eps0.043137254901960784.vnnlib"),
    ("mnist_256x6", "mnist_256x6.onnx", "mnist_prop_2_0.05.vnnlib"),
    ("acasxu_3_3 prop 2", "acasxu_3_3.onnx", "acasxu_prop_2.vnnlib"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "..", "shared", "fixtures"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"))
    ap.add_argument("--timeouts", type=float, nargs="+", default=[2, 5, 10])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--csv", help="write per-run rows here")
    ap.add_argument("extra", nargs="*", help="extra arguments for verify (after --)")
    a = ap.parse_args()
    rows = []
    bad = False
    for t in a.timeouts:
        for name, model, spec in INSTANCES:
            for _ in range(a.repeat):
                cmd = [a.binary, "verify", "--model", os.path.join(a.fixtures, "models", model),
                       "--vnnlib", os.path.join(a.fixtures, "specs", spec), "--timeout", f"{t:g}",
                       "--quiet"] + a.extra
                t0 = time.monotonic()
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=t + 120)
                dt = time.monotonic() - t0
                got = p.stdout.split("\n", 1)[0].strip() if p.returncode == 0 else "error"
                detail = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
                bad |= got != "timeout"
                rows.append(dict(instance=name, timeout_s=t, answer=got, wall_s=round(dt, 3),
                                 overshoot_s=round(dt - t, 3), detail=detail))
                print(f"T={t:<4g} {name:18s} {got:8s} wall {dt:7.3f} s  overshoot {dt - t:+.3f} s"
                      f"  | {detail}", flush=True)
    print()
    for t in a.timeouts + [None]:
        o = [r["overshoot_s"] for r in rows if t is None or r["timeout_s"] == t]
        label = "all" if t is None else f"T={t:g}"
        print(f"{label:6s} runs {len(o):3d}  median overshoot {statistics.median(o):+.3f} s"
              f"  max {max(o):+.3f} s")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
