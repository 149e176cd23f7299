#!/usr/bin/env python3
"""auto_LiRPA reference bounds for small networks around GELU, Sin, Cos and LayerNormalization.

Writes one JSON per case into tests/data/op_refs/ (issue 12). Each case is a tiny seeded network
described in ONNX terms inside the JSON (`network`: nodes, initializers with their float32
values), so that the C++ test (tests/test_op_refs.cpp) builds the same ONNX graph with
tests/onnx_builder.hpp and no .onnx file is stored. This script turns the same description into a
torch module, bounds it with auto_LiRPA (IBP, CROWN, alpha-CROWN with the settings of the refs in
../shared/fixtures/refs: defaults, alpha-CROWN 20 iterations and lr_alpha 0.5, float32, CPU, one
torch thread, a fresh BoundedModule per method, C = identity), and samples the outputs in the box
with an independent float64 numpy evaluation of the description (soundness oracle).

How auto_LiRPA sees each operator (commit bfb7997):
  Gelu                torch has no ONNX Gelu before opset 20 and auto_LiRPA has no Erf, so the
                      torch module calls auto_LiRPA's own GELU (operators/gelu.py: GELUOp, traced
                      as custom::Gelu, bounded by BoundGelu: GELU relaxed as one function).
  Sin, Cos            torch.sin / torch.cos: BoundSin / BoundCos (operators/trigonometric.py).
  LayerNormalization  auto_LiRPA does not take aten::layer_norm (the tracer keeps F.layer_norm as
                      it is), so the module writes out the nodes torch.onnx exports for it before
                      opset 17: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul, Add
                      (auto_LiRPA bounds Div as Mul(Reciprocal)); distcrown lowers
                      LayerNormalization into the same steps (src/ops/layernorm.cpp).

Usage (Debian's python3-torch 1.13.1, the snapshot's auto_LiRPA/ folder on PYTHONPATH; another
auto_LiRPA names its commit in $AUTO_LIRPA_COMMIT, which the JSON records):
    git -C /work/.mirror/Verified-Intelligence+auto_LiRPA/repo archive \
        bfb7997115c5e66327de81b43c42b23c8a0ffb1e auto_LiRPA | tar -x -C /tmp/alirpa
    PYTHONPATH=/tmp/alirpa /usr/bin/python3 scripts/make_op_refs.py --out tests/data/op_refs [--only CASE]
"""

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

AUTO_LIRPA_COMMIT = "bfb7997115c5e66327de81b43c42b23c8a0ffb1e"
ALPHA_ITERATIONS = 20
LR_ALPHA = 0.5
N_UNIFORM = 4096
N_VERTICES = 1024


# ---------------------------------------------------------------------------------------------
# Cases: a network description (ONNX nodes + float32 initializers) and an input box.
# ---------------------------------------------------------------------------------------------

def f32(a):
    return np.asarray(a, dtype=np.float32)


def mlp_case(name, op, seed, radius, centre_scale=1.0, n_in=8, n_hidden=16, n_out=4,
             w_scale=0.5, attrs=None):
    """x [1, n_in] -> Gemm -> op -> Gemm -> y [1, n_out] (Gemm with transB = 1)."""
    rng = np.random.RandomState(seed)
    w1 = f32(rng.randn(n_hidden, n_in) * w_scale)
    b1 = f32(rng.randn(n_hidden) * 0.5)
    w2 = f32(rng.randn(n_out, n_hidden) / math.sqrt(n_hidden))
    b2 = f32(rng.randn(n_out) * 0.1)
    centre = f32(rng.randn(n_in) * centre_scale)
    nodes = [
        {"name": "fc1", "op": "Gemm", "inputs": ["x", "W1", "b1"], "outputs": ["h"],
         "attrs": {"transB": 1}},
        {"name": "act", "op": op, "inputs": ["h"], "outputs": ["a"], "attrs": attrs or {}},
        {"name": "fc2", "op": "Gemm", "inputs": ["a", "W2", "b2"], "outputs": ["y"],
         "attrs": {"transB": 1}},
    ]
    inits = {"W1": w1, "b1": b1, "W2": w2, "b2": b2}
    return name, [1, n_in], nodes, inits, centre, radius, seed


def layernorm_case(name, seed, radius, tokens=4, d=8, n_out=4):
    """x [1, tokens, d] -> MatMul d->d + Add -> LayerNormalization(axis -1, scale, bias)
    -> MatMul d->n_out + Add -> Flatten -> y [1, tokens * n_out]."""
    rng = np.random.RandomState(seed)
    w1 = f32(rng.randn(d, d) / math.sqrt(d))
    b1 = f32(rng.randn(d) * 0.5)
    gamma = f32(1.0 + 0.3 * rng.randn(d))
    beta = f32(0.2 * rng.randn(d))
    w2 = f32(rng.randn(d, n_out) / math.sqrt(d))
    b2 = f32(rng.randn(n_out) * 0.1)
    centre = f32(rng.randn(tokens * d))
    nodes = [
        {"name": "proj", "op": "MatMul", "inputs": ["x", "W1"], "outputs": ["p"], "attrs": {}},
        {"name": "proj_bias", "op": "Add", "inputs": ["p", "b1"], "outputs": ["h"], "attrs": {}},
        {"name": "ln", "op": "LayerNormalization", "inputs": ["h", "gamma", "beta"],
         "outputs": ["n"], "attrs": {"axis": -1, "epsilon": 1e-5}},
        {"name": "head", "op": "MatMul", "inputs": ["n", "W2"], "outputs": ["q"], "attrs": {}},
        {"name": "head_bias", "op": "Add", "inputs": ["q", "b2"], "outputs": ["o"], "attrs": {}},
        # auto_LiRPA's alpha-CROWN fails on a [1, tokens, n_out] output (a size mismatch in
        # BoundMul's alpha); the flattened output [1, tokens * n_out] bounds the same values.
        {"name": "flat", "op": "Flatten", "inputs": ["o"], "outputs": ["y"], "attrs": {"axis": 1}},
    ]
    inits = {"W1": w1, "b1": b1, "gamma": gamma, "beta": beta, "W2": w2, "b2": b2}
    return name, [1, tokens, d], nodes, inits, centre, radius, seed


def conv_transpose_case(name, seed, radius, c_in=2, c_out=3, side=4, n_out=4):
    """x [1, c_in, side, side] -> ConvTranspose 4x4 stride 2 pads 1 -> Relu -> Flatten -> Gemm ->
    y [1, n_out] (a cGAN generator's upsampling step; auto_LiRPA's BoundConvTranspose takes no
    output_padding)."""
    rng = np.random.RandomState(seed)
    out_side = 2 * side
    w = f32(rng.randn(c_in, c_out, 4, 4) * 0.3)
    b = f32(rng.randn(c_out) * 0.2)
    w2 = f32(rng.randn(n_out, c_out * out_side * out_side) * 0.1)
    b2 = f32(rng.randn(n_out) * 0.2)
    centre = f32(rng.randn(1, c_in, side, side))
    up = {"strides": [2, 2], "pads": [1, 1, 1, 1]}
    nodes = [
        {"name": "up", "op": "ConvTranspose", "inputs": ["x", "W", "B"], "outputs": ["u"],
         "attrs": up},
        {"name": "act", "op": "Relu", "inputs": ["u"], "outputs": ["a"], "attrs": {}},
        {"name": "flat", "op": "Flatten", "inputs": ["a"], "outputs": ["f"], "attrs": {}},
        {"name": "fc", "op": "Gemm", "inputs": ["f", "W2", "b2"], "outputs": ["y"],
         "attrs": {"transB": 1}},
    ]
    inits = {"W": w, "B": b, "W2": w2, "b2": b2}
    return name, [1, c_in, side, side], nodes, inits, centre, radius, seed


def numpy_conv_transpose(x, w, b, attrs):
    """ONNX ConvTranspose (group 1, dilation 1) in float64: every input pixel scatters its
    kernel at stride s; the pads are cropped from the full result, output_padding added at the
    end. x [N, C_in, H, W], w [C_in, C_out, kH, kW]."""
    s_h, s_w = attrs["strides"]
    top, left, bottom, right = attrs["pads"]
    op_h, op_w = attrs.get("output_padding", [0, 0])
    n, c_in, h, wd = x.shape
    _, c_out, k_h, k_w = w.shape
    full = np.zeros((n, c_out, (h - 1) * s_h + k_h + op_h, (wd - 1) * s_w + k_w + op_w))
    for i in range(h):
        for j in range(wd):
            # [N, C_in] x [C_in, C_out, kH, kW] -> [N, C_out, kH, kW] at (i·s, j·s)
            full[:, :, i * s_h:i * s_h + k_h, j * s_w:j * s_w + k_w] += np.einsum(
                "nc,cokl->nokl", x[:, :, i, j], w)
    out = full[:, :, top:full.shape[2] - bottom, left:full.shape[3] - right]
    return out + b.reshape(1, -1, 1, 1)


# Radii: the hidden pre-activations' interval half-widths are about radius * 0.4 * n_in (w_scale
# 0.5): `small` keeps most Sin/Cos neurons on one monotone half-wave (1 of 16 Sin, 4 of 16 Cos
# intervals hold an extremum), `medium` puts extrema inside
# many intervals, `wide` makes intervals span several periods (2 pi and more).
CASES = [
    mlp_case("gelu_mlp", "Gelu", seed=1201, radius=0.5),
    mlp_case("gelu_mlp_wide", "Gelu", seed=1202, radius=1.5),
    # `monotone`: seed and radius chosen so that no hidden interval holds an extremum of Sin / Cos
    # (every neuron on one monotone half-wave, where distcrown uses auto_LiRPA's lines).
    mlp_case("sin_mlp_monotone", "Sin", seed=1240, radius=0.04),
    mlp_case("cos_mlp_monotone", "Cos", seed=1240, radius=0.04),
    mlp_case("sin_mlp_small", "Sin", seed=1211, radius=0.1),
    mlp_case("sin_mlp_medium", "Sin", seed=1212, radius=0.5),
    mlp_case("sin_mlp_wide", "Sin", seed=1213, radius=3.0),
    mlp_case("cos_mlp_small", "Cos", seed=1221, radius=0.1),
    mlp_case("cos_mlp_wide", "Cos", seed=1223, radius=3.0),
    # LeakyRelu (issue 42): distcrown lowers it to alpha*x + (1 - alpha)*Relu(x), auto_LiRPA bounds
    # it as BoundLeakyRelu; CROWN's lines are the same.
    mlp_case("leaky_relu_mlp", "LeakyRelu", seed=1251, radius=0.3, attrs={"alpha": 0.1}),
    # ConvTranspose (issue 42): auto_LiRPA's BoundConvTranspose; distcrown's CROWN step is the
    # convolution with the same weight (src/ops/conv_transpose.cpp).
    conv_transpose_case("conv_transpose_cnn", seed=1261, radius=0.1),
    layernorm_case("layernorm_tokens", seed=1231, radius=0.1),
    layernorm_case("layernorm_tokens_wide", seed=1232, radius=0.25),
]


# ---------------------------------------------------------------------------------------------
# Evaluation: float64 numpy (oracle) and a torch module (for auto_LiRPA) of one description.
# ---------------------------------------------------------------------------------------------

def numpy_forward(nodes, inits, x):
    """x [N, *input_shape[1:]] float64 -> y [N, ...] float64."""
    from scipy.special import erf
    env = {k: v.astype(np.float64) for k, v in inits.items()}
    env["x"] = x
    for n in nodes:
        a = [env[i] for i in n["inputs"]]
        op = n["op"]
        if op == "Gemm":
            out = a[0] @ a[1].T + a[2]
        elif op == "MatMul":
            out = a[0] @ a[1]
        elif op == "Add":
            out = a[0] + a[1]
        elif op == "Gelu":
            out = 0.5 * a[0] * (1.0 + erf(a[0] / math.sqrt(2.0)))
        elif op == "LeakyRelu":
            out = np.where(a[0] > 0, a[0], n["attrs"]["alpha"] * a[0])
        elif op == "Relu":
            out = np.maximum(a[0], 0.0)
        elif op == "ConvTranspose":
            out = numpy_conv_transpose(a[0], a[1], a[2], n["attrs"])
        elif op == "Sin":
            out = np.sin(a[0])
        elif op == "Cos":
            out = np.cos(a[0])
        elif op == "Flatten":
            out = a[0].reshape(a[0].shape[0], -1)
        elif op == "LayerNormalization":
            assert n["attrs"]["axis"] == -1
            m = a[0].mean(axis=-1, keepdims=True)
            c = a[0] - m
            v = (c * c).mean(axis=-1, keepdims=True)
            out = c / np.sqrt(v + n["attrs"]["epsilon"]) * a[1] + a[2]
        else:
            raise ValueError(op)
        env[n["outputs"][0]] = out
    return env[nodes[-1]["outputs"][0]]


class DescribedNet(torch.nn.Module):
    def __init__(self, nodes, inits):
        super().__init__()
        from auto_LiRPA.operators.gelu import GELU
        self.nodes = nodes
        self.gelu = GELU()
        for k, v in inits.items():
            self.register_parameter(k, torch.nn.Parameter(torch.tensor(v), requires_grad=False))

    def forward(self, x):
        env = {"x": x}
        for k, p in self.named_parameters():
            env[k] = p
        for n in self.nodes:
            a = [env[i] for i in n["inputs"]]
            op = n["op"]
            if op == "Gemm":
                out = F.linear(a[0], a[1], a[2])
            elif op == "MatMul":
                out = torch.matmul(a[0], a[1])
            elif op == "Add":
                out = a[0] + a[1]
            elif op == "Flatten":
                out = torch.flatten(a[0], 1)
            elif op == "Gelu":
                out = self.gelu(a[0])
            elif op == "LeakyRelu":
                out = F.leaky_relu(a[0], n["attrs"]["alpha"])
            elif op == "Relu":
                out = F.relu(a[0])
            elif op == "ConvTranspose":
                at = n["attrs"]
                assert at["pads"][:2] == at["pads"][2:], "symmetric pads only"
                out = F.conv_transpose2d(a[0], a[1], a[2], stride=at["strides"],
                                         padding=at["pads"][:2],
                                         output_padding=at.get("output_padding", [0, 0]))
            elif op == "Sin":
                out = torch.sin(a[0])
            elif op == "Cos":
                out = torch.cos(a[0])
            elif op == "LayerNormalization":
                # Written out: the tracer keeps F.layer_norm as aten::layer_norm, which auto_LiRPA
                # does not take; these are the nodes torch.onnx exports for it before opset 17.
                m = a[0].mean(-1, keepdim=True)
                c = a[0] - m
                v = c.pow(2).mean(-1, keepdim=True)
                out = c / torch.sqrt(v + n["attrs"]["epsilon"]) * a[1] + a[2]
            else:
                raise ValueError(op)
            env[n["outputs"][0]] = out
        return env[self.nodes[-1]["outputs"][0]]


def f32_list(t):
    """Python floats that round-trip to exactly these float32 values (the float32's shortest
    decimal form)."""
    return [float(str(np.float32(v))) for v in np.asarray(t, dtype=np.float32).reshape(-1)]


# ---------------------------------------------------------------------------------------------
# One case.
# ---------------------------------------------------------------------------------------------

def run_case(case):
    from auto_LiRPA import BoundedModule, BoundedTensor
    from auto_LiRPA.perturbations import PerturbationLpNorm

    name, input_shape, nodes, inits, centre, radius, seed = case
    lo = f32(centre - radius).reshape(input_shape)
    hi = f32(centre + radius).reshape(input_shape)
    net = DescribedNet(nodes, inits).eval()
    x_lo, x_hi = torch.tensor(lo), torch.tensor(hi)
    x_mid = (x_lo + x_hi) / 2

    result = {}
    timing = {}
    opts_passed = {"ibp": {}, "crown": {},
                   "alpha_crown": {"optimize_bound_args": {"iteration": ALPHA_ITERATIONS,
                                                           "lr_alpha": LR_ALPHA}}}
    effective = {}
    node_types = None
    # As the shared ViT refs (make_refs.py --forward-first): auto_LiRPA rewrites Div as
    # Mul(Reciprocal) after its shape pass, and the new nodes get a shape only from a forward pass
    # (later auto_LiRPA versions run one: forward_before_compute_bounds). No effect on bounds.
    forward_first = any(n["op"] == "LayerNormalization" for n in nodes)
    if forward_first:
        # alpha-CROWN with the default sparse intermediate bounds fails an assertion in
        # get_alpha_crown_start_nodes on the LayerNorm graph; the shared ViT refs hit the same
        # family of failures and used these options (alpha-beta-CROWN's ViT configuration).
        opts_passed["alpha_crown"].update({"sparse_intermediate_bounds": False,
                                           "sparse_features_alpha": False,
                                           "sparse_spec_alpha": False})
    for key, method in (("ibp", "IBP"), ("crown", "CROWN"), ("alpha_crown", "CROWN-Optimized")):
        t0 = time.perf_counter()
        bm = BoundedModule(net, torch.zeros_like(x_mid), bound_opts=opts_passed[key] or None,
                           device="cpu")
        t1 = time.perf_counter()
        xb = BoundedTensor(x_mid, PerturbationLpNorm(norm=float("inf"), x_L=x_lo, x_U=x_hi))
        if forward_first:
            bm(xb)
        lb, ub = bm.compute_bounds(x=(xb,), method=method, bound_lower=True, bound_upper=True)
        t2 = time.perf_counter()
        result[key] = {"lower": f32_list(lb.detach()), "upper": f32_list(ub.detach())}
        timing[key] = {"build_s": round(t1 - t0, 4), "compute_bounds_s": round(t2 - t1, 4)}
        if key != "ibp":
            effective[key] = effective_opts(bm.bound_opts, key == "alpha_crown")
        if node_types is None:
            node_types = sorted({type(n).__name__ for n in bm.nodes()})
    result["alpha_crown"]["iterations"] = ALPHA_ITERATIONS
    result["alpha_crown"]["lr_alpha"] = LR_ALPHA

    # Soundness oracle: float64 numpy outputs at uniform points (plus the centre) and at random
    # vertices of the float32 box.
    rng = np.random.RandomState(seed + 7)
    lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
    u = rng.uniform(size=(N_UNIFORM,) + lo64.shape[1:])
    pts = np.concatenate([lo64 + u * (hi64 - lo64), (lo64 + hi64) / 2], axis=0)
    ys = numpy_forward(nodes, inits, pts).reshape(len(pts), -1)
    verts = np.where(rng.randint(0, 2, size=(N_VERTICES,) + lo64.shape[1:]) == 1, hi64, lo64)
    yv = numpy_forward(nodes, inits, verts).reshape(N_VERTICES, -1)
    centre_out = numpy_forward(nodes, inits, (lo64 + hi64) / 2).reshape(-1)

    # The torch float32 module against the float64 numpy evaluation at the sampled points.
    with torch.no_grad():
        yt = net(torch.tensor(pts[:256], dtype=torch.float32)).double().numpy().reshape(256, -1)
    conv_diff = float(np.abs(yt - ys[:256]).max())
    assert conv_diff <= 1e-5 * max(1.0, float(np.abs(ys).max())), conv_diff

    soundness = {}
    for key in ("ibp", "crown", "alpha_crown"):
        l = np.array(result[key]["lower"])
        h = np.array(result[key]["upper"])
        mins = np.minimum(ys.min(0), yv.min(0))
        maxs = np.maximum(ys.max(0), yv.max(0))
        tol = 1e-5 * np.maximum(1.0, np.abs(mins))
        ok = bool(np.all(l <= mins + tol) and np.all(h >= maxs - 1e-5 * np.maximum(1, abs(maxs))))
        soundness[key] = {"ok": ok, "min_margin_lower": float((mins - l).min()),
                          "min_margin_upper": float((h - maxs).min())}
        if not ok:
            print(f"WARNING {name}: {key} not sound against the samples", file=sys.stderr)

    return {
        "case": name,
        "description": describe(nodes, input_shape, radius),
        "input_shape": input_shape,
        "input_lower": f32_list(lo),
        "input_upper": f32_list(hi),
        "network": {
            "input": "x",
            "output": nodes[-1]["outputs"][0],
            "nodes": nodes,
            "initializers": {k: {"dims": list(v.shape), "values": f32_list(v)}
                             for k, v in inits.items()},
            "seed": seed,
            "how": "numpy.random.RandomState(seed), see scripts/make_op_refs.py; the values "
                   "here are the float32 weights used",
        },
        **result,
        "sampled": {"n": int(len(pts)), "min": ys.min(0).tolist(), "max": ys.max(0).tolist(),
                    "how": f"{N_UNIFORM} uniform points in the float32 box plus its centre, "
                           "float64 numpy evaluation of `network`"},
        "sampled_vertices": {"n": N_VERTICES, "min": yv.min(0).tolist(),
                             "max": yv.max(0).tolist(),
                             "how": f"{N_VERTICES} random vertices of the box, float64 numpy"},
        "soundness_check": soundness,
        "center_output": {"values": centre_out.tolist(),
                          "how": "float64 numpy evaluation of `network` at the box centre"},
        "conversion_check": {"max_abs_diff_float32_torch_vs_float64_numpy": conv_diff},
        "auto_lirpa_nodes": node_types,
        "reference": {"tool": "auto_LiRPA", "commit": os.environ.get("AUTO_LIRPA_COMMIT",
                                                                     AUTO_LIRPA_COMMIT),
                      "torch": torch.__version__, "python": platform.python_version(),
                      "precision": "float32", "device": "cpu", "torch_threads": 1},
        "bound_opts": {"passed": opts_passed, "effective": effective,
                       "forward_before_compute_bounds": forward_first},
        "timing_s": timing,
    }


def effective_opts(opts, alpha):
    """The effective auto_LiRPA options that matter for these networks (the full dictionaries
    are in the shared refs; these networks have no ReLU and no convolution)."""
    keep = ["sparse_intermediate_bounds", "sparse_intermediate_bounds_with_ibp",
            "minimum_sparsity", "conv_mode"]
    out = {k: opts.get(k) for k in keep}
    if alpha:
        o = opts.get("optimize_bound_args", {})
        out["optimize_bound_args"] = {
            k: o.get(k) for k in ["iteration", "lr_alpha", "lr_decay", "optimizer", "keep_best",
                                  "init_alpha", "early_stop_patience", "start_save_best",
                                  "fix_interm_bounds", "enable_beta_crown"]}
    return json.loads(json.dumps(out, default=str))


def describe(nodes, input_shape, radius):
    ops = " -> ".join(n["op"] for n in nodes)
    return f"x {input_shape} in centre +- {radius}: {ops}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "data", "op_refs"))
    ap.add_argument("--only", action="append", help="case name (repeatable)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    for case in CASES:
        if args.only and case[0] not in args.only:
            continue
        t = time.perf_counter()
        ref = run_case(case)
        path = os.path.join(args.out, case[0] + ".json")
        with open(path, "w") as f:
            json.dump(ref, f, indent=None, separators=(",", ":"))
            f.write("\n")
        sound = all(v["ok"] for v in ref["soundness_check"].values())
        print(f"{case[0]}: {os.path.getsize(path)} bytes, sound={sound}, "
              f"{time.perf_counter() - t:.1f} s, nodes {ref['auto_lirpa_nodes']}")


if __name__ == "__main__":
    main()
