#!/usr/bin/env python3
"""alpha-CROWN (`distcrown bounds --method alpha-crown`, 20 iterations, lr 0.5, the reference's
intermediate scheme: `--intermediate every` where it had sparse intermediate bounds off) against the
auto_LiRPA references in ../shared/fixtures/refs: per case, how many bounds are looser than the
reference's alpha_crown by more than 1e-3·|ref|, the worst relative and absolute looseness, whether
any bound is looser than the reference's CROWN, and soundness against the sampled outputs.

  python3 scripts/alpha_vs_refs.py [--all]     # --all adds the cifar10 ResNet cases
  python3 scripts/alpha_vs_refs.py --ops NAME  # only the case refs/ops/NAME.json (beyond ReLU)
  python3 scripts/alpha_vs_refs.py ... -- ARGS  # ARGS go to every `distcrown bounds`
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F = os.path.join(ROOT, "..", "shared", "fixtures")
BIN = os.path.join(ROOT, "build", "bin", "distcrown")


def main():
    extra = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
    if not os.path.isdir(F):
        print(f"fixtures not found at {F}", file=sys.stderr)
        return 2
    print("| case | time s | looser than ref by >1e-3·|ref| | worst rel. looser | worst abs. looser "
          "| tighter than ref | looser than CROWN | unsound |")
    print("|---|---|---|---|---|---|---|---|")
    bad = 0
    files = sorted(glob.glob(os.path.join(F, "refs", "*.json")))
    if "--ops" in sys.argv:
        files = [os.path.join(F, "refs", "ops", sys.argv[sys.argv.index("--ops") + 1] + ".json")]
    for rf in files:
        if "resnet" in rf and "--all" not in sys.argv:
            continue
        r = json.load(open(rf))
        # The reference's own intermediate scheme: auto_LiRPA's sparse default (ours: auto), or
        # every neuron where the case turned it off (the ViT refs).
        opts = r.get("bound_opts", {}).get("effective_bound_opts_alpha_crown", {})
        scheme = [] if opts.get("sparse_intermediate_bounds", True) else ["--intermediate", "every"]
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            p = subprocess.run([BIN, "bounds", "--model", os.path.join(F, r["model"]), "--vnnlib",
                                os.path.join(F, r["spec"]), "--method", "alpha-crown", "--result",
                                out.name] + scheme + extra, capture_output=True, text=True)
            if p.returncode:
                print(p.stderr, file=sys.stderr)
                return 1
            a = json.load(open(out.name))
        n = looser = tighter = vs_crown = unsound = 0
        worst_rel = worst_abs = 0.0
        for key, sign in (("lower", 1), ("upper", -1)):
            for o, f, c, lo, hi in zip(a[key], r["alpha_crown"][key], r["crown"][key],
                                       r["sampled"]["min"], r["sampled"]["max"]):
                n += 1
                loose = (f - o) * sign  # > 0: ours is looser than the reference
                worst_abs = max(worst_abs, loose)
                worst_rel = max(worst_rel, loose / max(abs(f), 1e-12))
                looser += loose > 1e-3 * abs(f)
                tighter += loose < 0
                vs_crown += (o - c) * sign < -1e-6 * max(1, abs(c))
                if key == "lower":
                    unsound += o > lo + 1e-5 * max(1, abs(lo))
                else:
                    unsound += o < hi - 1e-5 * max(1, abs(hi))
        bad += vs_crown + unsound
        name = os.path.basename(rf)[:-5]
        print(f"| {name} | {a['time_s']:.2f} | {looser}/{n} | {worst_rel:.1e} | {worst_abs:.2g} "
              f"| {tighter}/{n} | {vs_crown} | {unsound} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
