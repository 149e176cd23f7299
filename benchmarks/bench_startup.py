#!/usr/bin/env python3
"""Start-up (issue 44): what a `distcrown` process costs before and around its first bound, the
part VNN-COMP pays once per instance (186 times on ACAS Xu).

Times, each RUNS times in turn (medians, wall clock, one core with --cpu):
  - two probes built here against the set-up's LibTorch: a program that makes one tensor, linked
    with LibTorch's CPU library alone, and the same linked as distcrown is (LibTorch's CUDA
    libraries too, which load and register their operators at start even on a machine without a
    GPU): what LibTorch costs a process before main, and the CUDA libraries' share of it;
  - `distcrown --help` (loading and exit, no work);
  - `distcrown verify` on the embedded default model and property, and on the fixtures' ACAS Xu
    1_1 property 3 (when ../shared/fixtures is there): the process's wall time and the report's
    `time_s` (from the process's start to its answer).

    python3 benchmarks/bench_startup.py [--binary build/bin/distcrown] [--runs 5] [--csv out.csv]
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_bab_throughput import venv_python  # the set-up's Python (.venv-path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = r"""
#include <ATen/ATen.h>
#include <cstdio>
int main() { std::printf("%g\n", at::ones({2}).sum().item<double>()); }
"""


def torch_dir():
    code = "import torch, os; print(os.path.dirname(torch.__file__))"
    return subprocess.run([venv_python(), "-c", code], check=True, capture_output=True,
                          text=True).stdout.strip()


def build_probes(tmp):
    """{name: path} of the two probe programs, or {} without a compiler."""
    cxx = shutil.which("g++")
    if cxx is None:
        print("bench_startup: no g++; the LibTorch probes' rows left out")
        return {}
    torch = torch_dir()
    src = os.path.join(tmp, "probe.cpp")
    with open(src, "w") as f:
        f.write(PROBE)
    libs = {"LibTorch CPU library only": ["-ltorch_cpu", "-lc10"],
            "LibTorch with its CUDA libraries (as distcrown)":
                ["-ltorch", "-ltorch_cpu", "-ltorch_cuda", "-lc10"]}
    out = {}
    for i, (name, link) in enumerate(libs.items()):
        exe = os.path.join(tmp, f"probe{i}")
        subprocess.run([cxx, "-O1", "-std=c++20", src, "-I", os.path.join(torch, "include"),
                        "-L", os.path.join(torch, "lib"),
                        f"-Wl,-rpath,{os.path.join(torch, 'lib')}",
                        "-Wl,--no-as-needed", *link, "-o", exe], check=True)
        out[name] = exe
    return out


def timed(cmd, cpu):
    """(wall s, the report's time_s or None) of one run."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        full = [c.replace("{report}", report) for c in cmd]
        if cpu is not None:
            full = ["taskset", "-c", str(cpu)] + full
        t0 = time.perf_counter()
        subprocess.run(full, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        inside = None
        if os.path.exists(report):
            with open(report) as f:
                inside = json.load(f).get("time_s")
        return wall, inside


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"))
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "..", "shared", "fixtures"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cpu", type=int, help="pin every run to this core")
    ap.add_argument("--csv")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(name, [exe]) for name, exe in build_probes(tmp).items()]
        cases.append(("distcrown --help", [a.binary, "--help"]))
        verify = [a.binary, "verify", "--quiet", "--threads", "1", "--report", "{report}"]
        cases.append(("distcrown verify, embedded default", verify))
        acas = os.path.join(a.fixtures, "models", "acasxu_1_1.onnx")
        prop = os.path.join(a.fixtures, "specs", "acasxu_prop_3.vnnlib")
        if os.path.exists(acas) and os.path.exists(prop):
            cases.append(("distcrown verify, ACAS Xu 1_1 prop 3",
                          verify + ["--model", acas, "--vnnlib", prop]))
        else:
            print(f"bench_startup: no ACAS Xu fixture under {a.fixtures}; its row left out")
        times = {name: [] for name, _ in cases}
        for _ in range(a.runs):
            for name, cmd in cases:
                times[name].append(timed(cmd, a.cpu))
    header = ["what", "wall_s_median", "wall_s_min", "wall_s_max", "answer_s_median"]
    rows = []
    for name, _ in cases:
        walls = [w for w, _ in times[name]]
        inside = [t for _, t in times[name] if t is not None]
        rows.append([name, f"{statistics.median(walls):.3f}", f"{min(walls):.3f}",
                     f"{max(walls):.3f}", f"{statistics.median(inside):.3f}" if inside else ""])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
