#!/usr/bin/env python3
"""Intermediate bounds below the root of a ReLU branch and bound (issue 15): `verify
--bab-intermediate fixed` (the root's bounds, split neurons clamped) against `refresh` (a CROWN
pass over the layers after each batch's earliest split, intersected with the kept bounds), on
the same instances with the same timeout, the two modes one after the other per instance.
Prints per instance and mode: the verdict, seconds, domains bounded, domains per second of
branch and bound and the worst bound left; then per mode the instances solved and, per
instance, refresh's throughput as a fraction of fixed's.

  taskset -c 0 python3 benchmarks/bench_bab_refresh.py                  # 8 mnist_fc instances, 60 s
  python3 benchmarks/bench_bab_refresh.py --timeout 20 --instances mnist_256x4:mnist_prop_6_0.03

Instances are model:spec names under the fixtures' models/ and specs/ (no extension).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Unsat mnist_fc instances that timed out at 60 s with fixed bounds (docs/mnist_fc_256x4_256x6.csv).
DEFAULT_INSTANCES = [
    "mnist_256x4:mnist_prop_6_0.03", "mnist_256x4:mnist_prop_8_0.03",
    "mnist_256x4:mnist_prop_0_0.05", "mnist_256x4:mnist_prop_4_0.05",
    "mnist_256x6:mnist_prop_1_0.03", "mnist_256x6:mnist_prop_7_0.03",
    "mnist_256x6:mnist_prop_9_0.03", "mnist_256x6:mnist_prop_0_0.05",
]
MODES = ["fixed", "refresh"]


def run(args, model, spec, mode):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [args.binary, "verify", "--model", os.path.join(args.fixtures, "models", model + ".onnx"),
               "--vnnlib", os.path.join(args.fixtures, "specs", spec + ".vnnlib"),
               "--timeout", str(args.timeout), "--threads", "1", "--quiet",
               "--bab-intermediate", mode, "--report", report] + args.extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(report) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"))
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "..", "shared", "fixtures"))
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--instances", nargs="+", default=DEFAULT_INSTANCES)
    ap.add_argument("extra", nargs="*", help="extra arguments for verify (after --)")
    args = ap.parse_args()
    if not os.path.isdir(args.fixtures):
        print(f"no fixtures at {args.fixtures}", file=sys.stderr)
        return 1

    print(f"verify --timeout {args.timeout:g} --threads 1, modes {' and '.join(MODES)}")
    print(f"{'model':<12} {'spec':<22} {'mode':<8} {'result':>8} {'time s':>7} {'domains':>8} "
          f"{'dom/s':>7} {'worst bound':>11}")
    solved = {m: 0 for m in MODES}
    ratios = []
    for inst in args.instances:
        model, spec = inst.split(":")
        rates = {}
        for mode in MODES:
            r = run(args, model, spec, mode)
            bab = r.get("bab_time_s", 0.0)
            domains = r.get("domains_bounded", 0)  # absent when no branch and bound ran
            rates[mode] = domains / bab if bab > 0 else float("nan")
            solved[mode] += r["result"] in ("sat", "unsat")
            worst = r.get("worst_bound")
            worst_text = f"{worst:.4f}" if isinstance(worst, (int, float)) else "-"
            print(f"{model:<12} {spec:<22} {mode:<8} {r['result']:>8} {r['time_s']:>7.1f} "
                  f"{domains:>8} {rates[mode]:>7.0f} {worst_text:>11}", flush=True)
        if rates["fixed"] == rates["fixed"] and rates["fixed"] > 0:
            ratios.append(rates["refresh"] / rates["fixed"])
    n = len(args.instances)
    print(" ".join(f"{m}: {solved[m]}/{n} solved" for m in MODES))
    if ratios:
        print(f"refresh throughput / fixed: median {statistics.median(ratios):.2f} "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
