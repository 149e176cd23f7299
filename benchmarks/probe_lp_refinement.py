#!/usr/bin/env python3
"""How much an LP (or MIP) refinement of the intermediate bounds would tighten an MLP's bounds, and
what it costs: issue 43's "LP refinement of the first layers through an open-source solver",
probed before building it. For an mnist_fc fixture (Gemm/ReLU chain) and a VNNLIB property:
layer by layer, each neuron that interval arithmetic leaves unstable is minimised and maximised
over the triangle relaxation of every earlier layer (the exact LP; with --mip-layers N, the
unstable neurons of the last N earlier layers as binaries instead), with the bounds found so
far; then the LP lower bound of one output and of each property row Y_label - Y_j. HiGHS through
scipy (the venv's scipy). Prints one line per layer and per row.

  $PY benchmarks/probe_lp_refinement.py --model mnist_256x4.onnx --spec mnist_prop_6_0.03.vnnlib
"""
import argparse
import re
import time

import numpy as np
import onnx
from onnx import numpy_helper
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import csr_matrix, lil_matrix


def load(fixtures, model, spec):
    m = onnx.load(f"{fixtures}/models/{model}")
    init = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    layers = [(init[n.input[1]], init[n.input[2]]) for n in m.graph.node if n.op_type == "Gemm"]
    text = open(f"{fixtures}/specs/{spec}").read()
    n0 = layers[0][0].shape[1]
    lo, hi = np.zeros(n0), np.zeros(n0)
    for op, i, c in re.findall(r"\(assert \((<=|>=) X_(\d+) ([-\d.eE+]+)\)\)", text):
        (hi if op == "<=" else lo)[int(i)] = float(c)
    pairs = [(int(a), int(b)) for a, b in re.findall(r"\(>= Y_(\d+) Y_(\d+)\)", text)]
    return layers, lo, hi, pairs


def interval(l, u, W, b):
    c, r = (l + u) / 2, (u - l) / 2
    return W @ c + b - np.abs(W) @ r, W @ c + b + np.abs(W) @ r


class Relaxation:
    """Variables x (the input) and a_j = relu(z_j) of the first k layers; z_j = W_j a_{j-1} + b_j."""

    def __init__(self, layers, lo, hi, bounds, k, binary_layers):
        widths = [lo.size] + [layers[j][0].shape[0] for j in range(k)]
        self.offset = np.cumsum([0] + widths)
        n = int(self.offset[-1])
        rows_ub, rows_eq = [], []
        lb = np.concatenate([lo] + [np.zeros(w) for w in widths[1:]])
        ub = np.concatenate([hi] + [np.zeros(w) for w in widths[1:]])
        binaries = []
        for j in range(k):
            W, b = layers[j]
            l, u = bounds[j]
            prev, here = self.offset[j], self.offset[j + 1]
            z = {prev + t: W[:, t] for t in range(W.shape[1])}
            for i in range(W.shape[0]):
                v = here + i
                if u[i] <= 0:
                    continue
                ub[v] = u[i]
                zi = {key: col[i] for key, col in z.items()}
                if l[i] >= 0:  # a = z
                    rows_eq.append(({v: 1.0, **{key: -c for key, c in zi.items()}}, b[i]))
                    continue
                rows_ub.append(({v: -1.0, **zi}, -b[i]))  # a >= z
                if j >= k - binary_layers:
                    d = n + len(binaries)
                    binaries.append(d)
                    rows_ub.append(({v: 1.0, d: -l[i], **{key: -c for key, c in zi.items()}}, b[i] - l[i]))
                    rows_ub.append(({v: 1.0, d: -u[i]}, 0.0))
                else:  # a <= u (z - l) / (u - l)
                    s = u[i] / (u[i] - l[i])
                    rows_ub.append(({v: 1.0, **{key: -s * c for key, c in zi.items()}}, s * (b[i] - l[i])))
        self.n = n + len(binaries)
        self.A_ub, self.b_ub = self._matrix(rows_ub)
        self.A_eq, self.b_eq = self._matrix(rows_eq)
        self.lb = np.concatenate([lb, np.zeros(len(binaries))])
        self.ub = np.concatenate([ub, np.ones(len(binaries))])
        self.integrality = np.concatenate([np.zeros(n), np.ones(len(binaries))])
        self.mip = bool(binaries)

    def _matrix(self, rows):
        M = lil_matrix((len(rows), self.n))
        rhs = np.zeros(len(rows))
        for q, (r, c) in enumerate(rows):
            for key, val in r.items():
                M[q, key] = val
            rhs[q] = c
        return csr_matrix(M), rhs

    def minimise(self, c, time_limit):
        A_ub, A_eq = self.A_ub, self.A_eq
        if self.mip:
            r = milp(c, constraints=[LinearConstraint(A_ub, -np.inf, self.b_ub), LinearConstraint(A_eq, self.b_eq, self.b_eq)],
                     bounds=Bounds(self.lb, self.ub), integrality=self.integrality,
                     options={"time_limit": time_limit})
            return r.fun if r.status == 0 else getattr(r, "mip_dual_bound", None)
        r = linprog(c, A_ub=A_ub, b_ub=self.b_ub, A_eq=A_eq, b_eq=self.b_eq,
                    bounds=list(zip(self.lb, self.ub)), method="highs")
        return r.fun


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", default="../shared/fixtures")
    ap.add_argument("--model", default="mnist_256x4.onnx")
    ap.add_argument("--spec", default="mnist_prop_6_0.03.vnnlib")
    ap.add_argument("--mip-layers", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=0.5, help="s per MIP")
    ap.add_argument("--label", type=int, default=None, help="the output bounded alone (default: the property's)")
    a = ap.parse_args()
    layers, lo, hi, pairs = load(a.fixtures, a.model, a.spec)
    bounds = [interval(lo, hi, *layers[0])]
    start = time.time()
    for k in range(1, len(layers)):
        W, b = layers[k]
        il, iu = interval(np.maximum(bounds[-1][0], 0), np.maximum(bounds[-1][1], 0), W, b)
        rel = Relaxation(layers, lo, hi, bounds, k, a.mip_layers if k < len(layers) - 1 else 0)
        head = rel.offset[k]
        if k == len(layers) - 1:
            label = a.label if a.label is not None else pairs[0][1]
            for name, row, const in [(f"Y_{label}", W[label], b[label])] + [
                    (f"Y_{lab}-Y_{j}", W[lab] - W[j], b[lab] - b[j]) for j, lab in pairs]:
                c = np.zeros(rel.n)
                c[head:head + W.shape[1]] = row
                print(f"{name}: LP lower {rel.minimise(c, a.time_limit) + const:.4f}", flush=True)
            break
        l, u = il.copy(), iu.copy()
        t = time.time()
        for i in np.flatnonzero((il < 0) & (iu > 0)):
            c = np.zeros(rel.n)
            c[head:head + W.shape[1]] = W[i]
            low, high = rel.minimise(c, a.time_limit), rel.minimise(-c, a.time_limit)
            if low is not None:
                l[i] = max(l[i], low + b[i])
            if high is not None:
                u[i] = min(u[i], -high + b[i])
        bounds.append((l, u))
        print(f"layer {k}: unstable {int(((il < 0) & (iu > 0)).sum())} (interval) -> "
              f"{int(((l < 0) & (u > 0)).sum())}, mean width {np.mean(u - l):.3f}, {time.time() - t:.1f} s", flush=True)
    print(f"total {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
