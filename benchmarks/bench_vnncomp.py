#!/usr/bin/env python3
"""Runs `distcrown verify` on instances of ../shared/fixtures/expected/vnncomp_results.csv and
prints, per benchmark: solved (sat/unsat), timeouts, unknown, errors, wrong answers against the
expected column, and total time. One process per instance, one at a time (timings stay honest).

  python3 benchmarks/bench_vnncomp.py --benchmark acasxu
  python3 benchmarks/bench_vnncomp.py --benchmark mnist_fc --model mnist_256x2 --timeout-cap 60
  python3 benchmarks/bench_vnncomp.py --benchmark mnist_fc --ranks 2 -- --domain-groups 2
  python3 benchmarks/bench_vnncomp.py --instances DIR/instances.csv --timeout-cap 30

--instances reads another list of the same columns (benchmark, model, spec, timeout_s, expected;
paths relative to the list's folder): benchmark families fetched outside the project (an
expected 'unknown' when no ground truth is known).

A wrong answer is sat where alpha-beta-CROWN proved unsat, or unsat where it found a
counterexample (our sat answers carry a checked counterexample; 'timeout' in the expected column
counts nothing as wrong). Exit status 1 when any answer is wrong or any run errors.
"""
import argparse
import csv
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "..", "shared", "fixtures"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"))
    ap.add_argument("--benchmark", action="append", help="benchmark name(s) (default: all)")
    ap.add_argument("--model", action="append", help="only models whose file name contains this")
    ap.add_argument("--timeout-cap", type=float, default=0, help="cap every timeout at this many s")
    ap.add_argument("--instances", help="a list of instances instead of the fixtures' (see above)")
    ap.add_argument("--csv", help="write per-instance rows here")
    ap.add_argument("--ranks", type=int, default=1, help="run each instance under mpirun -np N")
    ap.add_argument("extra", nargs="*", help="extra arguments for verify (after --)")
    a = ap.parse_args()
    expected = os.path.join(a.fixtures, "expected", "vnncomp_results.csv")
    base = a.fixtures
    if a.instances:
        expected = a.instances
        base = os.path.dirname(os.path.abspath(a.instances))
    if not os.path.exists(expected):
        print(f"instances not found at {expected}", file=sys.stderr)
        return 2
    with open(expected) as f:
        rows = list(csv.DictReader(f))
    if a.benchmark:
        rows = [r for r in rows if r["benchmark"] in a.benchmark]
    if a.model:
        rows = [r for r in rows if any(m in r["model"] for m in a.model)]
    out_rows = []
    for r in rows:
        timeout = float(r["timeout_s"])
        if a.timeout_cap > 0:
            timeout = min(timeout, a.timeout_cap)
        cmd = [a.binary, "verify", "--model", os.path.join(base, r["model"]), "--vnnlib",
               os.path.join(base, r["spec"]), "--timeout", str(timeout), "--quiet"] + a.extra
        env = None
        if a.ranks > 1:
            cmd = ["mpirun", "--oversubscribe", "-np", str(a.ranks)] + cmd
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 120, env=env)
        dt = time.monotonic() - t0
        got = p.stdout.split("\n", 1)[0].strip() if p.returncode == 0 else "error"
        exp = r["expected"]
        wrong = (got == "sat" and exp == "unsat") or (got == "unsat" and exp == "sat")
        out_rows.append(dict(r, got=got, seconds=round(dt, 2), timeout_used=timeout,
                             wrong=int(wrong)))
        detail = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        print(f"{r['benchmark']:9s} {os.path.basename(r['model']):22s} "
              f"{os.path.basename(r['spec']):40s} expected {exp:7s} got {got:7s} "
              f"{dt:7.2f} s{'  WRONG' if wrong else ''}  | {detail}", flush=True)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out_rows[0].keys()))
            w.writeheader()
            w.writerows(out_rows)
    print()
    print(f"{'benchmark':12s} {'model':16s} {'n':>3s} {'solved':>6s} {'sat':>4s} {'unsat':>5s} "
          f"{'timeout':>7s} {'unknown':>7s} {'error':>5s} {'wrong':>5s} {'time s':>8s} cap")
    groups = {}
    for r in out_rows:
        key = (r["benchmark"], os.path.splitext(os.path.basename(r["model"]))[0])
        groups.setdefault(key, []).append(r)
    for (b, m), g in sorted(groups.items()):
        cnt = lambda v: sum(1 for r in g if r["got"] == v)
        print(f"{b:12s} {m:16s} {len(g):3d} {cnt('sat') + cnt('unsat'):6d} {cnt('sat'):4d} "
              f"{cnt('unsat'):5d} {cnt('timeout'):7d} {cnt('unknown'):7d} {cnt('error'):5d} "
              f"{sum(r['wrong'] for r in g):5d} {sum(r['seconds'] for r in g):8.1f} "
              f"{a.timeout_cap if a.timeout_cap > 0 else 'none'}")
    bad = any(r["wrong"] for r in out_rows) or any(r["got"] == "error" for r in out_rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
