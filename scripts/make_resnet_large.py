#!/usr/bin/env python3
"""Build a CIFAR-100 ResNet-large-shaped network (ONNX) with weights from a seed, and a robustness
property (VNNLIB) at eps = 1/255, for the scale benchmarks of issues 13 and 14.

The reference work's showcase was VNN-COMP 2022's CIFAR-100 ResNet-large; its trained weights are
not in the fixtures, so this script makes a network of the same layout whose weights come from a
seed (anyone can regenerate it byte for byte):

    input [1,3,32,32] -> Sub(mean) -> Div(std)                       (CIFAR-100 channel statistics)
    stem      Conv 3x3 3->32, BatchNorm, Relu
    stage 1   2 basic blocks, 32 channels, 32x32
    stage 2   2 basic blocks, 64 channels, 16x16 (the first strided, with a 1x1 Conv+BN shortcut)
    stage 3   2 basic blocks, 128 channels, 8x8
    stage 4   2 basic blocks, 256 channels, 4x4
    Flatten 4096 -> Gemm 256 -> Relu -> Gemm 100 -> output [1,100]

A basic block is Conv 3x3 (stride s) -> BN -> Relu -> Conv 3x3 -> BN, plus the shortcut (identity,
or Conv 1x1 stride s -> BN), Add, Relu: 8 residual blocks, 17 3x3 convolutions each followed by
BatchNorm (plus 3 shortcut 1x1 convolutions), 2 linear layers, 3.87 M parameters.

Weights: He-normal from numpy's default_rng(seed); BatchNorm scale and shift random around 1 and 0,
and its running mean / variance calibrated on 64 random images (uniform in [0,1], same generator)
so that every BatchNorm output has zero mean and unit variance on them: without it the activations
of a random 20-layer network grow or vanish and the bounds say nothing about scale. The second
BatchNorm of each block is scaled by 0.5 (residual branches smaller than the shortcut, as trained
ResNets have).

The property: a uniform random image (same generator) labelled with the network's own prediction,
the L-infinity ball of radius eps clipped to [0,1], and "some other class scores at least as high as
the label" (99 rows, VNN-COMP's CIFAR-100 form). Whether it holds is not known in advance.

Usage:
    python scripts/make_resnet_large.py --out-dir /tmp/resnet_large [--seed 0] [--eps 0.00392156862745098]
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MEAN = np.array([0.5071, 0.4865, 0.4409], dtype=np.float32)
STD = np.array([0.2673, 0.2564, 0.2762], dtype=np.float32)
WIDTHS = (32, 64, 128, 256)
BLOCKS_PER_STAGE = 2
HIDDEN = 256
CLASSES = 100
BN_EPS = 1e-5
CALIBRATION_IMAGES = 64


def conv2d(x, w, stride, pad):
    """x [N,C,H,W], w [O,C,k,k] -> [N,O,H',W'] (float64, im2col)."""
    n, c, h, wd = x.shape
    o, _, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (h + 2 * pad - k) // stride + 1
    wo = (wd + 2 * pad - k) // stride + 1
    cols = np.empty((n, c, k, k, ho, wo), dtype=x.dtype)
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i:i + stride * ho:stride, j:j + stride * wo:stride]
    return np.einsum("ncklhw,ockl->nohw", cols, w, optimize=True)


class Builder:
    """Collects ONNX nodes and initializers while running the same network in numpy (float64) on
    the calibration images, so that each BatchNorm's statistics are those of its own input."""

    def __init__(self, rng, calibration):
        self.rng = rng
        self.nodes = []
        self.inits = []
        self.count = 0
        self.x = calibration  # [N,3,32,32] float64: the calibration batch at the current node

    def name(self, kind):
        self.count += 1
        return f"{kind}_{self.count}"

    def const(self, kind, array):
        n = self.name(kind)
        self.inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), n))
        return n

    def conv(self, t, x, cin, cout, k, stride):
        w = self.rng.normal(0.0, np.sqrt(2.0 / (cin * k * k)), size=(cout, cin, k, k)).astype(np.float32)
        out = self.name("conv")
        self.nodes.append(helper.make_node("Conv", [t, self.const("W", w)], [out], kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[k // 2] * 4))
        return out, conv2d(x, w.astype(np.float64), stride, k // 2)

    def bn(self, t, x, scale_factor=1.0):
        c = x.shape[1]
        gamma = (self.rng.uniform(0.8, 1.2, size=c) * scale_factor).astype(np.float32)
        beta = self.rng.normal(0.0, 0.1, size=c).astype(np.float32)
        mean = x.mean(axis=(0, 2, 3)).astype(np.float32)
        var = x.var(axis=(0, 2, 3)).astype(np.float32)
        out = self.name("bn")
        self.nodes.append(helper.make_node(
            "BatchNormalization",
            [t, self.const("gamma", gamma), self.const("beta", beta), self.const("mean", mean),
             self.const("var", var)], [out], epsilon=BN_EPS))
        y = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + BN_EPS)
        return out, y * gamma[None, :, None, None] + beta[None, :, None, None]

    def relu(self, t, x):
        out = self.name("relu")
        self.nodes.append(helper.make_node("Relu", [t], [out]))
        return out, np.maximum(x, 0.0)

    def add(self, a, xa, b, xb):
        out = self.name("add")
        self.nodes.append(helper.make_node("Add", [a, b], [out]))
        return out, xa + xb

    def block(self, t, x, cin, cout, stride):
        h, xh = self.conv(t, x, cin, cout, 3, stride)
        h, xh = self.bn(h, xh)
        h, xh = self.relu(h, xh)
        h, xh = self.conv(h, xh, cout, cout, 3, 1)
        h, xh = self.bn(h, xh, scale_factor=0.5)
        if stride != 1 or cin != cout:
            s, xs = self.conv(t, x, cin, cout, 1, stride)
            s, xs = self.bn(s, xs)
        else:
            s, xs = t, x
        y, xy = self.add(h, xh, s, xs)
        return self.relu(y, xy)

    def gemm(self, t, x, fin, fout, relu):
        w = self.rng.normal(0.0, np.sqrt(2.0 / fin), size=(fout, fin)).astype(np.float32)
        b = self.rng.normal(0.0, 0.01, size=fout).astype(np.float32)
        out = self.name("gemm")
        self.nodes.append(helper.make_node("Gemm", [t, self.const("W", w), self.const("b", b)], [out],
                                           transB=1))
        y = x @ w.astype(np.float64).T + b
        return self.relu(out, y) if relu else (out, y)


def build(seed):
    rng = np.random.default_rng(seed)
    calibration = rng.uniform(0.0, 1.0, size=(CALIBRATION_IMAGES, 3, 32, 32))
    image = rng.uniform(0.0, 1.0, size=(1, 3, 32, 32))
    b = Builder(rng, np.concatenate([calibration, image]))
    mean = b.const("mean", MEAN.reshape(1, 3, 1, 1))
    std = b.const("std", STD.reshape(1, 3, 1, 1))
    b.nodes.append(helper.make_node("Sub", ["input", mean], ["centred"]))
    b.nodes.append(helper.make_node("Div", ["centred", std], ["normalised"]))
    x = (b.x - MEAN.reshape(1, 3, 1, 1)) / STD.reshape(1, 3, 1, 1)
    t, x = b.conv("normalised", x, 3, WIDTHS[0], 3, 1)
    t, x = b.bn(t, x)
    t, x = b.relu(t, x)
    cin = WIDTHS[0]
    for stage, width in enumerate(WIDTHS):
        for i in range(BLOCKS_PER_STAGE):
            stride = 2 if stage > 0 and i == 0 else 1
            t, x = b.block(t, x, cin, width, stride)
            cin = width
    b.nodes.append(helper.make_node("Flatten", [t], ["flat"], axis=1))
    x = x.reshape(x.shape[0], -1)
    t, x = b.gemm("flat", x, x.shape[1], HIDDEN, relu=True)
    t, x = b.gemm(t, x, HIDDEN, CLASSES, relu=False)
    b.nodes.append(helper.make_node("Identity", [t], ["output"]))
    graph = helper.make_graph(
        b.nodes, "resnet_large_shaped",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, CLASSES])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    params = sum(int(np.prod(i.dims)) for i in b.inits
                 if not i.name.startswith(("mean_", "var_", "std_")))
    return model, image[0], x[-1], params


def write_vnnlib(path, image, eps, label, logits_shape):
    flat = image.reshape(-1)
    lines = [f"; CIFAR-100 ResNet-large-shaped network (scripts/make_resnet_large.py), label {label}, "
             f"eps {eps!r}"]
    lines += [f"(declare-const X_{i} Real)" for i in range(flat.size)]
    lines += [f"(declare-const Y_{j} Real)" for j in range(logits_shape)]
    for i, v in enumerate(flat):
        lo, hi = max(0.0, float(v) - eps), min(1.0, float(v) + eps)
        lines.append(f"(assert (<= X_{i} {hi!r}))")
        lines.append(f"(assert (>= X_{i} {lo!r}))")
    lines.append("(assert (or")
    lines += [f"    (and (>= Y_{j} Y_{label}))" for j in range(logits_shape) if j != label]
    lines.append("))")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eps", type=float, default=1.0 / 255.0)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    model, image, logits, params = build(args.seed)
    label = int(np.argmax(logits))
    top2 = np.sort(logits)[-2:]
    onnx_path = os.path.join(args.out_dir, "resnet_large_shaped.onnx")
    spec_path = os.path.join(args.out_dir, "resnet_large_shaped_prop.vnnlib")
    onnx.save(model, onnx_path)
    write_vnnlib(spec_path, image, args.eps, label, CLASSES)
    print(f"{onnx_path}: {params} parameters, {len(model.graph.node)} nodes; "
          f"label {label}, logit margin {top2[1] - top2[0]:.4f} at the centre")
    print(spec_path)


if __name__ == "__main__":
    main()
