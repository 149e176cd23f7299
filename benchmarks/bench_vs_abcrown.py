#!/usr/bin/env python3
"""Side-by-side run of distcrown and alpha-beta-CROWN on instances of
../shared/fixtures/expected/vnncomp_results.csv: same instances, same timeouts, one CPU thread
each, one process at a time (distcrown first, then alpha-beta-CROWN, for each instance).

Writes a per-instance CSV (--csv) and prints one table per benchmark and model: instances, solved,
sat, unsat, timeout, wrong and median time for each tool; then one line per instance that either
tool left undecided, with where each stopped: the worst lower bound of the property's margin left
in branch and bound (distcrown's `worst_bound` from `verify --report`; alpha-beta-CROWN's last
"Current (lb-rhs)" line) and the domains bounded (distcrown) or visited (alpha-beta-CROWN).
A wrong answer is sat where the expected column (alpha-beta-CROWN's VNN-COMP 2022 verdict) says
unsat, or unsat where it says sat.

Set-up of alpha-beta-CROWN (what the committed docs/vs_abcrown.* were made with):

  # (here both were exported with `git archive` from stored snapshots of the two repositories)
  # source: the Dec 2025 release (commit 8250d5f) and its auto_LiRPA submodule (commit 9d100ec,
  # "Dec 2025 release"); the submodule goes to <src>/auto_LiRPA (complete_verifier/auto_LiRPA is
  # a symlink to ../auto_LiRPA/auto_LiRPA). Only the source files are needed, not the data sets
  # (the stored snapshot lacks some of their blobs and `git archive` stops there: export the
  # files outside complete_verifier/datasets one by one, `git show 8250d5f:PATH`).
  git clone https://github.com/Verified-Intelligence/alpha-beta-CROWN /work/abcrown-src
  git -C /work/abcrown-src checkout 8250d5f
  git -C /work/abcrown-src submodule update --init auto_LiRPA     # 9d100ec0708684...
  # venv outside the repo (Python 3.11.7):
  python3.11 -m venv /work/abcrown-venv
  /work/abcrown-venv/bin/pip install torch==2.8.0 torchvision==0.23.0 onnx onnxruntime \
      onnx2pytorch==0.6.0 onnxoptimizer onnxsim skl2onnx pyyaml sortedcontainers
  /work/abcrown-venv/bin/pip install ninja tqdm appdirs termcolor psutil pandas graphviz gurobipy
  # gurobipy is imported unconditionally by complete_verifier/lp_mip_solver; it is never used
  # here (no MIP: see the mnist_fc config note below). Versions: see docs/vs_abcrown.txt.

This script launches alpha-beta-CROWN through itself (`--launch-abcrown`), which before running
complete_verifier/abcrown.py
  * limits torch to one thread (torch.set_num_threads(1), set_num_interop_threads(1); the
    environment also gets OMP_NUM_THREADS=MKL_NUM_THREADS=1),
  * wraps onnx2pytorch.ConvertModel so that it accepts the `quirks` keyword alpha-beta-CROWN
    passes (its own onnx2pytorch fork has it; PyPI's 0.6.0 does not) and ignores it when empty
    (a non-empty quirks dict is an error, as PyPI's converter cannot honour it),
  * two more differences of PyPI's onnx2pytorch 0.6.0 from alpha-beta-CROWN's fork, which the
    vit_2023 models (opset 9) need and which change no value: a pre-opset-13 Softmax over the
    last axis normalises along that axis (0.6.0 coerces to 2-D first, folding the batch into
    the rows, which auto_LiRPA's batch handling cannot take), and Shape returns
    torch._shape_as_tensor (traced as a Shape operation; 0.6.0's constant tensor bakes batch 1
    into the reshapes, and branch and bound's batches then fail).
The source tree itself is not modified.

alpha-beta-CROWN command per instance (run in <abcrown-dir>/complete_verifier):
  python bench_vs_abcrown.py --launch-abcrown --config <CONFIG> --onnx_path M --vnnlib_path S \
      --results_file OUT --timeout T --device cpu [config overrides]
  acasxu:   CONFIG = exp_configs/vnncomp21/acasxu.yaml (what its vnncomp_main.py uses for ACAS Xu)
  mnist_fc: CONFIG = exp_configs/vnncomp22/mnistfc.yaml with `--complete_verifier bab` instead of
            the config's `bab-refine` (MIP refinement needs Gurobi, which is not installed here);
            all other settings of the config are kept.
Its verdict is the first line of OUT (sat/unsat/timeout); its own time is the "Time:" line it
prints (from just before model loading to the verdict, i.e. without Python/torch start-up).

distcrown command per instance:
  distcrown verify --model M --vnnlib S --timeout T --threads 1 --quiet --result OUT --report R

Run that produced docs/vs_abcrown.csv (on one pinned core):
  taskset -c 0 python3 benchmarks/bench_vs_abcrown.py --binary /work/main/build/bin/distcrown \
      --benchmark mnist_fc --model mnist_256x2 --benchmark acasxu --timeout-cap 60 \
      --python /work/abcrown-venv/bin/python --abcrown-dir /work/abcrown-src \
      --abcrown-logs /tmp/abl_run --csv docs/vs_abcrown.csv
(--model filters mnist_fc rows only; the acasxu rows all stay.)
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIGS = {
    "acasxu": ("exp_configs/vnncomp21/acasxu.yaml", []),
    "mnist_fc": ("exp_configs/vnncomp22/mnistfc.yaml", ["--complete_verifier", "bab"]),
    # GenBaB: its VNN-COMP 2023 vit config as it stands (BBPS branching by default).
    "vit": ("exp_configs/vnncomp23/vit.yaml", []),
    # Its VNN-COMP 2021 eran config skips complete verification (alpha-CROWN with 1000
    # iterations only); `--complete_verifier bab` gives it GenBaB on what that leaves open.
    "eran_sigmoid": ("exp_configs/vnncomp21/eran_sigmoid.yaml", ["--complete_verifier", "bab"]),
}


def patch_softmax_and_shape():
    """The two onnx2pytorch 0.6.0 patches of the docstring (same values, batch kept)."""
    import torch
    import onnx2pytorch.operations.shape as shape_op
    import onnx2pytorch.operations.softmax as softmax_op

    plain = softmax_op.NormalizingOperator.forward

    def normalise(self, x):
        axis = self.dim + x.ndim if self.dim < 0 else self.dim
        if self.opset_version < 13 and axis == x.ndim - 1:
            return self.normalize(x, axis)
        return plain(self, x)

    def shape(self, x):
        rank = x.ndim
        start = self.start + rank if self.start < 0 else self.start
        start = min(max(start, 0), rank)
        end = rank if self.end is None else min(max(self.end + rank if self.end < 0
                                                    else self.end, 0), rank)
        return torch._shape_as_tensor(x)[start:end]

    softmax_op.NormalizingOperator.forward = normalise
    shape_op.Shape.forward = shape


def launch_abcrown(argv):
    """Runs complete_verifier/abcrown.py (cwd) in this process with one torch thread and a
    quirks-tolerant onnx2pytorch.ConvertModel."""
    import runpy

    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    import onnx2pytorch
    import onnx2pytorch.convert

    base = onnx2pytorch.ConvertModel

    class ConvertModel(base):  # accepts alpha-beta-CROWN's `quirks` keyword
        def __init__(self, *args, quirks=None, **kwargs):
            if quirks:
                raise ValueError(f"onnx2pytorch 0.6.0 cannot honour quirks {quirks!r}")
            super().__init__(*args, **kwargs)

    onnx2pytorch.ConvertModel = ConvertModel
    onnx2pytorch.convert.ConvertModel = ConvertModel
    patch_softmax_and_shape()
    sys.path.insert(0, os.getcwd())
    sys.argv = ["abcrown.py"] + argv
    runpy.run_path("abcrown.py", run_name="__main__")


def run_distcrown(a, model, spec, timeout):
    """(verdict, wall s, worst bound left or None, domains bounded or None)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "result.txt")
        report = os.path.join(d, "report.json")
        cmd = [a.binary, "verify", "--model", model, "--vnnlib", spec, "--timeout", str(timeout),
               "--threads", "1", "--quiet", "--result", out, "--report", report]
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 120)
            rc, err = p.returncode, p.stderr
        except subprocess.TimeoutExpired:
            rc, err = -1, "killed after timeout + 120 s"
        dt = time.monotonic() - t0
        got = "error"
        if rc == 0 and os.path.exists(out):
            with open(out) as f:
                got = f.readline().strip() or "error"
        if got == "error":
            print(f"  distcrown error rc={rc}: {err.strip()[-300:]}", file=sys.stderr)
        worst, domains = None, None
        if os.path.exists(report):
            with open(report) as f:
                rep = json.load(f)
            worst, domains = rep.get("worst_bound"), rep.get("domains_bounded")
        return got, dt, worst, domains


def run_abcrown(a, bench, model, spec, timeout):
    config, overrides = CONFIGS[bench]
    cwd = os.path.join(a.abcrown_dir, "complete_verifier")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.path.join(a.abcrown_dir, "auto_LiRPA"))
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "result.txt")
        cmd = [a.python, os.path.abspath(__file__), "--launch-abcrown", "--config", config,
               "--onnx_path", model, "--vnnlib_path", spec, "--results_file", out,
               "--timeout", str(timeout), "--device", "cpu"] + overrides
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=timeout + 180)
            rc, log = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            rc, log = -1, (e.stdout or b"").decode(errors="replace") + "\nkilled"
        dt = time.monotonic() - t0
        got = "error"
        if os.path.exists(out):
            with open(out) as f:
                got = f.readline().strip() or "error"
        own = re.findall(r"^Time: ([0-9.eE+-]+)$", log, re.M)
        # Its branch and bound prints the worst lower bound less the threshold and the domains
        # visited so far after each batch: the last of each is where it stopped.
        worst = re.findall(r"^Current \(lb-rhs\): (?:tensor\()?\[*(-?[0-9.eE+-]+|-?inf)", log, re.M)
        visited = re.findall(r"^(\d+) domains visited$", log, re.M)
        if a.abcrown_logs:
            os.makedirs(a.abcrown_logs, exist_ok=True)
            name = f"{os.path.basename(model)[:-5]}__{os.path.basename(spec)[:-7]}.log"
            with open(os.path.join(a.abcrown_logs, name), "w") as f:
                f.write(" ".join(cmd) + "\n" + log)
        if got == "error":
            print(f"  abcrown error rc={rc}: {log.strip()[-600:]}", file=sys.stderr)
        return (got, dt, (float(own[-1]) if own else None), (float(worst[-1]) if worst else None),
                (int(visited[-1]) if visited else None))


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def summary(rows):
    lines = []
    hdr = (f"{'benchmark':9s} {'model':12s} {'tool':9s} {'n':>3s} {'solved':>6s} {'sat':>4s} "
           f"{'unsat':>5s} {'t/o':>4s} {'other':>5s} {'wrong':>5s} {'med s':>6s} "
           f"{'med solved s':>12s} {'med own s':>9s}")
    lines.append(hdr)
    groups = {}
    for r in rows:
        key = (r["benchmark"], os.path.splitext(os.path.basename(r["model"]))[0])
        if key[0] == "acasxu":
            key = (key[0], "acasxu_*")
        groups.setdefault(key, []).append(r)
    for (b, m), g in sorted(groups.items()):
        for tool in ("distcrown", "abcrown"):
            res = [r[f"{tool}_result"] for r in g]
            secs = [float(r[f"{tool}_s"]) for r in g]
            solved = [s for s, x in zip(secs, res) if x in ("sat", "unsat")]
            own = [float(r["abcrown_own_s"]) for r in g
                   if tool == "abcrown" and r["abcrown_own_s"] not in ("", None)]
            n_sat, n_unsat = res.count("sat"), res.count("unsat")
            n_to = res.count("timeout")
            lines.append(
                f"{b:9s} {m:12s} {tool:9s} {len(g):3d} {n_sat + n_unsat:6d} {n_sat:4d} "
                f"{n_unsat:5d} {n_to:4d} {len(g) - n_sat - n_unsat - n_to:5d} "
                f"{sum(int(r[f'{tool}_wrong']) for r in g):5d} {median(secs):6.2f} "
                f"{median(solved):12.2f} "
                f"{(f'{median(own):9.2f}' if tool == 'abcrown' else '        -')}")
    return "\n".join(lines)


def open_instances(rows):
    """One line per instance that either tool left undecided: the gap, instance by instance."""
    lines = [f"{'model':12s} {'spec':26s} {'expected':8s} {'distcrown':9s} {'worst':>10s} "
             f"{'domains':>8s} {'abcrown':9s} {'worst':>10s} {'domains':>8s}"]
    cell = lambda v, f: "-" if v in ("", None) else format(float(v), f)
    for r in rows:
        if {r["distcrown_result"], r["abcrown_result"]} <= {"sat", "unsat"}:
            continue
        lines.append(
            f"{os.path.splitext(os.path.basename(r['model']))[0]:12s} "
            f"{os.path.splitext(os.path.basename(r['spec']))[0]:26s} {r['expected']:8s} "
            f"{r['distcrown_result']:9s} {cell(r.get('distcrown_worst'), '.4g'):>10s} "
            f"{cell(r.get('distcrown_domains'), '.0f'):>8s} {r['abcrown_result']:9s} "
            f"{cell(r.get('abcrown_worst'), '.4g'):>10s} "
            f"{cell(r.get('abcrown_domains'), '.0f'):>8s}")
    return "\n".join(lines)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--launch-abcrown":
        launch_abcrown(sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "..", "shared", "fixtures"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"),
                    help="distcrown binary (the run used /work/main/build/bin/distcrown)")
    ap.add_argument("--benchmark", action="append", help="benchmark name(s) (default: all)")
    ap.add_argument("--instances",
                    help="a list of instances instead of the fixtures' (bench_vnncomp.py's "
                         "columns, paths relative to the list's folder; benchmark: a CONFIGS key)")
    ap.add_argument("--model", action="append",
                    help="only mnist_fc models whose file name contains this")
    ap.add_argument("--spec", action="append", help="only specs whose file name contains this")
    ap.add_argument("--timeout-cap", type=float, default=0, help="cap every timeout at this many s")
    ap.add_argument("--limit", type=int, default=0, help="first N selected instances per benchmark")
    ap.add_argument("--abcrown-dir", default="/work/abcrown-src")
    ap.add_argument("--python", default="/work/abcrown-venv/bin/python")
    ap.add_argument("--abcrown-logs", help="keep alpha-beta-CROWN's output per instance here")
    ap.add_argument("--csv", help="write per-instance rows here")
    ap.add_argument("--append", action="store_true", help="append to --csv instead of writing it")
    ap.add_argument("--skip-distcrown", action="store_true",
                    help="run alpha-beta-CROWN only (distcrown's columns say 'skipped')")
    ap.add_argument("--abcrown-from", action="append", default=[],
                    help="take alpha-beta-CROWN's result of each instance from this earlier --csv "
                         "instead of running it (instances it lacks are run)")
    a = ap.parse_args()
    earlier = {}
    for path in a.abcrown_from:
        with open(path) as f:
            for e in csv.DictReader(f):
                if e["abcrown_result"] != "skipped":
                    earlier[(e["model"], e["spec"], float(e["timeout_s"]))] = e
    expected = a.instances or os.path.join(a.fixtures, "expected", "vnncomp_results.csv")
    base = os.path.dirname(os.path.abspath(a.instances)) if a.instances else a.fixtures
    with open(expected) as f:
        rows = list(csv.DictReader(f))
    rows = [r for r in rows if r["benchmark"] in CONFIGS]
    if a.benchmark:
        rows = [r for r in rows if r["benchmark"] in a.benchmark]
    if a.model:  # the model filter applies to mnist_fc only (acasxu rows stay)
        rows = [r for r in rows
                if r["benchmark"] != "mnist_fc" or any(m in r["model"] for m in a.model)]
    if a.spec:
        rows = [r for r in rows if any(s in r["spec"] for s in a.spec)]
    if a.limit > 0:
        per = {}
        rows = [r for r in rows if per.setdefault(r["benchmark"], []).append(r) or
                len(per[r["benchmark"]]) <= a.limit]
    out_rows = []
    if a.append and a.csv and os.path.exists(a.csv):
        with open(a.csv) as f:
            out_rows = list(csv.DictReader(f))
    fields = ["benchmark", "model", "spec", "timeout_s", "expected", "distcrown_result",
              "distcrown_s", "abcrown_result", "abcrown_s", "abcrown_own_s", "distcrown_wrong",
              "abcrown_wrong", "distcrown_worst", "distcrown_domains", "abcrown_worst",
              "abcrown_domains"]
    for r in rows:
        timeout = float(r["timeout_s"])
        if a.timeout_cap > 0:
            timeout = min(timeout, a.timeout_cap)
        model = os.path.abspath(os.path.join(base, r["model"]))
        spec = os.path.abspath(os.path.join(base, r["spec"]))
        d_got, d_s, d_worst, d_domains = (("skipped", 0.0, None, None) if a.skip_distcrown else
                                          run_distcrown(a, model, spec, timeout))
        e = earlier.get((r["model"], r["spec"], timeout))
        if e is not None:
            b_got, b_s = e["abcrown_result"], float(e["abcrown_s"])
            b_own = float(e["abcrown_own_s"]) if e["abcrown_own_s"] else None
            b_worst, b_domains = e.get("abcrown_worst") or None, e.get("abcrown_domains") or None
        else:
            b_got, b_s, b_own, b_worst, b_domains = run_abcrown(a, r["benchmark"], model, spec,
                                                                timeout)
        exp = r["expected"]
        wrong = lambda g: int((g == "sat" and exp == "unsat") or (g == "unsat" and exp == "sat"))
        row = dict(benchmark=r["benchmark"], model=r["model"], spec=r["spec"], timeout_s=timeout,
                   expected=exp, distcrown_result=d_got, distcrown_s=round(d_s, 2),
                   abcrown_result=b_got, abcrown_s=round(b_s, 2),
                   abcrown_own_s="" if b_own is None else round(b_own, 2),
                   distcrown_wrong=wrong(d_got), abcrown_wrong=wrong(b_got),
                   distcrown_worst="" if d_worst is None else d_worst,
                   distcrown_domains="" if d_domains is None else d_domains,
                   abcrown_worst="" if b_worst is None else b_worst,
                   abcrown_domains="" if b_domains is None else b_domains)
        out_rows.append(row)
        print(f"{r['benchmark']:8s} {os.path.basename(model):18s} {os.path.basename(spec):26s} "
              f"T={timeout:<5g} exp {exp:7s} | distcrown {d_got:7s} {d_s:6.2f} s | abcrown "
              f"{b_got:7s} {b_s:6.2f} s (own {b_own if b_own is not None else '-'})"
              f"{'  DISAGREE' if {d_got, b_got} == {'sat', 'unsat'} else ''}"
              f"{'  WRONG' if row['distcrown_wrong'] or row['abcrown_wrong'] else ''}",
              flush=True)
        if a.csv:  # rewrite after each instance so that a cut-short run keeps what it measured
            with open(a.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=fields)
                w.writeheader()
                w.writerows(out_rows)
    print()
    print(summary(out_rows))
    print("med s: median wall time over all instances (timeouts count at their wall time); "
          "med solved s: over solved ones; med own s: alpha-beta-CROWN's own 'Time:' "
          "(without its ~start-up).")
    print()
    print("Instances either tool left undecided (worst: the worst lower bound of the property's "
          "margin left in branch and bound; domains: bounded by distcrown, visited by "
          "alpha-beta-CROWN; '-' where it did not branch):")
    print(open_instances(out_rows))
    return 1 if any(int(r["distcrown_wrong"]) or int(r["abcrown_wrong"]) for r in out_rows) else 0


if __name__ == "__main__":
    sys.exit(main())
