#!/usr/bin/env python3
"""Writes the instance list that `bench_vnncomp.py --instances` reads for a fetched VNN-COMP
benchmark family, with a tool's verdicts from that year's results as the expected column.

  python3 benchmarks/vnncomp_list.py --family DIR --results RESULTS.csv --name cgan_2023 \
      [--out DIR/list.csv]

DIR is the family's folder of github:ChristopherBrix/vnncomp20XX_benchmarks (instances.csv,
onnx/, vnnlib/; gzipped files are unpacked beside themselves). RESULTS.csv is a tool's
`<tool>/20XX_<family>/results.csv` of github:ChristopherBrix/vnncomp20XX_results (its columns:
benchmark, model, property, time, verdict, ...); a verdict other than sat or unsat becomes
'unknown' (nothing counts as wrong there). Models that are Git LFS pointers (a few hundred bytes)
are left out, and said so.
"""
import argparse
import csv
import gzip
import os
import shutil
import sys


def unpacked(path):
    """path, or path.gz unpacked beside it; None when neither exists."""
    if os.path.exists(path):
        return path
    if os.path.exists(path + ".gz"):
        with gzip.open(path + ".gz", "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        return path
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--name", required=True, help="the benchmark column, e.g. cgan_2023")
    ap.add_argument("--out")
    a = ap.parse_args()
    verdicts = {}
    with open(a.results) as f:
        for row in csv.reader(f):
            if len(row) >= 5:
                key = (os.path.basename(row[1]), os.path.basename(row[2]))
                verdicts[key] = row[4] if row[4] in ("sat", "unsat") else "unknown"
    rows = []
    with open(os.path.join(a.family, "instances.csv")) as f:
        for model, spec, timeout in csv.reader(f):
            m = unpacked(os.path.join(a.family, model.strip()))
            v = unpacked(os.path.join(a.family, spec.strip()))
            if m is None or v is None or os.path.getsize(m) < 1000:
                print(f"left out (missing or an LFS pointer): {model} {spec}", file=sys.stderr)
                continue
            expected = verdicts.get((os.path.basename(m), os.path.basename(v)), "unknown")
            rows.append(dict(benchmark=a.name, model=os.path.relpath(m, a.family),
                             spec=os.path.relpath(v, a.family), timeout_s=timeout.strip(),
                             expected=expected))
    out = a.out or os.path.join(a.family, "list.csv")
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["benchmark", "model", "spec", "timeout_s", "expected"])
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} instances -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
