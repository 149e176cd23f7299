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

Weights (numpy's default_rng(seed); every statistic below is measured on 64 calibration images,
uniform in [0,1], from the same generator, and the property's image, so that the activations keep their scale through the 20
layers). They imitate what makes an adversarially trained ResNet's bounds informative at eps =
1/255: almost every ReLU is stable over the eps-ball (on or off whatever the perturbation), the
residual branches are small next to the shortcuts, and each unit depends on few inputs, so that
interval widths stay small next to the pre-activations' distance from zero. With plain He-random
weights (this script before) almost every neuron is unstable, bound widths grow ~4-5x a layer and
CROWN's bounds are +-1.7e11 after 9 minutes; with these they are ~0.6 wide around logits of order 5,
in seconds, and prove the property.

  - Convolutions: He-normal. In the blocks, each 3x3 filter keeps the weights of only CONV_INPUTS
    (2) randomly drawn input channels, the others are zero (a pruned network; the parameter count
    is the dense one). A dense filter over 288-2304 inputs multiplies an interval's width by
    ~0.8*sqrt(fan-in) (14-38x) per layer, which no margin survives over 17 layers.
  - BatchNorm running mean / variance: the calibration batch's (zero mean, unit variance), scale
    uniform in [0.8, 1.2], and shift an offset of +-U(MARGIN_LO, MARGIN_HI) = +-U(2.5, 4) spreads:
    half of the channels on, half off, by margins that the eps-ball cannot cross.
  - Second BatchNorm of each block: scale BRANCH_SCALE * U(0.5, 1.5) = ~0.05 (the residual branch a
    twentieth of the shortcut), shift set so that each channel of the block's sum stays away from
    zero: a channel the shortcut keeps on stays on; any other is moved below zero by U(2.5, 4)
    times the larger of its own spread and half the median spread of the on channels.
  - Strided 1x1 shortcuts: a channel duplication (output channel c copies input channel c mod cin)
    plus He-scaled noise x0.05, then a BatchNorm close to the identity (mean 0, variance 1, scale
    U(0.9, 1.1), shift N(0, 0.05)).
  - Gemm 4096 -> 256: He-normal rows rescaled to unit spread, bias centring plus the same on/off
    offsets. Gemm 256 -> 100: rows scaled to a logit spread of 1, bias centring plus a class prior
    N(0, PRIOR = 1.5) (a trained network's logits on a noise image are dominated by its biases;
    without it the top-2 gap of 100 random logits, ~0.3, is below what eps moves them).

The property: a uniform random image (same generator) labelled with the network's own prediction,
the L-infinity ball of radius eps clipped to [0,1], and "some other class scores at least as high as
the label" (99 rows, VNN-COMP's CIFAR-100 form). With the defaults and seed 0 the label is 29 with a
logit margin of 1.35 at the centre; the network's linearisation at the centre (exact over the ball
if no ReLU changes state) keeps a margin of at least 0.99, and CROWN's output bounds alone prove it
(Y_29 >= 5.01 > the upper bound of every other logit). Other seeds or options may give properties
that do not hold (the script prints the margin at the centre).

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
DEFAULTS = dict(
    live=0.5,            # fraction of channels / hidden units whose offset is positive
    margin_lo=2.5,       # offsets of the pre-activations, in units of their spread
    margin_hi=4.0,
    branch_scale=0.05,   # second BatchNorm scale of every block (the residual branch)
    shortcut_noise=0.05, # noise of the 1x1 shortcut convolutions, relative to He
    logit_scale=1.0,     # spread of each logit over the calibration images
    prior=1.5,           # spread of the class prior in the last bias
    conv_inputs=2,       # input channels kept per 3x3 filter of the blocks (0 = all)
    off_scale=0.5,       # channels of a block's sum that are off: margin relative to the on ones
)


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
    the calibration images, so that each BatchNorm's statistics (and each shift) are set from its
    own input."""

    def __init__(self, rng, calibration, opts):
        self.rng = rng
        self.opts = opts
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

    def offsets(self, c):
        """Per-channel pre-activation offsets in units of the channel's spread: a sign (+1 with
        probability LIVE) times a margin uniform in [MARGIN_LO, MARGIN_HI]."""
        o = self.opts
        sign = np.where(self.rng.uniform(size=c) < o["live"], 1.0, -1.0)
        return sign * self.rng.uniform(o["margin_lo"], o["margin_hi"], size=c)

    def conv_node(self, t, x, w, stride):
        k = w.shape[2]
        out = self.name("conv")
        self.nodes.append(helper.make_node("Conv", [t, self.const("W", w)], [out], kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[k // 2] * 4))
        return out, conv2d(x, w.astype(np.float64), stride, k // 2)

    def conv(self, t, x, cin, cout, k, stride, prune=True):
        """He-normal over the filter's fan-in; with CONV_INPUTS > 0, each filter keeps the weights of
        only that many input channels (drawn at random) and the rest are zero (a pruned network)."""
        keep = self.opts["conv_inputs"] if prune else 0
        if keep <= 0 or keep >= cin:
            return self.conv_node(t, x, self.rng.normal(0.0, np.sqrt(2.0 / (cin * k * k)),
                                                        size=(cout, cin, k, k)).astype(np.float32), stride)
        keep = int(keep)
        w = self.rng.normal(0.0, np.sqrt(2.0 / (keep * k * k)), size=(cout, cin, k, k))
        mask = np.zeros((cout, cin))
        for o in range(cout):
            mask[o, self.rng.choice(cin, size=keep, replace=False)] = 1.0
        return self.conv_node(t, x, (w * mask[:, :, None, None]).astype(np.float32), stride)

    def shortcut_conv(self, t, x, cin, cout, stride):
        """1x1 strided shortcut: output channel c copies input channel c mod cin (a channel
        duplication), plus small He-scaled noise."""
        w = self.rng.normal(0.0, self.opts["shortcut_noise"] * np.sqrt(2.0 / cin), size=(cout, cin, 1, 1))
        w[np.arange(cout), np.arange(cout) % cin, 0, 0] += 1.0
        return self.conv_node(t, x, w.astype(np.float32), stride)

    def bn_node(self, t, x, gamma, beta, mean, var):
        gamma, beta, mean, var = (np.asarray(a, dtype=np.float32) for a in (gamma, beta, mean, var))
        out = self.name("bn")
        self.nodes.append(helper.make_node(
            "BatchNormalization",
            [t, self.const("gamma", gamma), self.const("beta", beta), self.const("mean", mean),
             self.const("var", var)], [out], epsilon=BN_EPS))
        y = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + BN_EPS)
        return out, y * gamma[None, :, None, None] + beta[None, :, None, None]

    def bn(self, t, x, gamma, beta):
        """BatchNorm whose running statistics are the calibration batch's (zero mean, unit variance
        before the scale gamma and shift beta)."""
        return self.bn_node(t, x, gamma, beta, x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3)))

    def relu(self, t, x):
        out = self.name("relu")
        self.nodes.append(helper.make_node("Relu", [t], [out]))
        return out, np.maximum(x, 0.0)

    def add(self, a, xa, b, xb):
        out = self.name("add")
        self.nodes.append(helper.make_node("Add", [a, b], [out]))
        return out, xa + xb

    def block(self, t, x, cin, cout, stride):
        o = self.opts
        c = cout
        h, xh = self.conv(t, x, cin, cout, 3, stride)
        h, xh = self.bn(h, xh, self.rng.uniform(0.8, 1.2, size=c), self.offsets(c))
        h, xh = self.relu(h, xh)
        h, xh = self.conv(h, xh, cout, cout, 3, 1)
        if stride != 1 or cin != cout:
            s, xs = self.shortcut_conv(t, x, cin, cout, stride)
            s, xs = self.bn_node(s, xs, self.rng.uniform(0.9, 1.1, size=c), self.rng.normal(0.0, 0.05, size=c),
                                 np.zeros(c), np.ones(c))
        else:
            s, xs = t, x
        # The second BatchNorm: a small scale (the residual branch a fraction of the shortcut) and
        # a shift that moves each channel of the sum away from zero: a channel the shortcut keeps
        # clearly on stays on; any other is moved below zero by a margin of its own spread.
        gamma = self.rng.uniform(0.5, 1.5, size=c) * o["branch_scale"]
        margin = self.rng.uniform(o["margin_lo"], o["margin_hi"], size=c)
        mean_c = xh.mean(axis=(0, 2, 3))
        std_c = np.sqrt(xh.var(axis=(0, 2, 3)) + BN_EPS)
        r = (xh - mean_c[None, :, None, None]) / std_c[None, :, None, None] * gamma[None, :, None, None]
        u = xs + r
        mu, sd = u.mean(axis=(0, 2, 3)), u.std(axis=(0, 2, 3))
        live = mu > margin * sd
        scale = np.median(sd[live]) if live.any() else 1.0
        beta = np.where(live, self.rng.normal(0.0, 0.02, size=c) * sd,
                        -mu - margin * np.maximum(sd, o["off_scale"] * scale))
        h, xh = self.bn_node(h, xh, gamma, beta, mean_c, std_c ** 2 - BN_EPS)
        y, xy = self.add(h, xh, s, xs)
        return self.relu(y, xy)

    def gemm_node(self, t, x, w, b):
        out = self.name("gemm")
        self.nodes.append(helper.make_node("Gemm", [t, self.const("W", w), self.const("b", b)], [out],
                                           transB=1))
        return out, x @ w.astype(np.float64).T + b

    def hidden(self, t, x, fin, fout):
        """Linear layer + Relu, its rows scaled to unit spread on the calibration batch and its bias
        an offset of each unit away from zero (as the BatchNorm shifts)."""
        w = self.rng.normal(0.0, np.sqrt(2.0 / fin), size=(fout, fin))
        z = x @ w.T
        mu, sd = z.mean(axis=0), z.std(axis=0) + 1e-12
        w = w / sd[:, None]
        b = self.offsets(fout) - mu / sd
        t, x = self.gemm_node(t, x, w.astype(np.float32), b.astype(np.float32))
        return self.relu(t, x)

    def logits(self, t, x, fin, fout):
        """Last layer: rows scaled so that each logit's spread over the calibration batch is
        LOGIT_SCALE, bias the centring plus a class prior of spread PRIOR."""
        w = self.rng.normal(0.0, np.sqrt(1.0 / fin), size=(fout, fin))
        z = x @ w.T
        mu, sd = z.mean(axis=0), z.std(axis=0) + 1e-12
        w = w / sd[:, None] * self.opts["logit_scale"]
        b = -mu / sd * self.opts["logit_scale"] + self.rng.normal(0.0, self.opts["prior"], size=fout)
        return self.gemm_node(t, x, w.astype(np.float32), b.astype(np.float32))


def build(seed, opts=None):
    opts = dict(DEFAULTS, **(opts or {}))
    rng = np.random.default_rng(seed)
    calibration = rng.uniform(0.0, 1.0, size=(CALIBRATION_IMAGES, 3, 32, 32))
    image = rng.uniform(0.0, 1.0, size=(1, 3, 32, 32))
    b = Builder(rng, np.concatenate([calibration, image]), opts)
    mean = b.const("mean", MEAN.reshape(1, 3, 1, 1))
    std = b.const("std", STD.reshape(1, 3, 1, 1))
    b.nodes.append(helper.make_node("Sub", ["input", mean], ["centred"]))
    b.nodes.append(helper.make_node("Div", ["centred", std], ["normalised"]))
    x = (b.x - MEAN.reshape(1, 3, 1, 1)) / STD.reshape(1, 3, 1, 1)
    t, x = b.conv("normalised", x, 3, WIDTHS[0], 3, 1, prune=False)
    t, x = b.bn(t, x, rng.uniform(0.8, 1.2, size=WIDTHS[0]), b.offsets(WIDTHS[0]))
    t, x = b.relu(t, x)
    cin = WIDTHS[0]
    for stage, width in enumerate(WIDTHS):
        for i in range(BLOCKS_PER_STAGE):
            stride = 2 if stage > 0 and i == 0 else 1
            t, x = b.block(t, x, cin, width, stride)
            cin = width
    b.nodes.append(helper.make_node("Flatten", [t], ["flat"], axis=1))
    x = x.reshape(x.shape[0], -1)
    t, x = b.hidden("flat", x, x.shape[1], HIDDEN)
    t, x = b.logits(t, x, HIDDEN, CLASSES)
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


def write_vnnlib(path, image, eps, label, logits_shape, margin=None):
    flat = image.reshape(-1)
    lines = [f"; CIFAR-100 ResNet-large-shaped network (scripts/make_resnet_large.py), label {label}, "
             f"eps {eps!r}" + ("" if margin is None else f", logit margin {margin:.4f} at the centre")]
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
    write_vnnlib(spec_path, image, args.eps, label, CLASSES, margin=float(top2[1] - top2[0]))
    print(f"{onnx_path}: {params} parameters, {len(model.graph.node)} nodes; "
          f"label {label}, logit margin {top2[1] - top2[0]:.4f} at the centre")
    print(spec_path)


if __name__ == "__main__":
    main()
