#!/usr/bin/env python3
"""Build distcrown's default example: a small digits classifier (ONNX) and a robustness property (VNNLIB).

The first command in the project README bounds this model over this property, and the tests use
the pair as a realistic end-to-end case, so both files are produced by this script rather than
downloaded: anyone can regenerate them, byte for byte, from data that ships inside scikit-learn.

What it does:
  1. Loads scikit-learn's bundled ``digits`` set (8x8 images, 10 classes, no download), scales
     pixels to [0, 1] and holds out 20% as the test set (train_test_split, random_state=0).
  2. Trains a small MLP with torch on the CPU, deterministically (fixed seeds, one thread,
     deterministic algorithms), and prints its test accuracy.
  3. Writes the network as an ONNX graph with the ``onnx`` helper API:
         input [1,1,8,8] -> Sub(mean) -> Div(std) -> Flatten -> Gemm 64->32 -> Relu
                         -> Gemm 32->32 -> Relu -> Gemm 32->10 -> output [1,10]
     (scalar Sub/Div constants so the graph exercises element-wise ops with constants; Gemm with
     transB=1 and weights stored [out, in] as torch keeps them), checks it with onnx.checker and
     checks that a float64 numpy evaluation of the written graph matches torch on the test set.
  4. Picks the first correctly classified test image whose L-infinity box of radius eps (clipped
     to [0, 1]) survives a sampled attack (uniform points, all still predicted as the label), and
     writes the VNNLIB property "some other class scores at least as high as the label" in the
     VNN-COMP mnist_fc style. The property is expected to be UNSAT (i.e. the network is robust).

Usage:
    python scripts/make_default_model.py --out-dir examples
"""

import argparse
import copy
import os
import sys

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper, TensorProto
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

MODEL_NAME = "digits_mlp.onnx"
PROPERTY_NAME = "digits_mlp_prop.vnnlib"
NUM_CLASSES = 10
IMAGE_SHAPE = (1, 1, 8, 8)
HIDDEN = 32
OPSET = 13
IR_VERSION = 8
TEST_FRACTION = 0.2
GRAPH_TOLERANCE = 1e-5
WEIGHT_DECAY = 1e-3  # keeps the logits moderate (|y| < ~30) without hurting accuracy


def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", default=os.path.join(os.path.dirname(here), "examples"),
                        help="folder for the .onnx and .vnnlib files (default: examples/ next to scripts/)")
    parser.add_argument("--seed", type=int, default=0, help="seed for torch and numpy")
    parser.add_argument("--epochs", type=int, default=40, help="training epochs")
    parser.add_argument("--eps", type=float, default=0.02, help="L-infinity radius of the property box")
    parser.add_argument("--samples", type=int, default=10000,
                        help="uniform points sampled in the box to check the property is plausible")
    return parser.parse_args(argv)


def set_determinism(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def load_data():
    """Digits scaled to [0, 1] (float64, exact k/16), split 80/20 by train_test_split(random_state=0).

    Returns (x_train, y_train), (x_test, y_test) and the load_digits index of every test image.
    """
    digits = load_digits()
    x = digits.data.astype(np.float64) / 16.0
    y = digits.target.astype(np.int64)
    train_idx, test_idx = train_test_split(np.arange(len(x)), test_size=TEST_FRACTION, random_state=0)
    return (x[train_idx], y[train_idx]), (x[test_idx], y[test_idx]), test_idx


class DigitsMLP(torch.nn.Module):
    """(x - mean) / std -> flatten -> 64-32-32-10 ReLU MLP; mean and std are scalars."""

    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32))
        self.fc1 = torch.nn.Linear(64, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = torch.nn.Linear(HIDDEN, NUM_CLASSES)

    def forward(self, x):
        x = torch.flatten((x - self.mean) / self.std, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def to_images(x, dtype=torch.float32):
    return torch.tensor(x, dtype=dtype).reshape(-1, *IMAGE_SHAPE[1:])


def train(model, x_train, y_train, epochs, seed):
    """Adam with cross-entropy over mini-batches shuffled by a seeded generator."""
    images, labels = to_images(x_train), torch.tensor(y_train)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=WEIGHT_DECAY)
    loss_fn = torch.nn.CrossEntropyLoss()
    batch = 32
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(images), generator=generator)
        total = 0.0
        for start in range(0, len(images), batch):
            idx = order[start:start + batch]
            optimizer.zero_grad()
            loss = loss_fn(model(images[idx]), labels[idx])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        if epoch == 0 or (epoch + 1) % 10 == 0:
            print(f"  epoch {epoch + 1:3d}  loss {total / len(images):.4f}")
    model.eval()


def accuracy(model, x, y):
    with torch.no_grad():
        pred = model(to_images(x)).argmax(dim=1).numpy()
    return float((pred == y).mean())


def build_onnx(model):
    """The network as an ONNX graph built with the helper API (float32, opset 13, IR 8)."""
    def init(name, tensor):
        return numpy_helper.from_array(tensor.detach().numpy().astype(np.float32), name)

    initializers = [init("mean", model.mean), init("std", model.std)]
    for i, layer in enumerate((model.fc1, model.fc2, model.fc3), start=1):
        initializers += [init(f"fc{i}.weight", layer.weight), init(f"fc{i}.bias", layer.bias)]

    nodes = [
        helper.make_node("Sub", ["input", "mean"], ["centered"], name="sub_mean"),
        helper.make_node("Div", ["centered", "std"], ["normalized"], name="div_std"),
        helper.make_node("Flatten", ["normalized"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["fc1"], name="gemm1", transB=1),
        helper.make_node("Relu", ["fc1"], ["relu1"], name="relu1"),
        helper.make_node("Gemm", ["relu1", "fc2.weight", "fc2.bias"], ["fc2"], name="gemm2", transB=1),
        helper.make_node("Relu", ["fc2"], ["relu2"], name="relu2"),
        helper.make_node("Gemm", ["relu2", "fc3.weight", "fc3.bias"], ["output"], name="gemm3", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "digits_mlp",
        inputs=[helper.make_tensor_value_info("input", TensorProto.FLOAT, list(IMAGE_SHAPE))],
        outputs=[helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, NUM_CLASSES])],
        initializer=initializers,
        doc_string="8x8 digits MLP generated by scripts/make_default_model.py")
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                   producer_name="distcrown/scripts/make_default_model.py")
    onnx_model.ir_version = IR_VERSION
    onnx.checker.check_model(onnx_model, full_check=True)
    return onnx_model


def evaluate_onnx(onnx_model, images):
    """Float64 numpy interpretation of the graph's ops (Sub, Div, Flatten, Gemm, Relu).

    ``images`` has shape [N, 1, 8, 8]; the graph is evaluated on the whole batch at once, which is
    equivalent to N runs of the [1, 1, 8, 8] graph since every op here is row-wise.
    """
    values = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx_model.graph.initializer}
    values[onnx_model.graph.input[0].name] = np.asarray(images, dtype=np.float64)
    for node in onnx_model.graph.node:
        args = [values[name] for name in node.input]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Sub":
            out = args[0] - args[1]
        elif node.op_type == "Div":
            out = args[0] / args[1]
        elif node.op_type == "Flatten":
            axis = attrs.get("axis", 1)
            out = args[0].reshape(int(np.prod(args[0].shape[:axis])), -1)
        elif node.op_type == "Gemm":
            a = args[0].T if attrs.get("transA", 0) else args[0]
            b = args[1].T if attrs.get("transB", 0) else args[1]
            out = attrs.get("alpha", 1.0) * (a @ b)
            if len(args) > 2:
                out = out + attrs.get("beta", 1.0) * args[2]
        elif node.op_type == "Relu":
            out = np.maximum(args[0], 0.0)
        else:
            raise ValueError(f"unexpected op {node.op_type}")
        values[node.output[0]] = out
    return values[onnx_model.graph.output[0].name]


def check_graph_matches_torch(onnx_model, model, x_test):
    """Fail loudly unless the numpy float64 evaluation of the written graph agrees with torch.

    Two comparisons: against the same torch model run in float64 (same float32 weights), which
    must agree within GRAPH_TOLERANCE absolutely and checks the graph's structure; and against the
    float32 torch model, which must agree within GRAPH_TOLERANCE relative to the logit size (float32
    rounding of logits around 20 is itself a few 1e-6) and must predict the same classes.
    """
    images = x_test.reshape(-1, *IMAGE_SHAPE[1:])
    ours = evaluate_onnx(onnx_model, images)
    with torch.no_grad():
        torch32 = model(to_images(x_test)).double().numpy()
        torch64 = copy.deepcopy(model).double()(to_images(x_test, torch.float64)).numpy()
    diff64 = float(np.max(np.abs(ours - torch64)))
    diff32 = float(np.max(np.abs(ours - torch32)))
    rel32 = float(np.max(np.abs(ours - torch32) / (1.0 + np.abs(torch32))))
    print(f"numpy float64 graph vs torch on {len(x_test)} test images: max abs diff {diff64:.3g} "
          f"(torch float64), {diff32:.3g} (torch float32, relative {rel32:.3g})")
    if not diff64 <= GRAPH_TOLERANCE:
        raise SystemExit(f"ONNX graph does not reproduce the torch model: max diff {diff64} > {GRAPH_TOLERANCE}")
    if not rel32 <= GRAPH_TOLERANCE:
        raise SystemExit(f"ONNX graph drifts from float32 torch: relative diff {rel32} > {GRAPH_TOLERANCE}")
    if not np.array_equal(ours.argmax(axis=1), torch32.argmax(axis=1)):
        raise SystemExit("ONNX graph and torch disagree on a predicted class")


def box_around(image, eps):
    return np.clip(image - eps, 0.0, 1.0), np.clip(image + eps, 0.0, 1.0)


def sampled_min_margin(onnx_model, lo, hi, label, samples, rng):
    """Smallest  y_label - max_{k != label} y_k  over the box centre and uniform samples in the box."""
    points = np.concatenate([((lo + hi) / 2)[None, :], rng.uniform(lo, hi, size=(samples, lo.size))])
    logits = evaluate_onnx(onnx_model, points.reshape(-1, *IMAGE_SHAPE[1:]))
    others = np.delete(logits, label, axis=1)
    return float(np.min(logits[:, label] - others.max(axis=1)))


def interval_margin_bound(onnx_model, lo, hi, label):
    """Lower bound on  y_label - max_{k != label} y_k  over the box by interval arithmetic (float64).

    A diagnostic only: a positive value means even plain interval bound propagation (with the
    specification folded into the last Gemm) proves the property, so any sound, tighter method such
    as CROWN must prove it too. Assumes the Sub/Div/Flatten/(Gemm, Relu)* layout built above.
    """
    values = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx_model.graph.initializer}
    low, high = (lo - values["mean"]) / values["std"], (hi - values["mean"]) / values["std"]
    gemms = [n for n in onnx_model.graph.node if n.op_type == "Gemm"]
    for node in gemms[:-1]:
        weight, bias = values[node.input[1]], values[node.input[2]]
        centre, radius = weight @ ((low + high) / 2) + bias, np.abs(weight) @ ((high - low) / 2)
        low, high = np.maximum(centre - radius, 0.0), np.maximum(centre + radius, 0.0)
    weight, bias = values[gemms[-1].input[1]], values[gemms[-1].input[2]]
    others = [k for k in range(NUM_CLASSES) if k != label]
    diff_w, diff_b = weight[label] - weight[others], bias[label] - bias[others]
    centre, radius = diff_w @ ((low + high) / 2) + diff_b, np.abs(diff_w) @ ((high - low) / 2)
    return float(np.min(centre - radius))


def choose_property(onnx_model, x_test, y_test, eps, samples, seed):
    """First correctly classified test image whose eps-box shows no sampled counterexample."""
    preds = evaluate_onnx(onnx_model, x_test.reshape(-1, *IMAGE_SHAPE[1:])).argmax(axis=1)
    rng = np.random.default_rng(seed)
    for position, (image, label) in enumerate(zip(x_test, y_test)):
        if preds[position] != label:
            continue
        lo, hi = box_around(image, eps)
        margin = sampled_min_margin(onnx_model, lo, hi, int(label), samples, rng)
        if margin > 0:
            return position, int(label), lo, hi, margin
        print(f"  test image {position} (label {label}): sampled counterexample, margin {margin:.4g}")
    raise SystemExit(f"no test image is robust at eps={eps} under sampling")


def vnnlib_text(lo, hi, label, eps, dataset_index, test_position):
    lines = [
        "; distcrown default property for examples/digits_mlp.onnx",
        "; generated by scripts/make_default_model.py (do not edit by hand)",
        f"; L-infinity robustness: digits test image {test_position} (load_digits index {dataset_index}),"
        f" label {label}, eps {eps!r}, box clipped to [0, 1]",
        "; the unsafe region is 'another class scores >= the label'; UNSAT means the model is robust",
        "",
    ]
    lines += [f"(declare-const X_{i} Real)" for i in range(lo.size)]
    lines.append("")
    lines += [f"(declare-const Y_{j} Real)" for j in range(NUM_CLASSES)]
    lines += ["", "; input constraints"]
    for i, (low, high) in enumerate(zip(lo, hi)):
        lines.append(f"(assert (<= X_{i} {float(high)!r}))")
        lines.append(f"(assert (>= X_{i} {float(low)!r}))")
    lines += ["", "; unsafe if some other class scores at least as high as the label", "(assert (or"]
    lines += [f"    (and (>= Y_{k} Y_{label}))" for k in range(NUM_CLASSES) if k != label]
    lines.append("))")
    return "\n".join(lines) + "\n"


def write_bytes(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main(argv=None):
    args = parse_args(argv)
    set_determinism(args.seed)

    (x_train, y_train), (x_test, y_test), test_idx = load_data()
    print(f"digits: {len(x_train)} train, {len(x_test)} test (train_test_split, random_state=0)")
    mean, std = float(x_train.mean()), float(x_train.std())
    model = DigitsMLP(mean, std)
    train(model, x_train, y_train, args.epochs, args.seed)
    print(f"train accuracy {accuracy(model, x_train, y_train):.4f}")
    test_acc = accuracy(model, x_test, y_test)
    print(f"test accuracy {test_acc:.4f} ({int(round(test_acc * len(x_test)))}/{len(x_test)})")

    onnx_model = build_onnx(model)
    check_graph_matches_torch(onnx_model, model, x_test)

    position, label, lo, hi, margin = choose_property(
        onnx_model, x_test, y_test, args.eps, args.samples, args.seed)
    print(f"property: test image {position} (load_digits index {int(test_idx[position])}), label {label}, "
          f"eps {args.eps}, sampled minimum margin {margin:.6f} over {args.samples} points + centre")
    ibp = interval_margin_bound(onnx_model, lo, hi, label)
    print(f"interval-arithmetic lower bound on the margin: {ibp:.6f} "
          f"({'proves' if ibp > 0 else 'does not prove'} the property on its own)")

    os.makedirs(args.out_dir, exist_ok=True)
    model_path = os.path.join(args.out_dir, MODEL_NAME)
    prop_path = os.path.join(args.out_dir, PROPERTY_NAME)
    write_bytes(model_path, onnx_model.SerializeToString(deterministic=True))
    onnx.checker.check_model(model_path, full_check=True)
    write_bytes(prop_path, vnnlib_text(lo, hi, label, args.eps, int(test_idx[position]), position).encode("ascii"))
    for path in (model_path, prop_path):
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
