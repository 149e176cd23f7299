#!/usr/bin/env python3
"""VNN-LIB 2.0 properties through VNN-COMP's harness (vnncomp/), every sat answer re-checked
outside distcrown.

For every model of DIR/onnx and every property of DIR/vnnlib (e.g. the monotonic_acasxu_2026
benchmark's repository, github:lukasmrohwer/acasxu-equivalent-networks-benchmark: two copies of
an ACAS Xu network per property), runs prepare_instance.sh and run_instance.sh exactly as the
competition does, timing each, and checks each counterexample with onnx's own reference evaluator
(not distcrown's code): every assertion of the property evaluated at the reported inputs and
outputs, the outputs recomputed by the evaluator in float32. First, the harness's overhead: the
wall time of prepare + run on an instance decided at once (the example model with an always-true
unsafe set), as VNN-COMP measures it.

    python3 benchmarks/bench_vnnlib2.py --dir /work/mono --timeout 100 [--csv out.csv]

Prints one row per instance and a summary per property; a wrong answer is a sat whose check
fails.
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def harness(script, *args, env):
    return subprocess.run(["bash", os.path.join(ROOT, "vnncomp", script), "v1", *args],
                          env=env, capture_output=True, text=True)


def decide(onnx_path, vnnlib, timeout, env, result):
    t0 = time.monotonic()
    prep = harness("prepare_instance.sh", "bench", onnx_path, vnnlib, env=env)
    t1 = time.monotonic()
    run = harness("run_instance.sh", "bench", onnx_path, vnnlib, result, str(timeout), env=env)
    t2 = time.monotonic()
    text = open(result).read() if os.path.exists(result) else ""
    if prep.returncode != 0:
        text = "error\n" + prep.stderr
    elif run.returncode != 0 and not text:
        text = "error\n" + run.stderr
    return text, t1 - t0, t2 - t1


# --- An independent reading of the assertions (a small s-expression evaluator) ----------------

def tokens(text):
    text = re.sub(r";[^\n]*", "", text)
    text = re.sub(r"\[([^\]]*)\]", lambda m: "[" + m.group(1).replace(" ", "") + "]", text)
    return text.replace("(", " ( ").replace(")", " ) ").split()


def parse(toks):
    out, stack = [], []
    for t in toks:
        if t == "(":
            stack.append([])
        elif t == ")":
            e = stack.pop()
            (stack[-1] if stack else out).append(e)
        else:
            (stack[-1] if stack else out).append(t)
    return out


def value(e, v):
    if isinstance(e, str):
        return v[e] if e in v else float(e)
    op, args = e[0], [value(a, v) for a in e[1:]]
    if op == "+":
        return sum(args)
    if op == "-":
        return -args[0] if len(args) == 1 else args[0] - sum(args[1:])
    if op == "*":
        return float(np.prod(args))
    raise ValueError(op)


COMPARE = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "=": lambda a, b: a == b,
           "!=": lambda a, b: a != b}


def holds(e, v):
    if e[0] == "and":
        return all(holds(a, v) for a in e[1:])
    if e[0] == "or":
        return any(holds(a, v) for a in e[1:])
    if e[0] in COMPARE:  # prefix
        return COMPARE[e[0]](value(e[1], v), value(e[2], v))
    return COMPARE[e[1]](value(e[0], v), value(e[2], v))  # infix


def check_sat(onnx_path, vnnlib, result):
    """(ok, why): the reported inputs satisfy every assertion with the evaluator's outputs."""
    v = {}
    for line in result.splitlines()[1:]:
        name, _, x = line.partition("=")
        v[name.strip()] = float(x)
    model = onnx.load(onnx_path)
    inits = {i.name for i in model.graph.initializer}
    (inp,) = [i for i in model.graph.input if i.name not in inits]
    shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
    ev = ReferenceEvaluator(model)
    tree = parse(tokens(open(vnnlib).read()))
    nets = [e for e in tree if e[0] == "declare-network"]
    for net in nets:
        decl = {d[0]: d for d in net[1:] if isinstance(d, list)}
        x_name, y_name = decl["declare-input"][1], decl["declare-output"][1]
        xs = sorted((k for k in v if k.startswith(x_name + "[")),
                    key=lambda k: [int(i) for i in k[len(x_name) + 1:-1].split(",")])
        x = np.array([v[k] for k in xs], dtype=np.float32).reshape(shape)
        y = ev.run(None, {inp.name: x})[0].reshape(-1)
        ys = sorted((k for k in v if k.startswith(y_name + "[")),
                    key=lambda k: [int(i) for i in k[len(y_name) + 1:-1].split(",")])
        for k, yk in zip(ys, y):
            if abs(v[k] - float(yk)) > 1e-4 + 1e-3 * abs(float(yk)):
                return False, f"{k} reported {v[k]}, the evaluator gives {yk}"
            v[k] = float(yk)
    for e in tree:
        if e[0] == "assert" and not holds(e[1], v):
            return False, "an assertion fails: " + str(e[1])[:120]
    return True, ""


OVERHEAD = "harness overhead (example, sat at once)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="folder with onnx/ and vnnlib/")
    ap.add_argument("--timeout", type=float, default=100)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"))
    ap.add_argument("--csv")
    a = ap.parse_args()
    env = dict(os.environ, DISTCROWN_BIN=a.binary)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env["DISTCROWN_VNNCOMP_STATE"] = os.path.join(tmp, "state")
        result = os.path.join(tmp, "result.txt")
        trivial = os.path.join(tmp, "trivial.vnnlib")
        with open(os.path.join(ROOT, "examples", "digits_mlp_prop.vnnlib")) as f:
            decls = "".join(line for line in f if line.startswith(("(declare", "(assert (<= X",
                                                                   "(assert (>= X")))
        with open(trivial, "w") as f:
            f.write(decls + "(assert (<= Y_0 1e9))\n")
        model = os.path.join(ROOT, "examples", "digits_mlp.onnx")
        for _ in range(5):
            text, prep_s, run_s = decide(model, trivial, 60, env, result)
            assert text.startswith("sat"), text
            rows.append({"property": OVERHEAD, "model": "digits_mlp.onnx", "result": "sat",
                         "prepare_s": round(prep_s, 3), "run_s": round(run_s, 3), "wrong": 0,
                         "why": ""})
        print(f"{OVERHEAD}: prepare {statistics.median(r['prepare_s'] for r in rows):.3f} s, "
              f"run {statistics.median(r['run_s'] for r in rows):.3f} s (median of 5)")
        for prop in sorted(os.listdir(os.path.join(a.dir, "vnnlib"))):
            vnnlib = os.path.join(a.dir, "vnnlib", prop)
            for net in sorted(os.listdir(os.path.join(a.dir, "onnx"))):
                onnx_path = os.path.join(a.dir, "onnx", net)
                text, prep_s, run_s = decide(onnx_path, vnnlib, a.timeout, env, result)
                verdict = text.split("\n", 1)[0].strip()
                ok, why = check_sat(onnx_path, vnnlib, text) if verdict == "sat" else (True, "")
                rows.append({"property": prop, "model": net, "result": verdict,
                             "prepare_s": round(prep_s, 3), "run_s": round(run_s, 3),
                             "wrong": 0 if ok else 1, "why": why})
                print(f"{prop:24} {net:36} {verdict:8} {run_s:7.2f} s" + (f"  WRONG: {why}"
                                                                            if not ok else ""))
                sys.stdout.flush()
    print(f"\n{'property':24} {'n':>3} {'sat':>4} {'unsat':>5} {'other':>5} {'wrong':>5} "
          f"{'median run s':>12}")
    for prop in sorted({r["property"] for r in rows if r["property"] != OVERHEAD}):
        rs = [r for r in rows if r["property"] == prop]
        count = lambda v: sum(r["result"] == v for r in rs)
        print(f"{prop:24} {len(rs):3} {count('sat'):4} {count('unsat'):5} "
              f"{len(rs) - count('sat') - count('unsat'):5} {sum(r['wrong'] for r in rs):5} "
              f"{statistics.median(r['run_s'] for r in rs):12.2f}")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
