#!/usr/bin/env python3
"""Peak tensor memory of CROWN and alpha-CROWN with dense A and with patches A (issue 13).

For each fixture reference case chosen (`../shared/fixtures/refs/<case>.json`), and for the same
network with seeded random weights of the same shapes (`--random-seed S`, He-normal, made as
bench_vs_auto_lirpa.py makes them; the issue's "random CNNs of the same shapes"), this runs
`build/bin/bench_bounds --case <case> --threads 1 --repeat 1` with `--conv-mode matrix` (the dense
path, what the issue calls "today's") and with `--conv-mode patches` (the default), and prints
each method's peak tensor bytes (the counting allocator's, which does not depend on the machine's
load) and their ratio. The patches run also reports its time; read the times of
bench_vs_auto_lirpa.py for speed, this script's are one call each.

Runs with the project's venv (numpy, onnx):
    ~/.cache/distcrown/venv-torch-2.11.0/bin/python benchmarks/bench_patches_memory.py \
        --case cifar10_resnet_2b_prop_0 --case oval21_base_img2578 --random-seed 0 [--alpha]
"""

import argparse
import json
import os
import tempfile

from bench_vs_auto_lirpa import bench_rows, case_arguments, random_case


def peaks(bench, fixtures, case, mode, alpha):
    """{method: (median s, peak MB)} from one bench_bounds run in `mode`."""
    rows = bench_rows(bench, fixtures, case, alpha, 1, ["--conv-mode", mode])
    return {m: (float(c[2]), float(c[6])) for m, c in rows.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    case_arguments(p)
    p.add_argument("--alpha", action="store_true", help="alpha-CROWN rows too")
    args = p.parse_args()
    methods = ["crown"] + (["alpha_crown"] if args.alpha else [])
    print("| case | method | dense peak MB | patches peak MB | ratio | patches s |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for case in args.case:
            with open(os.path.join(args.fixtures, "refs", case + ".json")) as f:
                ref = json.load(f)
            runs = [(case, args.fixtures)]
            for seed in args.random_seed:
                rand = random_case(ref, args.fixtures, seed, folder)  # no bounds: none compared
                with open(os.path.join(folder, "refs", rand["case"] + ".json"), "w") as f:
                    json.dump(rand, f)
                runs.append((rand["case"], folder))
            for name, where in runs:
                dense = peaks(args.bench, where, name, "matrix", args.alpha)
                patches = peaks(args.bench, where, name, "patches", args.alpha)
                for m in methods:
                    print("| %s | %s | %.1f | %.1f | %.2fx | %.3f |" %
                          (name, m, dense[m][1], patches[m][1], patches[m][1] / dense[m][1],
                           patches[m][0]))


if __name__ == "__main__":
    main()
