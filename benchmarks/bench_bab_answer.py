#!/usr/bin/env python3
"""Time to an answer at several domain-group layouts (issue 45): `distcrown verify` at its
defaults (no --deterministic) on whole instances, at P ranks of one domain group each with the
round's batch over the world or per group (--bab-batch-scope), the layouts in turn, run after run,
so that this VM's drift hits them alike. Prints, per instance and layout, the verdict, the median
seconds to it (the report's time_s, since the process started) and of branch and bound, the
domains bounded, and the speed-up over one process.

  python3 benchmarks/bench_bab_answer.py [--specs mnist_prop_7_0.03.vnnlib ...] [--repeat 3]
      [--layouts 1,world 2,world 2,group] [--timeout 60]

Needs ../shared/fixtures (exits with a message without).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(args, spec, ranks, scope):
    """One verify at `ranks` groups of one rank, `scope` batch: its report."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [args.binary, "verify", "--model", args.model, "--vnnlib",
               os.path.join(FIXTURES, "specs", spec), "--timeout", str(args.timeout), "--quiet",
               "--domain-groups", str(ranks), "--bab-batch-scope", scope, "--report", report]
        if ranks > 1:
            cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
        done = subprocess.run(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        # A timeout answered by verify's watchdog (a step outlasted the deadline: unwinding a
        # large queue) ends the ranks without MPI_Finalize, so mpirun exits 1; the report is
        # written first, and says `timeout`.
        if done.returncode != 0 and not os.path.exists(report):
            sys.exit(f"verify failed ({spec}, P={ranks}, {scope}): "
                     f"{done.stderr.strip().splitlines()[-1:]}")
        with open(report) as f:
            j = json.load(f)
        if done.returncode != 0 and j["result"] != "timeout":
            sys.exit(f"verify failed ({spec}, P={ranks}, {scope}): exit {done.returncode}")
        return j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"))
    ap.add_argument("--model", default=os.path.join(FIXTURES, "models", "mnist_256x6.onnx"))
    ap.add_argument("--specs", nargs="+", default=["mnist_prop_7_0.03.vnnlib"])
    ap.add_argument("--layouts", nargs="+", default=["1,world", "2,world", "2,group"],
                    help="P,scope ...")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    if not os.path.isdir(FIXTURES):
        sys.exit(f"needs the fixtures at {FIXTURES}")
    layouts = [(int(p), scope) for p, scope in (l.split(",") for l in args.layouts)]
    print(f"model {os.path.basename(args.model)}, verify at its defaults, --timeout "
          f"{args.timeout:g}, medians of {args.repeat} runs, layouts in turn")
    print(f"{'spec':>26} {'P':>2} {'scope':>5} {'result':>8} {'time s':>7} {'bab s':>7} "
          f"{'domains':>9} {'speed-up':>8}")
    for spec in args.specs:
        runs = {l: [] for l in layouts}
        for _ in range(args.repeat):
            for ranks, scope in layouts:
                runs[(ranks, scope)].append(run(args, spec, ranks, scope))
        first = None
        for layout, reports in runs.items():
            t = statistics.median(r["time_s"] for r in reports)
            bab = statistics.median(r["bab_time_s"] for r in reports)
            dom = statistics.median(r["domains_bounded"] for r in reports)
            results = "/".join(sorted({r["result"] for r in reports}))
            first = first or t
            print(f"{spec:>26} {layout[0]:>2} {layout[1]:>5} {results:>8} {t:>7.2f} {bab:>7.2f} "
                  f"{dom:>9.0f} {first / t:>7.2f}x")


if __name__ == "__main__":
    main()
