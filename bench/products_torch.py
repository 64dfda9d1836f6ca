#!/usr/bin/env python3
"""Problem 2's four projection products alone in PyTorch (cuBLAS, TF32 allowed), timed as bench.py times
a call (cold L2 before every iteration, median of --iters, device time): a yardstick for our products'
kernels alone (`attnbwd lua bench/ab.lua time:grad_attn_out SUITE -` and the like).

    python3 bench/products_torch.py suites/sol072_workload.jsonl [--only 1,13] [--iters 50]

Per workload (M = B*T): gA = grad_output @ out_weight [M,1024]x[1024,1024]; grad_out_weight =
grad_output^T @ attention_output [1024,M]x[M,1024]; grad_hidden = grad_qkv @ qkv_weight [M,3072]x[3072,1024];
grad_qkv_weight = grad_qkv^T @ hidden [3072,M]x[M,1024]. Prints us and TFLOP/s for each, then a copy of
[M,1024] floats and PyTorch's transpose of it.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Timer, load_rows, tf32_matmul  # noqa: E402


def products(m):
    """(name, A's shape, B's shape, A transposed): the operands laid out as the call has them."""
    return [
        ("grad_attn_out", (m, 1024), (1024, 1024), False),
        ("grad_out_weight", (m, 1024), (m, 1024), True),
        ("grad_hidden", (m, 3072), (3072, 1024), False),
        ("grad_qkv_weight", (m, 3072), (m, 1024), True),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite")
    ap.add_argument("--only", default=None, help="workload numbers from 1, as ab.lua's AB_SHAPES")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--delay-cycles", type=int, default=60_000_000)
    args = ap.parse_args()
    timer = Timer(10, args.iters, args.delay_cycles)
    only = {int(x) for x in args.only.split(",")} if args.only else None
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}; us (TFLOP/s), cold L2, "
          f"median of {args.iters}")
    for idx, row in enumerate(load_rows([args.suite]), 1):
        if only and idx not in only:
            continue
        b, t = row["axes"]["batch_size"], row["axes"]["seq_len"]
        m = b * t
        cells = []
        for name, a_shape, b_shape, transpose_a in products(m):
            a, bb = torch.randn(a_shape, device="cuda"), torch.randn(b_shape, device="cuda")
            rows, k = (a_shape[1], a_shape[0]) if transpose_a else a_shape
            flops = 2 * rows * b_shape[1] * k
            out = torch.empty(rows, b_shape[1], device="cuda")

            def fn(a=a, bb=bb, out=out, transpose_a=transpose_a):
                with tf32_matmul(True):
                    torch.matmul(a.t() if transpose_a else a, bb, out=out)
            us = timer.time_us(fn)[0]
            cells.append(f"{name} {us:8.1f} ({flops / us / 1e6:5.1f})")
            del a, bb, out
        # The bytes of one of the transposes of B (grad_output, attention_output, hidden: [M,1024]),
        # copied as they lie and transposed by PyTorch: a yardstick for templates/transpose.cu.
        src = torch.randn(m, 1024, device="cuda")
        dst, dst_t = torch.empty_like(src), torch.empty(1024, m, device="cuda")
        copy_us = timer.time_us(lambda: dst.copy_(src))[0]
        tr_us = timer.time_us(lambda: dst_t.copy_(src.t()))[0]
        cells.append(f"copy {copy_us:6.1f} transpose {tr_us:6.1f} ({2 * src.numel() * 4 / tr_us / 1e6:4.2f} TB/s)")
        del src, dst, dst_t
        print(f"#{idx:<2} B={b:<3} T={t:<5} " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
