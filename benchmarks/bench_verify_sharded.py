#!/usr/bin/env python3
"""`verify` to its answer under sharding (issue 14's showcase): one model and property, run to the
end (no round limit) at several (ranks P, domain groups G, sharding) layouts, one at a time.
Prints per layout the verdict, the wall time the report gives, how the answer was reached, the
weights each rank holds between uses (FSDP: ~÷ P), and the largest per-rank peaks: resident
memory (LibTorch alone is ~380 MB a process) and tensors (the memory accountant).

  V=~/.cache/distcrown/venv-torch-2.11.0/bin/python
  $V scripts/make_resnet_large.py --out-dir /tmp/rl
  python3 benchmarks/bench_verify_sharded.py --model /tmp/rl/resnet_large_shaped.onnx \\
      --spec /tmp/rl/resnet_large_shaped_prop.vnnlib --layouts 1,1,none 2,1,fsdp 4,1,fsdp

Exit status 1 when a layout's verdict differs from the first layout's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench_bab_parallel import parse_layout  # P,G,shard[,spec], the same layouts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, layout):
    ranks, groups, shard, spec = parse_layout(layout)
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [args.binary, "verify", "--model", args.model, "--vnnlib", args.spec, "--timeout",
               str(args.timeout), "--domain-groups", groups, "--shard", shard, "--report",
               report] + (["--spec-parallel"] if spec else []) + args.extra
        if ranks != "1":
            cmd = ["mpirun", "--oversubscribe", "-np", ranks] + cmd
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"layout {layout}: exit status {done.returncode}")
        # The last line on stderr: "verify: <result> in <s> s (<how>; ...)".
        summary = [line for line in done.stderr.splitlines() if line.startswith("verify: ")]
        with open(report) as f:
            return json.load(f), (summary[-1] if summary else "")


def how(summary):
    """The detail in verify's last line: 'verify: unsat in 51.5 s (HOW; N domains ...)'."""
    start = summary.find("(")
    return summary[start + 1:].split(";")[0] if start >= 0 else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--layouts", nargs="+", default=["1,1,none", "2,1,fsdp", "4,1,fsdp"],
                    help="P,G,shard[,spec] ...")
    ap.add_argument("extra", nargs="*", help="more verify options, after --")
    args = ap.parse_args()

    print(f"model {os.path.basename(args.model)}, spec {os.path.basename(args.spec)}, "
          f"--timeout {args.timeout:g} {' '.join(args.extra)}")
    print(f"{'P':>2} {'G':>2} {'shard':>10} {'result':>8} {'time s':>7} {'domains':>8} "
          f"{'weights MB/rank':>15} {'RSS MB':>7} {'tensor MB':>9}  how")
    first = None
    for layout in args.layouts:
        r, summary = run(args, layout)
        first = first or r
        ranks, groups, shard, spec = parse_layout(layout)
        shard = shard + "+spec" if spec else shard
        weights = max(x.get("param_bytes", 0) for x in r["memory"]["ranks"]) / 1e6
        print(f"{ranks:>2} {groups:>2} {shard:>10} {r['result']:>8} {r['time_s']:>7.1f} "
              f"{r['domains_bounded']:>8} {weights:>15.2f} {r['memory']['peak_bytes'] / 1e6:>7.0f} "
              f"{r['memory']['peak_tensor_bytes'] / 1e6:>9.1f}  {how(summary)}", flush=True)
        if r["result"] != first["result"]:
            print(f"error: {layout} answered {r['result']}, the first layout {first['result']}",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
