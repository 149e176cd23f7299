#!/usr/bin/env python3
"""alpha-CROWN under --memory-limit: for each limit, one `distcrown bounds --method alpha-crown`
run, and a table of the limit, the peak tensor bytes (the memory accountant's), the intermediate
starts left out of the optimisation (`starts_left_out`), whether the optimisation stopped at the
limit, the time, and the mean lower bound of the outputs (higher is tighter). One process at a
time, each under an address-space cap (--cap-gb) so that a run without a limit that would exhaust
the machine ends with an allocation error instead of the kernel's out-of-memory killer.

  python3 benchmarks/bench_alpha_memory.py --model M.onnx --vnnlib S.vnnlib \\
      --limit 4000 --limit 8000 --iterations 3 [--binary OTHER/distcrown --binary-label before]

A limit of 'none' runs without --memory-limit (the binary's default). A run that fails prints
its last error line in the table's note column. --csv appends one row per run (binary label,
limit, peak MB, starts left out, stopped, time, mean lower bound, note), so that two binaries
go in one file.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_one(binary, model, vnnlib, iterations, limit, cap_gb):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bounds.json")
        cmd = [binary, "bounds", "--method", "alpha-crown", "--iterations", str(iterations),
               "--model", model, "--vnnlib", vnnlib, "--result", out, "--threads", "1"]
        if limit != "none":
            cmd += ["--memory-limit", str(limit)]
        shell = f"ulimit -v {int(cap_gb * 1024 * 1024)}; exec " + " ".join(cmd)
        t0 = time.monotonic()
        p = subprocess.run(["bash", "-c", shell], capture_output=True, text=True)
        wall = time.monotonic() - t0
        if p.returncode != 0 or not os.path.exists(out):
            lines = [l for l in p.stderr.splitlines() if "error" in l]
            error = (lines[-1] if lines else f"exit {p.returncode}")[:90]
            if "can't allocate memory" in error:
                error = f"allocation failed at the {cap_gb:g} GB address-space cap"
            return {"wall": wall, "error": error}
        d = json.load(open(out))
    rank = d["memory"]["ranks"][0]
    lower = d["lower"]
    return {"wall": wall, "time": d["time_s"], "peak": rank["peak_bytes"],
            "left_out": rank.get("starts_left_out", "-"),
            "limited": rank.get("memory_limited", "-"),
            "mean_lower": sum(lower) / len(lower)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"))
    ap.add_argument("--binary-label", default="this tree")
    ap.add_argument("--model", required=True)
    ap.add_argument("--vnnlib", required=True)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--limit", action="append", help="MB, or 'none' (repeatable)")
    ap.add_argument("--cap-gb", type=float, default=20.0, help="address-space cap of each run")
    ap.add_argument("--csv", help="append one row per run here")
    a = ap.parse_args()
    limits = a.limit or ["none"]
    print(f"binary: {a.binary_label}; model {os.path.basename(a.model)}, property "
          f"{os.path.basename(a.vnnlib)}, {a.iterations} alpha-CROWN iterations (both sides), "
          f"address space capped at {a.cap_gb:g} GB")
    print()
    print("| --memory-limit MB | peak tensors MB | starts left out | stopped at limit | time s "
          "| mean lower bound | note |")
    print("|---|---|---|---|---|---|---|")
    for limit in limits:
        r = run_one(a.binary, a.model, a.vnnlib, a.iterations, limit, a.cap_gb)
        if "error" in r:
            row = [a.binary_label, limit, "", "", "", f"{r['wall']:.1f}", "", r["error"]]
        else:
            row = [a.binary_label, limit, f"{r['peak'] / 1e6:.0f}", r["left_out"], r["limited"],
                   f"{r['time']:.1f}", f"{r['mean_lower']:.6g}", ""]
        print("| " + " | ".join(str(c) if c != "" else "–" for c in row[1:]) + " |")
        sys.stdout.flush()
        if a.csv:
            new = not os.path.exists(a.csv)
            with open(a.csv, "a", newline="") as f:
                w = csv.writer(f)
                if new:
                    w.writerow(["binary", "limit_mb", "peak_mb", "starts_left_out",
                                "stopped_at_limit", "time_s", "mean_lower", "note"])
                w.writerow(row)


if __name__ == "__main__":
    main()
