#!/usr/bin/env python3
"""Input splitting's throughput (issue 44): boxes a second on ACAS Xu 3_3 property 2 under
`verify --deterministic --max-rounds N` (the same boxes at every run), for one or more builds, side
by side, with the FLOPs of the planned passes' products and what fraction of this machine's GEMM
peak they reach.

  python3 benchmarks/bench_input_throughput.py --binary build/bin/distcrown \
      [--binary OTHER --label OTHER=before] [--passes planned --passes reference] \
      [--rounds 400] [--runs 5] [--csv OUT.csv]

Each build runs with each --passes value it accepts (a build before the option runs once, as
"reference"), the builds in turn, run after run, one thread, so that drift hits them alike; the
median of each is printed. The GEMM peak is measured with LibTorch's own BLAS (the project's
virtual environment's torch, one thread): a 1024³ product, and the planned passes' typical shape
([4096, 50] · [50, 56]). The FLOPs count only products (2·m·n·k, padding left out); a build
without the planned passes reports none. Needs ../shared/fixtures (exits with a message without).
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
PEAK_SNIPPET = r"""
import time, torch
torch.set_num_threads(1)
def rate(m, k, n, reps):
    a = torch.randn(m, k); b = torch.randn(k, n)
    for _ in range(3): torch.mm(a, b)
    t = time.perf_counter()
    for _ in range(reps): torch.mm(a, b)
    return 2.0 * m * k * n * reps / (time.perf_counter() - t)
print(max(rate(1024, 1024, 1024, 10) for _ in range(3)), max(rate(4096, 50, 56, 200) for _ in range(3)))
"""


def venv_python():
    try:
        with open(os.path.join(ROOT, ".venv-path")) as f:
            return os.path.join(f.read().strip(), "bin", "python")
    except OSError:
        return os.path.join(os.path.expanduser("~"), ".cache", "distcrown", "venv-torch-2.11.0",
                            "bin", "python")


def accepts_passes(binary):
    out = subprocess.run([binary, "verify", "--help"], capture_output=True, text=True).stdout
    return "--passes" in out


def run_once(binary, passes, fixtures, rounds):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        cmd = [binary, "verify", "--model", os.path.join(fixtures, "models", "acasxu_3_3.onnx"),
               "--vnnlib", os.path.join(fixtures, "specs", "acasxu_prop_2.vnnlib"),
               "--split", "input", "--deterministic", "--max-rounds", str(rounds), "--timeout",
               "0", "--quiet", "--threads", "1", "--report", report]
        if passes is not None:
            cmd += ["--passes", passes]
        subprocess.run(cmd, check=True, capture_output=True)
        with open(report) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", action="append", required=True)
    ap.add_argument("--label", action="append", default=[], help="BINARY=LABEL")
    ap.add_argument("--passes", action="append", help="planned, reference (default: both)")
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "..", "shared", "fixtures"))
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--csv")
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(a.fixtures, "models")):
        print(f"bench_input_throughput: no fixtures at {a.fixtures}; nothing to measure")
        return 0
    labels = dict(x.split("=", 1) for x in a.label)
    configs = []  # (label, binary, passes)
    for b in a.binary:
        if accepts_passes(b):
            configs += [(labels.get(b, b), b, p) for p in (a.passes or ["planned", "reference"])]
        else:
            configs.append((labels.get(b, b), b, None))
    runs = {c: [] for c in configs}
    for _ in range(a.runs):
        for c in configs:
            runs[c].append(run_once(c[1], c[2], a.fixtures, a.rounds))
    peak = subprocess.run([venv_python(), "-c", PEAK_SNIPPET], capture_output=True, text=True,
                          check=True).stdout.split()
    gemm_peak, shape_peak = float(peak[0]), float(peak[1])
    print(f"GEMM peak, one thread: {gemm_peak / 1e9:.1f} GFLOP/s (1024³), "
          f"{shape_peak / 1e9:.1f} GFLOP/s ([4096, 50]·[50, 56])")
    header = ["build", "passes", "boxes", "bab_s_median", "bab_s_min", "bab_s_max", "boxes_per_s",
              "mflop_per_box", "gflop_per_s", "of_gemm_peak", "of_shape_peak", "worst_bound"]
    rows = []
    for c in configs:
        rs = runs[c]
        times = [r["bab_time_s"] for r in rs]
        boxes = {r["domains_bounded"] for r in rs}
        med = statistics.median(times)
        flops = statistics.median([r.get("bab_pass_flops", 0) for r in rs])
        n = boxes.pop() if len(boxes) == 1 else -1  # -1: runs disagreed (never expected)
        rows.append([c[0], c[2] or "reference", n, f"{med:.3f}", f"{min(times):.3f}",
                     f"{max(times):.3f}", f"{n / med:.0f}",
                     f"{flops / n / 1e6:.3f}" if flops else "",
                     f"{flops / med / 1e9:.2f}" if flops else "",
                     f"{flops / med / gemm_peak:.3f}" if flops else "",
                     f"{flops / med / shape_peak:.3f}" if flops else "",
                     f"{rs[0]['worst_bound']:.6g}" if rs[0]["worst_bound"] is not None else ""])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for r in [header] + rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header + ["gemm_peak_gflops", "shape_peak_gflops"])
            for r in rows:
                w.writerow(r + [f"{gemm_peak / 1e9:.1f}", f"{shape_peak / 1e9:.1f}"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
