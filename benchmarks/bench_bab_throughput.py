#!/usr/bin/env python3
"""Branch and bound's throughput (issue 44), for one or more builds side by side, with the FLOPs of
the planned passes' products and what fraction of this machine's GEMM peak they reach:

  --case input (default): input splitting, boxes a second on ACAS Xu 3_3 property 2 under
    `verify --split input --deterministic --max-rounds 400` (the same boxes at every run);
  --case relu: ReLU splitting, domains a second on mnist 256x6 `prop_2_0.05` under `verify --split
    relu --deterministic --max-rounds 20 --bab-batch-size 64` (every disjunct's search; FSB's
    trial children count as domains, as in the report). Each build also runs at
    --bab-iterations 5: the two round times give the cost of one α/β pass (the difference over
    15 passes) and a round's fixed cost (the rest: FSB's trials, branching, storing, attacks).

  python3 benchmarks/bench_bab_throughput.py --binary build/bin/distcrown \
      [--binary OTHER --label OTHER=before] [--case relu] [--passes planned --passes reference] \
      [--rounds N] [--runs 5] [--csv OUT.csv]

Each build runs with each --passes value it accepts (a build before the option runs once, as
"reference"), the builds in turn, run after run, one thread, so that drift hits them alike; the
median of each is printed. The GEMM peak is measured with LibTorch's own BLAS (the project's
virtual environment's torch, one thread): a 1024³ product, and the planned passes' typical shape
(input: [4096, 50] · [50, 56]; relu: [128, 256] · [256, 256]). The FLOPs count only products
(2·m·n·k, padding left out); a build or path without the planned passes reports none. Needs
../shared/fixtures (exits with a message without).
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
import sys
m, k, n = (int(v) for v in sys.argv[1:4])
print(max(rate(1024, 1024, 1024, 10) for _ in range(3)), max(rate(m, k, n, 200) for _ in range(3)))
"""
CASES = {
    "input": {"model": "acasxu_3_3.onnx", "spec": "acasxu_prop_2.vnnlib", "rounds": 400,
              "extra": ["--split", "input"], "unit": "boxes", "shape": (4096, 50, 56)},
    "relu": {"model": "mnist_256x6.onnx", "spec": "mnist_prop_2_0.05.vnnlib", "rounds": 20,
             "extra": ["--split", "relu", "--bab-batch-size", "64"], "unit": "domains",
             "shape": (128, 256, 256)},
}


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


def run_once(binary, passes, fixtures, case, rounds, iterations=None):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        cmd = [binary, "verify", "--model", os.path.join(fixtures, "models", case["model"]),
               "--vnnlib", os.path.join(fixtures, "specs", case["spec"]), "--deterministic",
               "--max-rounds", str(rounds), "--timeout", "0", "--quiet", "--threads", "1",
               "--report", report] + case["extra"]
        if passes is not None:
            cmd += ["--passes", passes]
        if iterations is not None:
            cmd += ["--bab-iterations", str(iterations)]
        subprocess.run(cmd, check=True, capture_output=True)
        with open(report) as f:
            return json.load(f)


def round_costs(full, short, rounds_full, rounds_short):
    """(ms a pass, fixed ms a round) from round times at 20 and 5 α/β passes."""
    t20 = statistics.median(r["bab_time_s"] for r in full) / rounds_full
    t5 = statistics.median(r["bab_time_s"] for r in short) / rounds_short
    per_pass = (t20 - t5) / 15
    return 1e3 * per_pass, 1e3 * (t5 - 5 * per_pass)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", action="append", required=True)
    ap.add_argument("--label", action="append", default=[], help="BINARY=LABEL")
    ap.add_argument("--case", choices=sorted(CASES), default="input")
    ap.add_argument("--passes", action="append", help="planned, reference (default: both)")
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "..", "shared", "fixtures"))
    ap.add_argument("--rounds", type=int, help="default: 400 (input), 20 (relu)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--csv")
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(a.fixtures, "models")):
        print(f"bench_bab_throughput: no fixtures at {a.fixtures}; nothing to measure")
        return 0
    case = CASES[a.case]
    rounds = a.rounds or case["rounds"]
    fit = a.case == "relu"  # a second run at 5 α/β passes a round
    labels = dict(x.split("=", 1) for x in a.label)
    configs = []  # (label, binary, passes)
    for b in a.binary:
        if accepts_passes(b):
            configs += [(labels.get(b, b), b, p) for p in (a.passes or ["planned", "reference"])]
        else:
            configs.append((labels.get(b, b), b, None))
    runs = {c: [] for c in configs}
    short = {c: [] for c in configs}
    for _ in range(a.runs):
        for c in configs:
            runs[c].append(run_once(c[1], c[2], a.fixtures, case, rounds))
            if fit:
                short[c].append(run_once(c[1], c[2], a.fixtures, case, rounds, 5))
    peak = subprocess.run([venv_python(), "-c", PEAK_SNIPPET, *map(str, case["shape"])],
                          capture_output=True, text=True, check=True).stdout.split()
    gemm_peak, shape_peak = float(peak[0]), float(peak[1])
    m, k, n = case["shape"]
    print(f"GEMM peak, one thread: {gemm_peak / 1e9:.1f} GFLOP/s (1024³), "
          f"{shape_peak / 1e9:.1f} GFLOP/s ([{m}, {k}]·[{k}, {n}])")
    unit = case["unit"]
    header = ["build", "passes", unit, "bab_s_median", "bab_s_min", "bab_s_max",
              f"{unit}_per_s", f"mflop_per_{unit[:-1] if unit == 'domains' else 'box'}",
              "gflop_per_s", "of_gemm_peak", "of_shape_peak", "worst_bound"]
    if fit:
        header += ["rounds", "ms_per_round", "ms_per_pass", "fixed_ms_per_round"]
    def rounds_of(reports, all_reports):
        """The reports' rounds; a build before `bab_rounds` takes those of a run that bounded
        the same domains (the same deterministic search)."""
        if "bab_rounds" in reports[0]:
            return reports[0]["bab_rounds"]
        same = [r["bab_rounds"] for r in all_reports if "bab_rounds" in r
                and r["domains_bounded"] == reports[0]["domains_bounded"]]
        return same[0] if same else None

    every = [r for c in configs for r in runs[c] + short[c]]
    rows = []
    for c in configs:
        rs = runs[c]
        times = [r["bab_time_s"] for r in rs]
        counts = {r["domains_bounded"] for r in rs}
        med = statistics.median(times)
        flops = statistics.median([r.get("bab_pass_flops", 0) for r in rs])
        cnt = counts.pop() if len(counts) == 1 else -1  # -1: runs disagreed (never expected)
        # What ran: the report's bab_passes (a build's planned passes may not cover this case).
        ran = rs[0].get("bab_passes") or c[2] or "reference"
        row = [c[0], ran, cnt, f"{med:.3f}", f"{min(times):.3f}",
               f"{max(times):.3f}", f"{cnt / med:.0f}",
               f"{flops / cnt / 1e6:.3f}" if flops else "",
               f"{flops / med / 1e9:.2f}" if flops else "",
               f"{flops / med / gemm_peak:.3f}" if flops else "",
               f"{flops / med / shape_peak:.3f}" if flops else "",
               f"{rs[0]['worst_bound']:.6g}" if rs[0]["worst_bound"] is not None else ""]
        if fit:
            n_rounds = rounds_of(rs, every)
            n_short = rounds_of(short[c], every)
            if n_rounds and n_short:
                per_pass, fixed = round_costs(rs, short[c], n_rounds, n_short)
                row += [n_rounds, f"{1e3 * med / n_rounds:.1f}", f"{per_pass:.2f}",
                        f"{fixed:.1f}"]
            else:
                row += ["", "", "", ""]
        rows.append(row)
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
