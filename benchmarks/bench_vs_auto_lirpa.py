#!/usr/bin/env python3
"""CROWN and alpha-CROWN times of distcrown and auto_LiRPA on this CPU, side by side (issue 13).

For each fixture reference case chosen (`../shared/fixtures/refs/<case>.json`) and each method,
this runs `build/bin/bench_bounds --case <case> --threads 1` (in-process calls) and then, in this
process, auto_LiRPA with the reference's settings (bfb7997, float32, CPU, one torch thread, a
fresh BoundedModule per call, C = identity; alpha-CROWN 20 iterations, lr 0.5, see the fixtures
README), and prints both medians (of --repeat calls for CROWN, --alpha-repeat for alpha-CROWN)
and their ratio; the two sides take turns --rounds times, and the table gives the median of each
side's round medians. auto_LiRPA's bounds are checked against the reference's (the same setup
reproduces them bit for bit), so both sides compute the same thing.

The ONNX graph is run by a small op-by-op torch module (Conv, Relu, Flatten, Gemm, Add, MatMul;
weights copied unchanged), which is what the references used too.

Set-up (Debian's python3-torch 1.13.1, the version the references were made with):
    apt-get install python3-torch python3-onnx python3-yaml python3-tqdm python3-appdirs \
        python3-packaging
(python3-torch brings Debian's libtorch-dev, whose libtorch.so LibTorch 2.11's CMake config would
pick up: a new configure of this project then stops with an error saying so. Build first, or
`apt-get remove libtorch-dev libtorch1.13 python3-torch` afterwards.)
    git -C /work/.mirror/Verified-Intelligence+auto_LiRPA/repo archive \
        bfb7997115c5e66327de81b43c42b23c8a0ffb1e auto_LiRPA | tar -x -C /tmp/alirpa
    PYTHONPATH=/tmp/alirpa /usr/bin/python3 benchmarks/bench_vs_auto_lirpa.py \
        --case oval21_base_img2578 --case oval21_base_img8194 [--random-seed 0 ...]

`--random-seed S` adds, per case, the same network with seeded random weights (He-normal, the
same shapes; the issue's "random CNNs of the same shapes") on the case's input box: auto_LiRPA
runs first and its bounds are what bench_bounds' deviation column is taken against.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class OnnxNet(torch.nn.Module):
    """The ONNX graph's nodes run in order on torch tensors (the fixtures' CNNs and MLPs)."""

    def __init__(self, model):
        super().__init__()
        self.nodes = list(model.graph.node)
        self.input_name = model.graph.input[0].name
        self.output_name = model.graph.output[0].name
        self.params = torch.nn.ParameterDict()
        self.names = {}
        for i, init in enumerate(model.graph.initializer):
            key = "p%d" % i
            self.names[init.name] = key
            value = torch.from_numpy(onnx.numpy_helper.to_array(init).astype(np.float32).copy())
            self.params[key] = torch.nn.Parameter(value, requires_grad=False)

    def forward(self, x):
        env = {self.input_name: x}

        def get(name):
            return env[name] if name in env else self.params[self.names[name]]

        for n in self.nodes:
            a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
            ins = [get(i) for i in n.input if i]
            op = n.op_type
            if op == "Conv":
                pads = a.get("pads", [0, 0, 0, 0])
                assert pads[0] == pads[2] and pads[1] == pads[3], "asymmetric padding"
                y = F.conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None,
                             stride=a.get("strides", [1, 1]), padding=pads[:2],
                             dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))
            elif op == "Relu":
                y = F.relu(ins[0])
            elif op == "Flatten":
                y = torch.flatten(ins[0], a.get("axis", 1))
            elif op == "Gemm":
                assert a.get("transB", 0) == 1 and a.get("transA", 0) == 0
                y = F.linear(ins[0], ins[1] * a.get("alpha", 1.0),
                             ins[2] * a.get("beta", 1.0) if len(ins) > 2 else None)
            elif op == "MatMul":
                y = ins[0].matmul(ins[1])
            elif op == "Add":
                y = ins[0] + ins[1]
            else:
                raise SystemExit("%s: op %s is not converted by this script" % (n.name, op))
            env[n.output[0]] = y
        return env[self.output_name]


def time_auto_lirpa(ref, fixtures, method, repeat):
    """Median seconds of `repeat` compute_bounds calls, and the last call's bounds (flat lists)."""
    from auto_LiRPA import BoundedModule, BoundedTensor
    from auto_LiRPA.perturbations import PerturbationLpNorm

    net = OnnxNet(onnx.load(os.path.join(fixtures, ref["model"])))
    shape = ref["input_shape"]
    lo = torch.tensor(ref["input_lower"], dtype=torch.float32).reshape(shape)
    hi = torch.tensor(ref["input_upper"], dtype=torch.float32).reshape(shape)
    opts = {"optimize_bound_args": {"iteration": 20, "lr_alpha": 0.5}} if method == "alpha_crown" else {}
    auto_method = "CROWN-Optimized" if method == "alpha_crown" else "CROWN"
    times, bounds = [], None
    for _ in range(repeat):
        model = BoundedModule(net, torch.zeros(shape), bound_opts=opts, verbose=0)
        x = BoundedTensor((lo + hi) / 2, PerturbationLpNorm(norm=np.inf, x_L=lo, x_U=hi))
        start = time.perf_counter()
        lb, ub = model.compute_bounds(x=(x,), method=auto_method, bound_lower=True, bound_upper=True)
        times.append(time.perf_counter() - start)
        bounds = {"lower": [float(v) for v in lb.detach().reshape(-1)],
                  "upper": [float(v) for v in ub.detach().reshape(-1)]}
    return statistics.median(times), bounds


def relative_deviation(got, want):
    dev = 0.0
    for key in ("lower", "upper"):
        g = np.asarray(got[key], dtype=np.float64)
        w = np.asarray(want[key], dtype=np.float64)
        dev = max(dev, float((np.abs(g - w) / np.maximum(np.abs(w), 1e-5)).max()))
    return dev


def bench_rows(bench, fixtures, case, alpha, repeat, extra=()):
    """bench_bounds' fixture-table rows for the case, one thread: {method: the row's cells (case,
    method, median s, auto_LiRPA s, speedup, max rel. dev., peak MB)}; `extra` more options."""
    cmd = [bench, "--fixtures", fixtures, "--only", "fixtures", "--case", case, "--repeat",
           str(repeat), "--threads", "1"] + (["--alpha"] if alpha else []) + list(extra)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 7 and cells[0] == case and re.match(r"^[0-9.]+$", cells[2]):
            rows[cells[1]] = cells
    if not rows:
        raise SystemExit("bench_bounds printed no row for %s:\n%s" % (case, out))
    return rows


def time_distcrown(bench, fixtures, case, alpha, repeat):
    """bench_bounds' rows for the case: {method: (median s, its 'max rel. dev.' column)}."""
    return {m: (float(c[2]), c[5]) for m, c in bench_rows(bench, fixtures, case, alpha,
                                                          repeat).items()}


def case_arguments(p):
    """The options both this script and bench_patches_memory.py take: where the fixtures and
    bench_bounds are, the cases, and the random-weight seeds."""
    p.add_argument("--fixtures", default=os.path.join(ROOT, "..", "shared", "fixtures"))
    p.add_argument("--bench", default=os.path.join(ROOT, "build", "bin", "bench_bounds"))
    p.add_argument("--case", action="append", required=True, help="a refs/ case (repeatable)")
    p.add_argument("--random-seed", type=int, action="append", default=[],
                   help="also each case's network with random weights from this seed")


def alternate(rounds, run_ours, run_theirs):
    """Both sides `rounds` times in turn (this VM's speed drifts with its neighbours' load): the
    median of each side's per-round medians, auto_LiRPA's bounds and our deviation column."""
    ours, theirs = [], []
    bounds, dev = None, None
    for _ in range(rounds):
        t, dev = run_ours()
        ours.append(t)
        t, bounds = run_theirs()
        theirs.append(t)
    return statistics.median(ours), statistics.median(theirs), bounds, dev


def random_case(ref, fixtures, seed, folder):
    """The case's network with seeded He-normal weights of the same shapes (biases N(0, 0.01²)),
    written under folder/models, and a copy of its JSON (same input box) pointing at it."""
    model = onnx.load(os.path.join(fixtures, ref["model"]))
    rng = np.random.RandomState(seed)
    for init in model.graph.initializer:
        dims = list(init.dims)
        if len(dims) >= 2:
            fan_in = int(np.prod(dims[1:]))
            value = rng.normal(0.0, np.sqrt(2.0 / fan_in), size=dims)
        else:
            value = rng.normal(0.0, 0.01, size=dims)
        init.CopyFrom(onnx.numpy_helper.from_array(value.astype(np.float32), init.name))
    name = "%s_random%d" % (ref["case"], seed)
    os.makedirs(os.path.join(folder, "models"), exist_ok=True)
    os.makedirs(os.path.join(folder, "refs"), exist_ok=True)
    onnx.save(model, os.path.join(folder, "models", name + ".onnx"))
    out = {k: ref[k] for k in ("input_shape", "input_lower", "input_upper")}
    out.update({"case": name, "model": "models/%s.onnx" % name, "timing_s": {}})
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    case_arguments(p)
    p.add_argument("--repeat", type=int, default=30, help="CROWN calls per side (median)")
    p.add_argument("--alpha-repeat", type=int, default=3, help="alpha-CROWN calls per side")
    p.add_argument("--no-alpha", action="store_true", help="CROWN only")
    p.add_argument("--rounds", type=int, default=3,
                   help="times each side runs, in turn (medians of the rounds' medians)")
    args = p.parse_args()
    torch.set_num_threads(1)
    methods = ["crown"] + ([] if args.no_alpha else ["alpha_crown"])
    print("| case | method | distcrown s | auto_LiRPA here s | ratio | auto_LiRPA recorded s | "
          "agreement |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for case in args.case:
            with open(os.path.join(args.fixtures, "refs", case + ".json")) as f:
                ref = json.load(f)
            # Fixture rows: auto_LiRPA here against the reference's bounds ("= ref": bit for bit).
            for m in methods:
                repeat = args.alpha_repeat if m == "alpha_crown" else args.repeat
                ours, theirs, bounds, _ = alternate(
                    args.rounds, lambda: time_distcrown(args.bench, args.fixtures, case,
                                                        m == "alpha_crown", repeat)[m],
                    lambda: time_auto_lirpa(ref, args.fixtures, m, repeat))
                dev = relative_deviation(bounds, ref[m])
                print("| %s | %s | %.4f | %.4f | %.2fx | %.4f | %s |" %
                      (case, m, ours, theirs, ours / theirs, ref["timing_s"][m]["compute_bounds_s"],
                       "= ref" if dev == 0 else "auto_LiRPA %.1e from ref" % dev))
                sys.stdout.flush()
            # Random rows: auto_LiRPA's bounds become the JSON bench_bounds compares with, so its
            # 'max rel. dev.' column is ours against auto_LiRPA's (alpha-CROWN: how much looser).
            for seed in args.random_seed:
                rand = random_case(ref, args.fixtures, seed, folder)
                for m in methods:
                    repeat = args.alpha_repeat if m == "alpha_crown" else args.repeat
                    rand[m] = time_auto_lirpa(rand, folder, m, 1)[1]  # bounds to compare with
                    rand["timing_s"][m] = {"compute_bounds_s": 0.0}
                    with open(os.path.join(folder, "refs", rand["case"] + ".json"), "w") as f:
                        json.dump(rand, f)
                    ours, theirs, _, dev = alternate(
                        args.rounds, lambda: time_distcrown(args.bench, folder, rand["case"],
                                                            m == "alpha_crown", repeat)[m],
                        lambda: time_auto_lirpa(rand, folder, m, repeat))
                    print("| %s | %s | %.4f | %.4f | %.2fx | - | ours %s from auto_LiRPA |" %
                          (rand["case"], m, ours, theirs, ours / theirs, dev))
                    sys.stdout.flush()


if __name__ == "__main__":
    main()
