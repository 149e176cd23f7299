#!/usr/bin/env python3
"""oneDNN's conv_transpose2d against LibTorch's im2col kernel (slow_conv_transpose2d) on the CPU.

The dense CROWN step through a Conv is the adjoint of the convolution, a transposed convolution
of the rows' A matrices (src/ops/conv.cpp, `transposed_conv`). This times both kernels, one torch
thread, median of --repeat calls, for the shapes a CNN's layers give (rows, C_out, C_in, the
output map, stride, kernel, padding 1) and prints im2col / oneDNN. The library uses the im2col
kernel where the convolution has at most three input channels, from this table.

Run with the project's venv (the LibTorch the library links):
    ~/.cache/distcrown/venv-torch-2.11.0/bin/python benchmarks/bench_conv_transpose.py
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

SHAPES = [  # (C_out, C_in, map, stride, kernel)
    (8, 3, 16, 2, 3), (8, 3, 16, 2, 4), (16, 3, 16, 2, 4), (32, 3, 16, 2, 4), (8, 3, 32, 1, 3),
    (16, 3, 32, 1, 3), (32, 3, 32, 1, 3), (64, 3, 32, 1, 3), (16, 1, 14, 2, 4), (32, 1, 28, 1, 3),
    (8, 4, 16, 2, 4), (16, 6, 16, 2, 4), (16, 8, 8, 2, 4), (8, 8, 16, 1, 3), (16, 16, 16, 1, 3),
    (32, 16, 8, 2, 3), (32, 32, 8, 1, 3),
]


def median_ms(f, repeat):
    f()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--rows", type=int, nargs="+", default=[1, 10, 100, 300])
    args = p.parse_args()
    torch.set_num_threads(1)
    print("| rows | C_out | C_in | map | stride | kernel | oneDNN ms | im2col ms | im2col / oneDNN |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c_out, c_in, size, stride, kernel in SHAPES:
        for rows in args.rows:
            a = torch.randn(rows, c_out, size, size)
            w = torch.randn(c_out, c_in, kernel, kernel)
            onednn = median_ms(lambda: F.conv_transpose2d(a, w, stride=stride, padding=1),
                               args.repeat)
            im2col = median_ms(lambda: torch._C._nn.slow_conv_transpose2d(
                a, w, [kernel, kernel], None, [stride, stride], [1, 1]), args.repeat)
            print("| %d | %d | %d | %d | %d | %d | %.3f | %.3f | %.2f |" %
                  (rows, c_out, c_in, size, stride, kernel, onednn, im2col, im2col / onednn))


if __name__ == "__main__":
    main()
