#!/usr/bin/env python3
"""Benchmark of attnbwd against PyTorch eager, torch.compile and the floor.

Run (on the GPU machine, from the repository root):

    python3 bench/bench.py --lib build/libattnbwd.so suites/sol066_workload.jsonl \
        --json out.json --png out.png

Problem 2 (edit attention backward; rows without n_heads):

    python3 bench/bench.py --lib build/libattnbwd.so suites/sol072_workload.jsonl

Quick try:  python3 bench/bench.py --quick suites/sol072_workload.jsonl   (= --only 3 --iters 10 --warmup 3)
No GPU:     python3 bench/bench.py --dry-run suites/*.jsonl   (the workloads, their tools and work; no PyTorch)
Options:    --tools ours,ours_fp16,ours_graph,eager,compile,eager_tf32,compile_tf32,eager_fp16,compile_fp16
            --iters 50   --warmup 10   --only N|i,j,k   --quick   --profile   --profile-calls 5   --dry-run
            --no-check   --seed 0   --copy-gib 4   --delay-cycles N (default: problem 1 1e6, problem 2 2e7)   --precision tf32|fp32|fp16 (problem 2)
Tools:      by default problem 1 runs ours,eager,compile and problem 2 ours,ours_fp16,eager_tf32,compile_tf32,
            eager_fp16,compile_fp16; a problem skips the tools of --tools that it has not. eager and compile run
            the reference in fp32 (PyTorch's default, allow_tf32 False), the _tf32 ones with
            torch.backends.cuda.matmul.allow_tf32 = True ("torch.compile (TF32 allowed)"), the _fp16 ones under
            torch.autocast("cuda", torch.float16) with the outputs cast back to fp32 (problem 2 only: problem 1
            has no matrix product for autocast to change, and its 1e-5 tolerance rules fp16 out). ours runs
            --precision, ours_fp16 ATTNBWD_PRECISION_FP16. ours_graph (problem 2): our call captured once in a
            torch CUDA graph and replayed, as a training loop's graph would hold it (ours replays a graph of its
            own from the second call with the same arguments: the two should match). Every tool's output is
            checked, and a tool that fails the rule is timed and shown as FAIL, not left out.
--profile:  for each tool, torch.profiler (CUPTI, CUDA activities) around --profile-calls calls, each after the
            flush: the kernel with the largest share of the busy time (the union of the tool's kernels; where
            kernels run side by side each gets an even part of the stretch), its share, kernels per call, and
            the summed kernel time a call (past the busy time where lanes overlap, under the tool's time where
            the GPU waited between its kernels).

What it does, in one process:
  * loads libattnbwd with ctypes, opens a context, gets one kernel per workload;
  * for every workload of the suite file(s) draws inputs as the public benchmark does, runs each tool
    once on a NaN-filled output and checks it against a float64 reference (|out-ref| <= atol + rtol*|ref|
    on >= 99% of the elements, no NaN/Inf; problem 2: on each of its 8 outputs, >= the row's
    required_match_ratio (0.98), the worst output reported);
  * times every tool the same way: L2 flushed (a 2x-L2 buffer zeroed) before EVERY iteration, 10 warm-ups,
    median of 50, device time from a CUDA event pair recorded after the flush, around the tool's work alone
    (a GPU-side spin after the flush hides the host's launch overhead: see Timer);
  * measures, in the same run and the same way, the copy bandwidth (a large device-to-device copy, bytes
    read + written) and the cost of one minimal kernel; floor = floor bytes / copy bandwidth and
    reachable = max(floor, minimal kernel). Problem 2 has matrix work too: the run also measures the TF32
    and fp16 rates (8192^3 torch.matmuls, median of 10) and its floor = max(matrix flops / TF32 rate, floor
    bytes / copy bandwidth) (docs/spec/edit_attention_bwd.md, "Work that must be done"), the fp16 floor the
    same at the fp16 rate; matrix flops = 2 * (B*T*8*2^20 + 4*B*16*T*T*64) (EditAttentionBwd.flop_formula),
    achieved TFLOP/s = matrix flops / time;
  * prints a table (and geometric means) per problem, writes JSON and a PNG of the fraction of the floor reached
    (a subplot per problem).

Problems are small classes (make_inputs, ours, torch reference, check, floor_bytes, floor_flops for matrix
work) listed in PROBLEMS; a row goes to the first that accepts it (problem 1: axes with n_heads; problem 2:
batch_size and seq_len without n_heads).
"""

import argparse
import contextlib
import ctypes
import datetime
import gc
import json
import math
import os
import platform
import statistics
import sys
import time

try:
    import torch
except ImportError:  # --dry-run, and the report helpers the tests call, need no PyTorch
    torch = None

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The ctypes binding of include/attnbwd.h is the attnbwd package's (python/attnbwd/binding.py, checked against the
# header by tests/check_ctypes_layout.py), taken from this tree: bench.py times the library named by --lib.
sys.path.insert(0, os.path.join(REPO, "python"))
from attnbwd import binding  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import fmt, geomean, tool_check, tool_value  # noqa: E402
from attnbwd.binding import (ATTNBWD_EDIT_ATTENTION_BWD, ATTNBWD_OK, ATTNBWD_SOFTMAX_DROPOUT_BWD,  # noqa: E402
                             EDIT_INPUTS, EDIT_OUTPUTS, ORIGINS, EditAttentionArgs, KernelInfo, Options, Shape)


class AttnbwdError(RuntimeError):
    pass


class Library:
    """libattnbwd loaded with ctypes, with one open context."""

    def __init__(self, path, device=0):
        self.path = path
        lib = binding.load(path)  # every prototype of the header set
        self.lib = lib

        opt = Options()
        lib.attnbwd_options_init(ctypes.byref(opt))
        opt.device = device
        ctx = ctypes.c_void_p()
        self.check(lib.attnbwd_open(ctypes.byref(opt), ctypes.byref(ctx)), "attnbwd_open")
        self.ctx = ctx

    def check(self, status, what):
        if status != ATTNBWD_OK:
            name = self.lib.attnbwd_status_name(status).decode()
            msg = (self.lib.attnbwd_last_error() or b"").decode(errors="replace")
            raise AttnbwdError(f"{what}: {name}: {msg}")

    def get_kernel(self, shape):
        """Returns (kernel handle, info dict, seconds spent in attnbwd_get_kernel)."""
        k = ctypes.c_void_p()
        t0 = time.perf_counter()
        self.check(self.lib.attnbwd_get_kernel(self.ctx, ctypes.byref(shape), ctypes.byref(k)),
                   "attnbwd_get_kernel")
        seconds = time.perf_counter() - t0
        info = KernelInfo()
        self.check(self.lib.attnbwd_kernel_get_info(k, ctypes.byref(info)), "attnbwd_kernel_get_info")

        def s(b):
            return b.decode() if b else None

        return k, {
            "name": s(info.name),
            "arch": s(info.arch),
            "grid": list(info.grid),
            "block": list(info.block),
            "shared_bytes": info.shared_bytes,
            "tiles": s(info.tiles),
            "unordered_outputs": info.unordered_outputs,
            "cache_key": s(info.cache_key),
            "origin": ORIGINS.get(info.origin, str(info.origin)),
            "build_seconds": info.build_seconds,
            "cubin_bytes": info.cubin_bytes,
            "get_kernel_seconds": seconds,
        }

    def close(self):
        if self.ctx:
            self.lib.attnbwd_close(self.ctx)
            self.ctx = None


def stream_handle():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream or None)


# ----------------------------------------------------------------------------------------------
# Problems
# ----------------------------------------------------------------------------------------------

@contextlib.contextmanager
def tf32_matmul(enabled):
    """torch.backends.cuda.matmul.allow_tf32 set to enabled inside, restored after."""
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def softmax_dropout_bwd_torch(grad_output, p_attn, mask, dropout_mask, p_dropout):
    """The spec's formula in PyTorch, fp32, bool masks (eager reference; also what torch.compile gets)."""
    if p_dropout > 0:
        gp = grad_output * dropout_mask / (1.0 - p_dropout)
    else:
        gp = grad_output
    s = (p_attn * gp).sum(-1, keepdim=True)
    return (p_attn * (gp - s)).masked_fill(~mask, 0.0)  # mask [B,1,T,T] broadcasts over heads


class SoftmaxDropoutBwd:
    """Problem 1: masked softmax with attention dropout, backward (spec: softmax_dropout_bwd.md)."""

    name = "softmax_dropout_bwd"
    torch_fn = staticmethod(softmax_dropout_bwd_torch)
    # The default tools, and those it can run. No _fp16 peers: autocast changes no op of this formula (it has no
    # matrix product), and the rule's atol = rtol = 1e-5 leaves no room for fp16 storage.
    tools = ("ours", "eager", "compile")
    delay_cycles = 1_000_000  # the spin of Timer: longer than any tool's host enqueue (under 0.5 ms)
    label_name = "B,H,T,p"

    @staticmethod
    def accepts(row):
        return "n_heads" in row["axes"]

    @staticmethod
    def dims(row):
        a = row["axes"]
        return a["batch_size"], a["n_heads"], a["seq_len"], float(row["inputs"]["p_dropout"]["value"])

    def label(self, row):
        B, H, T, p = self.dims(row)
        return f"{B},{H},{T},{p:g}"

    def axes(self, row):
        B, H, T, p = self.dims(row)
        return {"B": B, "H": H, "T": T, "p": p}

    def floor_bytes(self, row):
        B, H, T, p = self.dims(row)
        n = B * H * T * T
        return n * (4 + 4 + 4 + (1 if p > 0 else 0)) + B * T * T

    def make_inputs(self, row, seed):
        B, H, T, p = self.dims(row)
        dev = torch.device("cuda")
        g = torch.Generator(device=dev)
        g.manual_seed(seed)
        grad_output = torch.randn(B, H, T, T, device=dev, generator=g)
        p_attn = torch.randn(B, H, T, T, device=dev, generator=g).softmax(dim=-1)
        mask = torch.randint(0, 2, (B, 1, T, T), device=dev, dtype=torch.uint8, generator=g).bool()
        dropout_mask = torch.randint(0, 2, (B, H, T, T), device=dev, dtype=torch.uint8, generator=g).bool()
        return {"grad_output": grad_output, "p_attn": p_attn, "mask": mask,
                "dropout_mask": dropout_mask, "p_dropout": p}

    def make_ours(self, lib, row, inputs):
        """Returns (zero-arg callable launching our kernel, output tensor, kernel info)."""
        B, H, T, p = self.dims(row)
        shape = Shape(problem=ATTNBWD_SOFTMAX_DROPOUT_BWD, batch=B, heads=H, seq_len=T,
                      dropout=1 if p > 0 else 0, precision=0)
        kernel, info = lib.get_kernel(shape)
        out = torch.empty_like(inputs["grad_output"])
        args = (kernel,
                inputs["grad_output"].data_ptr(), inputs["p_attn"].data_ptr(),
                inputs["mask"].data_ptr(), inputs["dropout_mask"].data_ptr(),
                ctypes.c_float(p), out.data_ptr())
        launch = lib.lib.attnbwd_softmax_dropout_bwd

        def run():
            status = launch(*args, stream_handle())
            if status != ATTNBWD_OK:
                lib.check(status, "attnbwd_softmax_dropout_bwd")
            return out

        return run, out, info

    @staticmethod
    def reference64(inputs, b):
        """float64 reference of batch row b: [H, T, T]."""
        p = inputs["p_dropout"]
        go = inputs["grad_output"][b].double()
        pa = inputs["p_attn"][b].double()
        gp = go * inputs["dropout_mask"][b] / (1.0 - p) if p > 0 else go
        s = (pa * gp).sum(-1, keepdim=True)
        return (pa * (gp - s)).masked_fill(~inputs["mask"][b], 0.0)

    def check(self, row, inputs, out):
        """Acceptance rule of the public benchmark; the reference is computed one batch row at a time."""
        tol = row.get("tolerance", {})
        atol = float(tol.get("max_atol", 1e-5))
        rtol = float(tol.get("max_rtol", 1e-5))
        need = float(tol.get("required_match_ratio", 0.99))
        finite = bool(torch.isfinite(out).all())
        passed = 0
        max_abs = 0.0
        for b in range(out.shape[0]):
            ref = self.reference64(inputs, b)
            diff = (out[b].double() - ref).abs()
            passed += int((diff <= atol + rtol * ref.abs()).sum())
            max_abs = max(max_abs, float(diff.nan_to_num(nan=math.inf).max()))
            del ref, diff
        ratio = passed / out.numel()
        return {"pass": finite and ratio >= need, "finite": finite, "match_ratio": ratio,
                "required_ratio": need, "max_abs_err": max_abs, "atol": atol, "rtol": rtol}


def edit_attention_bwd_torch(grad_output, hidden_states, edit_region_mask, qkv_weight, qkv_bias, out_weight,
                             out_bias, edit_region_bias, within_edit_bias, cross_edit_bias, attention_mask, query,
                             key, value, attention_scores, attention_probs, attention_probs_dropped,
                             attention_output, dropout_mask, scale, dropout_p):
    """The spec's backward formulas in PyTorch, in the inputs' dtype (fp32 for eager and torch.compile, float64
    for the reference). Returns the 8 gradients in the spec's order. qkv_bias, out_bias, edit_region_bias's values
    and attention_scores are not needed."""
    B, T, C = grad_output.shape
    H, D = query.shape[1], query.shape[3]
    go = grad_output.reshape(B * T, C)
    grad_out_weight = go.t() @ attention_output.reshape(B * T, C)
    grad_out_bias = go.sum(0)
    gA = (go @ out_weight).view(B, T, H, D).transpose(1, 2)  # [B,H,T,D]
    gPd = gA @ value.transpose(-1, -2)
    gV = attention_probs_dropped.transpose(-1, -2) @ gA
    gP = gPd * dropout_mask / (1.0 - dropout_p) if dropout_p > 0 else gPd
    gS = attention_probs * (gP - (gP * attention_probs).sum(-1, keepdim=True))
    gS = gS.masked_fill(attention_mask[:, None, None, :] == 0, 0.0)
    mi = edit_region_mask[:, None, :, None]  # query i
    mj = edit_region_mask[:, None, None, :]  # key j
    grad_within = (gS * (mi * mj)).sum((0, 2, 3)).reshape(within_edit_bias.shape)
    grad_cross = (gS * (mi * (1 - mj) + (1 - mi) * mj)).sum((0, 2, 3)).reshape(cross_edit_bias.shape)
    P = edit_region_bias.shape[-1]
    grad_edit_region_bias = torch.nn.functional.pad(gS.sum(0), (0, P - T, 0, P - T))  # zeros outside [:T,:T]
    gS = gS * scale
    gQ = gS @ key
    gK = gS.transpose(-1, -2) @ query
    # [3,B,H,T,D] -> [B,T,3,H,D]: column which*1024 + h*64 + d of qkv
    grad_qkv = torch.stack((gQ, gK, gV)).permute(1, 3, 0, 2, 4).reshape(B * T, 3 * H * D)
    grad_hidden_states = (grad_qkv @ qkv_weight).view(B, T, C)
    grad_qkv_weight = grad_qkv.t() @ hidden_states.reshape(B * T, C)
    grad_qkv_bias = grad_qkv.sum(0)
    return (grad_hidden_states, grad_qkv_weight, grad_qkv_bias, grad_out_weight, grad_out_bias,
            grad_edit_region_bias, grad_within, grad_cross)


class EditAttentionBwd:
    """Problem 2: region-aware self-attention with edit bias, backward (spec: edit_attention_bwd.md).

    Matrix work as well as memory: the floor is max(matrix work / TF32 rate, bytes / copy bandwidth), both rates
    measured in the same run."""

    name = "edit_attention_bwd"
    torch_fn = staticmethod(edit_attention_bwd_torch)
    tools = ("ours", "ours_fp16", "ours_graph", "eager", "eager_tf32", "compile_tf32", "compile", "eager_fp16",
             "compile_fp16")
    default_tools = ("ours", "ours_fp16", "eager_tf32", "compile_tf32", "eager_fp16", "compile_fp16")
    delay_cycles = 20_000_000  # about 10 ms: eager's dozens of launches (and autocast's casts) enqueue within it
    label_name = "B,T"
    heads, head_dim, hidden, positions = 16, 64, 1024, 1024
    precision = 0  # attnbwd_precision of our kernel, set by --precision
    ref_slice_bytes = 512 << 20  # float64 reference: batch rows per slice so that a [b,16,T,T] tensor fits this
    batched = ("grad_output", "hidden_states", "edit_region_mask", "attention_mask", "query", "key", "value",
               "attention_scores", "attention_probs", "attention_probs_dropped", "attention_output", "dropout_mask")

    def __init__(self):
        self._ref = None  # (inputs, float64 reference): computed once per workload, shared by the tools

    @staticmethod
    def accepts(row):
        a = row["axes"]
        return "n_heads" not in a and "batch_size" in a and "seq_len" in a

    @staticmethod
    def dims(row):
        a = row["axes"]
        return a["batch_size"], a["seq_len"]

    def label(self, row):
        B, T = self.dims(row)
        return f"{B},{T}"

    def axes(self, row):
        B, T = self.dims(row)
        return {"B": B, "T": T}

    flop_formula = "2 * (B*T*8*2^20 + 4*B*16*T*T*64)"

    def floor_flops(self, row):
        """The spec's matrix work ("Work that must be done"), 2 flops per multiply-add: the four projection
        products (B*T*8*2^20 multiply-adds) and the four attention ones (4*B*16*T*T*64): flop_formula."""
        B, T = self.dims(row)
        return 2 * (B * T * 8 * 2**20 + 4 * B * self.heads * T * T * self.head_dim)

    def floor_bytes(self, row):
        """probs and probs_dropped read once, the 64 MiB grad_edit_region_bias written."""
        B, T = self.dims(row)
        return 2 * B * self.heads * T * T * 4 + self.heads * self.positions * self.positions * 4

    def make_inputs(self, row, seed):
        """As the public benchmark draws them; the forward tensors in fp32 PyTorch (no TF32)."""
        self._ref = None
        B, T = self.dims(row)
        H, D, C, P = self.heads, self.head_dim, self.hidden, self.positions
        dev = torch.device("cuda")
        g = torch.Generator(device=dev)
        g.manual_seed(seed)

        def randn(*shape):
            return torch.randn(*shape, device=dev, generator=g)

        x = {
            "grad_output": randn(B, T, C),
            "hidden_states": randn(B, T, C),
            "edit_region_mask": torch.randint(0, 2, (B, T), device=dev, generator=g).float(),
            "qkv_weight": 0.02 * randn(3 * C, C),
            "qkv_bias": torch.zeros(3 * C, device=dev),
            "out_weight": 0.02 * randn(C, C),
            "out_bias": torch.zeros(C, device=dev),
            "edit_region_bias": 0.02 * randn(H, P, P),
            "within_edit_bias": 0.02 * randn(H, 1, 1),
            "cross_edit_bias": 0.02 * randn(H, 1, 1),
            "attention_mask": torch.ones(B, T, device=dev),
        }
        scale, p = 1.0 / 8.0, 0.1
        with tf32_matmul(False):
            qkv = x["hidden_states"] @ x["qkv_weight"].t() + x["qkv_bias"]  # [B,T,3072]
            qkv = qkv.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)  # [3,B,H,T,D]
            q, k, v = (qkv[i].contiguous() for i in range(3))
            del qkv
            mi = x["edit_region_mask"][:, None, :, None]
            mj = x["edit_region_mask"][:, None, None, :]
            within = mi * mj
            cross = mi * (1 - mj) + (1 - mi) * mj
            scores = (q @ k.transpose(-1, -2)) * scale + x["edit_region_bias"][:, :T, :T]
            scores += x["within_edit_bias"] * within + x["cross_edit_bias"] * cross  # [H,1,1] * [B,1,T,T]
            del within, cross
            scores.masked_fill_(x["attention_mask"][:, None, None, :] == 0, float("-inf"))
            probs = scores.softmax(dim=-1)
            dropout_mask = (torch.rand(B, H, T, T, device=dev, generator=g) > p).float()
            probs_dropped = probs * dropout_mask / (1.0 - p)
            attention_output = (probs_dropped @ v).transpose(1, 2).reshape(B, T, C)
        x.update({"query": q, "key": k, "value": v, "attention_scores": scores, "attention_probs": probs,
                  "attention_probs_dropped": probs_dropped, "attention_output": attention_output,
                  "dropout_mask": dropout_mask, "scale": scale, "dropout_p": p})
        return x

    def make_ours(self, lib, row, inputs, precision=None):
        """Returns (zero-arg callable launching our kernel, list of the 8 output tensors, kernel info). precision:
        an attnbwd_precision (ours_fp16), else --precision's."""
        if not hasattr(lib.lib, "attnbwd_edit_attention_bwd"):
            raise RuntimeError(f"{lib.path} has no attnbwd_edit_attention_bwd")
        B, T = self.dims(row)
        p = inputs["dropout_p"]
        precision = self.precision if precision is None else precision
        shape = Shape(problem=ATTNBWD_EDIT_ATTENTION_BWD, batch=B, heads=self.heads, seq_len=T,
                      dropout=1 if p > 0 else 0, precision=precision)
        kernel, info = lib.get_kernel(shape)
        ws_bytes = lib.lib.attnbwd_edit_attention_workspace(kernel)
        info["workspace_bytes"] = ws_bytes
        workspace = torch.empty(ws_bytes, dtype=torch.uint8, device="cuda")  # torch allocations: 512-byte aligned
        dev = workspace.device
        outs = [torch.empty_like(inputs["hidden_states"]), torch.empty_like(inputs["qkv_weight"]),
                torch.empty_like(inputs["qkv_bias"]), torch.empty_like(inputs["out_weight"]),
                torch.empty_like(inputs["out_bias"]), torch.empty_like(inputs["edit_region_bias"]),
                torch.empty(self.heads, device=dev), torch.empty(self.heads, device=dev)]
        a = EditAttentionArgs()
        for name in EDIT_INPUTS:
            setattr(a, name, inputs[name].data_ptr())
        a.scale = inputs["scale"]
        a.dropout_p = p
        for name, t in zip(EDIT_OUTPUTS, outs):
            setattr(a, name, t.data_ptr())
        a.workspace = workspace.data_ptr() if ws_bytes else None
        a.workspace_bytes = ws_bytes
        launch = lib.lib.attnbwd_edit_attention_bwd

        def run():
            status = launch(kernel, ctypes.byref(a), stream_handle())
            if status != ATTNBWD_OK:
                lib.check(status, "attnbwd_edit_attention_bwd")
            return outs

        run.workspace = workspace  # alive as long as the launches
        info["precision"] = {v: k for k, v in PRECISIONS.items()}.get(precision, str(precision))
        return run, outs, info

    def reference64(self, inputs):
        """float64 reference (inputs upcast), computed over slices of the batch so that each [b,16,T,T] float64
        intermediate stays near 512 MiB; the gradients of the shared parameters are summed over the slices."""
        if self._ref is not None and self._ref[0] is inputs:
            return self._ref[1]
        B, T = inputs["grad_output"].shape[:2]
        step = max(1, self.ref_slice_bytes // (self.heads * T * T * 8))
        total = None
        for b0 in range(0, B, step):
            x = {}
            for name, v in inputs.items():
                if name == "attention_scores":
                    x[name] = None  # not needed: no float64 copy
                elif name in self.batched:
                    x[name] = v[b0:b0 + step].double()
                elif torch.is_tensor(v):
                    x[name] = v.double()
                else:
                    x[name] = v
            outs = list(edit_attention_bwd_torch(**x))
            del x
            if total is None:
                total = [[outs[0]]] + outs[1:]
            else:
                total[0].append(outs[0])
                for i in range(1, len(outs)):
                    total[i] += outs[i]
        ref = [torch.cat(total[0])] + total[1:]
        self._ref = (inputs, ref)
        return ref

    def check(self, row, inputs, out):
        """The public benchmark's rule on each of the 8 outputs; the result is that of the worst output."""
        tol = row.get("tolerance", {})
        atol = float(tol.get("max_atol", 1e-5))
        rtol = float(tol.get("max_rtol", 1e-5))
        need = float(tol.get("required_match_ratio", 0.98))
        ref = self.reference64(inputs)
        per = {}
        for name, o, r in zip(EDIT_OUTPUTS, out, ref):
            o, r = o.reshape(-1), r.reshape(-1)
            if o.numel() != r.numel():
                raise RuntimeError(f"{name}: {o.numel()} elements, the reference has {r.numel()}")
            finite = bool(torch.isfinite(o).all())
            diff = (o.double() - r).abs()
            ratio = int((diff <= atol + rtol * r.abs()).sum()) / max(1, r.numel())
            max_abs = float(diff.nan_to_num(nan=math.inf).max()) if r.numel() else 0.0
            per[name] = {"pass": finite and ratio >= need, "finite": finite, "match_ratio": ratio,
                         "max_abs_err": max_abs, "max_abs_ref": float(r.abs().max()) if r.numel() else 0.0}
            del diff
        worst = min(EDIT_OUTPUTS, key=lambda n: (per[n]["pass"], per[n]["match_ratio"],
                                                 -per[n]["max_abs_err"]))
        w = per[worst]
        return {"pass": all(v["pass"] for v in per.values()), "finite": all(v["finite"] for v in per.values()),
                "match_ratio": w["match_ratio"], "required_ratio": need, "max_abs_err": w["max_abs_err"],
                "atol": atol, "rtol": rtol, "worst": worst, "outputs": per}


PROBLEMS = [SoftmaxDropoutBwd(), EditAttentionBwd()]


def problem_for(row):
    for prob in PROBLEMS:
        if prob.accepts(row):
            return prob
    return None


def delay_for(prob, args):
    """The spin before each timed iteration of the problem's workloads: --delay-cycles, else the problem's."""
    return args.delay_cycles if args.delay_cycles is not None else prob.delay_cycles


def tools_for(prob, tools):
    """The tools of --tools that the problem can run, or its default tools when --tools is not given."""
    if tools is None:
        return list(getattr(prob, "default_tools", prob.tools))
    return [t for t in tools if t in prob.tools]


# ----------------------------------------------------------------------------------------------
# Timing
# ----------------------------------------------------------------------------------------------

class Timer:
    """Cold-L2 device timing: flush before every iteration, events around the work alone.

    Between the flush and the start event a GPU-side spin (torch.cuda._sleep, touching no memory, so the L2
    stays cold) keeps the GPU busy while the host enqueues the tool's work: host overhead (Python, ctypes,
    dynamo guards, eager's launches) then stays out of the device time, which runs from the first kernel's
    start to the last kernel's end, as the public benchmark measures. delay_cycles=0 turns it off."""

    def __init__(self, warmup, iters, delay_cycles):
        self.warmup, self.iters = warmup, iters
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush_buf = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
        self._delay_us = {}  # cycles -> the spin's measured length
        self.use_delay(delay_cycles)

    def use_delay(self, delay_cycles):
        """Spin delay_cycles before each timed iteration from now on (each problem has its own: see
        PROBLEM_DELAY_CYCLES); its length is measured the first time."""
        self.delay_cycles = delay_cycles if hasattr(torch.cuda, "_sleep") else 0
        if self.delay_cycles and self.delay_cycles not in self._delay_us:
            self._delay_us[self.delay_cycles] = self._events_us(lambda: torch.cuda._sleep(self.delay_cycles), 3, 10)[0]
        self.delay_us = self._delay_us.get(self.delay_cycles, 0.0)

    def flush(self):
        self.flush_buf.zero_()
        if self.delay_cycles:
            torch.cuda._sleep(self.delay_cycles)

    @staticmethod
    def _events_us(fn, warmup, iters, before=None):
        for _ in range(warmup):
            if before:
                before()
            fn()
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(iters)]
        host = []
        for start, end in pairs:
            if before:
                before()
            t0 = time.perf_counter()
            start.record()
            fn()
            end.record()
            host.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        samples = [start.elapsed_time(end) * 1e3 for start, end in pairs]
        return statistics.median(samples), samples, max(host)

    def time_us(self, fn):
        """Median device time of fn in microseconds, all the samples, and the longest host enqueue time
        (when it passes the delay, host overhead may have leaked into the device time)."""
        return self._events_us(fn, self.warmup, self.iters, before=self.flush)


def time_copy(timer, n):
    """A device-to-device copy of n bytes (n read, n written), timed like the tools. Returns (median us, samples)."""
    src = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    med, samples, _ = timer.time_us(lambda: dst.copy_(src))
    return med, samples


def measure_copy_bandwidth(timer, gib):
    """Device-to-device copy, bytes read + written over the cold-L2 median time. Returns GB/s."""
    n = int(gib * (1 << 30))
    med, samples = time_copy(timer, n)
    return 2 * n / (med * 1e-6) / 1e9, med, samples


def measure_same_bytes_copy(timer, nbytes):
    """A copy that reads and writes nbytes in all (nbytes / 2 each way): what moving exactly a workload's
    bytes costs from a cold L2, launch, ramp and tail included. Returns the median in microseconds."""
    return time_copy(timer, max(1, nbytes // 2))[0]


def measure_matmul_rate(timer, precision, n=8192):
    """An n x n x n torch.matmul, timed like everything else (3 warm-ups, median of 10): "tf32" on fp32 operands
    with TF32 allowed, "fp16" on fp16 operands (cuBLAS accumulates in fp32). Returns {"<p>_matmul_n", "<p>_us"
    (median), "<p>_tflops" (2 n^3 flops), "<p>_samples_us"}."""
    dtype = torch.float16 if precision == "fp16" else torch.float32
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    c = torch.empty(n, n, device="cuda", dtype=dtype)

    def fn():
        with tf32_matmul(precision == "tf32"):
            torch.matmul(a, b, out=c)
    med, samples, _ = timer._events_us(fn, 3, 10, before=timer.flush)
    return {f"{precision}_matmul_n": n, f"{precision}_us": med, f"{precision}_tflops": 2 * n**3 / (med * 1e-6) / 1e12,
            f"{precision}_samples_us": samples}


def measure_minimal_kernel(timer):
    """The cheapest launch we can make, timed like everything else. Returns (us, {candidate: us})."""
    tiny = torch.zeros(1, device="cuda")
    candidates = {"fill_1_element": lambda: tiny.zero_()}
    if hasattr(torch.cuda, "_sleep"):
        candidates["cuda_sleep_0"] = lambda: torch.cuda._sleep(0)
    results = {}
    for name, fn in candidates.items():
        try:
            results[name] = timer.time_us(fn)[0]
        except Exception as e:  # a private API may go away; the fill kernel is enough
            results[name] = None
            print(f"minimal kernel {name}: {e}", file=sys.stderr)
    found = [v for v in results.values() if v is not None]
    return min(found), results


def attributed_us(spans):
    """Each kernel name's share of the time the kernels run, from spans [(name, start us, end us)]: every stretch
    where n of them run side by side counts 1/n to each, so a kernel starved beside another gets the stretch it
    shares, not its whole length. Returns ({name: us}, busy us: the union of the spans)."""
    edges = sorted({t for _, s, e in spans for t in (s, e)})
    out, busy = {}, 0.0
    for lo, hi in zip(edges, edges[1:]):
        running = [name for name, s, e in spans if s <= lo and e >= hi]
        if running:
            busy += hi - lo
            for name in running:
                out[name] = out.get(name, 0.0) + (hi - lo) / len(running)
    return out, busy


def kernel_summary(kernels, exclude, calls):
    """Where a tool's device time goes. kernels: [(name, start us, end us)], every kernel the profiler saw over
    `calls` calls; exclude: names that are not the tool's (the flush and the spin). The plan's lanes run kernels
    side by side, so each kernel's time is its attributed share (attributed_us) of the busy time, the union of
    the tool's kernels. Returns {"top_kernel", "top_share" (of the busy time), "top_kernel_us" (a call's),
    "top_launches_per_call", "kernel_us_per_call" (summed lengths), "busy_us_per_call", "kernels_per_call",
    "kernels" (the five largest, [name, share])} or {"error"}. Kernels are told apart by name: the launches of
    one name add up, as in torch.profiler's key_averages."""
    spans = [k for k in kernels if k[0] not in exclude]
    if not spans or calls <= 0:
        return {"error": "no kernel of the tool recorded"}
    launches = {}
    for name, _, _ in spans:
        launches[name] = launches.get(name, 0) + 1
    total, busy = attributed_us(spans)
    ranked = sorted(total.items(), key=lambda kv: -kv[1])
    top, top_us = ranked[0]
    return {"top_kernel": top, "top_share": top_us / busy if busy > 0 else 1.0, "top_kernel_us": top_us / calls,
            "top_launches_per_call": launches[top] / calls,
            "kernel_us_per_call": sum(e - s for _, s, e in spans) / calls, "busy_us_per_call": busy / calls,
            "kernels_per_call": len(spans) / calls, "calls": calls,
            "kernels": [[n, us / busy if busy > 0 else 0.0] for n, us in ranked[:5]]}


def profiled_kernels(work, calls):
    """[(name, start us, end us)] of every GPU activity CUPTI records (torch.profiler) over `calls` calls of work."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            work()
        torch.cuda.synchronize()
    return [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA]


_flush_kernel_names = None  # the kernels of Timer.flush, recorded once: they are left out of a tool's profile


def profile_tool(fn, timer, calls):
    """kernel_summary of fn over `calls` calls, each after the cold-L2 flush as in the timing; a profiler that
    fails leaves its message, not a failed tool."""
    global _flush_kernel_names
    try:
        if _flush_kernel_names is None:
            _flush_kernel_names = {name for name, _, _ in profiled_kernels(timer.flush, 2)}

        def work():
            timer.flush()
            fn()
        return kernel_summary(profiled_kernels(work, calls), _flush_kernel_names, calls)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


# ----------------------------------------------------------------------------------------------
# One workload
# ----------------------------------------------------------------------------------------------

def summary(samples):
    s = sorted(samples)
    return {"min": s[0], "p10": s[len(s) // 10], "p90": s[(len(s) * 9) // 10], "max": s[-1]}


# A tool's name is its base (ours, eager, compile) and a suffix naming the precision of its matrix products.
PRECISION_SUFFIXES = ("_tf32", "_fp16")


def split_tool(tool):
    """("compile", "_fp16") for compile_fp16; ("ours_graph", "") for ours_graph."""
    for suffix in PRECISION_SUFFIXES:
        if tool.endswith(suffix):
            return tool[:-len(suffix)], suffix
    return tool, ""


def autocast_fp16(fn):
    """fn under torch.autocast("cuda", torch.float16), its outputs cast back to the spec's fp32: autocast leaves
    each product's result in fp16, and a drop-in replacement of the op returns what the spec says."""
    def run(**kwargs):
        with torch.autocast("cuda", dtype=torch.float16):
            outs = fn(**kwargs)
        return [o.float() for o in outs]
    return run


def make_tool(tool, prob, lib, row, inputs):
    """Returns (zero-arg callable, output after one run or None, extra info). The output is a tensor, or a list of
    tensors for a problem with several outputs. eager_tf32 / compile_tf32: eager / compile with
    torch.backends.cuda.matmul.allow_tf32 = True around every call (eager and compile: PyTorch's default, False);
    eager_fp16 / compile_fp16: the reference under torch.autocast("cuda", torch.float16) (autocast_fp16).
    ours_fp16: our kernel in ATTNBWD_PRECISION_FP16, whatever --precision says."""
    base, suffix = split_tool(tool)
    if base == "ours":
        if lib is None:
            raise RuntimeError("library not loaded")
        precision = PRECISIONS["fp16"] if suffix == "_fp16" else None
        fn, out, info = prob.make_ours(lib, row, inputs, precision) if precision is not None \
            else prob.make_ours(lib, row, inputs)
        for o in (out if isinstance(out, (list, tuple)) else [out]):
            o.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        return fn, out, {"kernel": info}
    if base == "ours_graph":  # our call captured once in a CUDA graph, as a training loop's graph would hold it
        fn, out, info = make_tool("ours", prob, lib, row, inputs)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        for o in out:  # the check below then sees the replay's outputs
            o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()

        def replay():
            graph.replay()
            return out
        replay.keep = fn  # the launch's workspace lives as long as the graph
        return replay, out, info
    reference = autocast_fp16(prob.torch_fn) if suffix == "_fp16" else prob.torch_fn
    if base == "eager":
        def fn():
            return reference(**inputs)
    elif base == "compile":
        torch._dynamo.reset()  # one compile per workload, never the recompile limit's eager fallback
        compiled = torch.compile(reference, dynamic=False)

        def fn():
            return compiled(**inputs)
    else:
        raise ValueError(f"unknown tool {tool}")
    if suffix == "_tf32":
        plain = fn

        def fn():
            with tf32_matmul(True):
                return plain()
    t0 = time.perf_counter()
    out = fn()  # compile: compiles here
    torch.cuda.synchronize()
    return fn, out, {"compile_seconds": time.perf_counter() - t0} if base == "compile" else {}


def floors(prob, row, copy_gbs, rates):
    """The floor columns of a workload: floor_bytes, floor_us; with matrix work (problem 2) also floor_flops, the
    memory and matrix parts and, with an fp16 rate in rates, floor_fp16_us. rates: {"tf32": TFLOP/s, "fp16":
    TFLOP/s}, as measured in the run. floor = max(matrix work / rate, bytes / copy bandwidth)."""
    floor_bytes = prob.floor_bytes(row)
    memory_us = floor_bytes / (copy_gbs * 1e9) * 1e6
    out = {"floor_bytes": floor_bytes, "floor_us": memory_us}
    floor_flops = prob.floor_flops(row) if hasattr(prob, "floor_flops") else None
    if not floor_flops:
        return out
    tf32, fp16 = rates.get("tf32"), rates.get("fp16")
    out.update({"floor_flops": floor_flops, "floor_memory_us": memory_us, "tf32_tflops": tf32,
                "floor_matrix_us": floor_flops / (tf32 * 1e12) * 1e6 if tf32 else None})
    out["floor_us"] = max(memory_us, out["floor_matrix_us"] or 0.0)
    if fp16:
        out.update({"fp16_tflops": fp16, "floor_matrix_fp16_us": floor_flops / (fp16 * 1e12) * 1e6})
        out["floor_fp16_us"] = max(memory_us, out["floor_matrix_fp16_us"])
    return out


def tool_precision(tool, ours_precision):
    """The precision of a tool's matrix products: fp32, tf32 or fp16 (ours and ours_graph: --precision's)."""
    base, suffix = split_tool(tool)
    if suffix:
        return suffix[1:]
    return ours_precision if base.startswith("ours") else "fp32"


def run_workload(index, row, prob, lib, timer, args, copy_gbs, minimal_us, rates=None):
    f = floors(prob, row, copy_gbs, rates or {})
    floor_bytes, floor_us, floor_flops = f["floor_bytes"], f["floor_us"], f.get("floor_flops")
    tools = tools_for(prob, args.tools)
    rec = {
        "index": index,
        "problem": prob.name,
        "label": prob.label(row),
        "axes": prob.axes(row),
        "uuid": row.get("uuid"),
        "tolerance": row.get("tolerance"),
        **f,
        "reachable_us": max(floor_us, minimal_us),
        "tools": {},
    }
    rec["delay_cycles"], rec["delay_us"] = timer.delay_cycles, timer.delay_us
    if not floor_flops and args.same_bytes_copy:  # memory-bound: what a copy of the same bytes takes
        rec["copy_same_bytes_us"] = measure_same_bytes_copy(timer, floor_bytes)
        torch.cuda.empty_cache()
    inputs = None
    try:
        inputs = prob.make_inputs(row, args.seed + index)
        for tool in tools:
            t = {"ok": False}
            rec["tools"][tool] = t
            fn = out = None
            try:
                fn, out, extra = make_tool(tool, prob, lib, row, inputs)
                t.update(extra)
                if not args.no_check:
                    t["check"] = prob.check(row, inputs, out)
                del out
                med, samples, host_us = timer.time_us(fn)
                t.update({"us": med, "samples_us": samples, **summary(samples), "host_enqueue_max_us": host_us,
                          "gbs": floor_bytes / (med * 1e-6) / 1e9,
                          "floor_fraction": floor_us / med,
                          "reachable_fraction": rec["reachable_us"] / med})
                if "copy_same_bytes_us" in rec:
                    t["copy_fraction"] = rec["copy_same_bytes_us"] / med
                if floor_flops:
                    t["tflops"] = floor_flops / (med * 1e-6) / 1e12
                    t["precision"] = tool_precision(tool, args.precision)
                    if t["precision"] == "fp16" and rec.get("floor_fp16_us"):
                        t["floor_fp16_fraction"] = rec["floor_fp16_us"] / med
                if args.profile:  # every tool: a peer's summed kernel time against its time shows host gaps
                    t["profile"] = profile_tool(fn, timer, args.profile_calls)
                if timer.delay_cycles and host_us > timer.delay_us + med:
                    # the host took longer per iteration than the GPU: its overhead may be in the times
                    t["host_bound_warning"] = True
                t["ok"] = True
            except Exception as e:
                t["error"] = f"{type(e).__name__}: {e}"
                print(f"  [{rec['label']}] {tool} failed: {t['error'][:2000]}", file=sys.stderr)
                try:  # a failed launch may leave an error behind; surface it here, not in the next tool
                    torch.cuda.synchronize()
                except Exception as e2:
                    t["error"] += f" / then: {e2}"
            finally:
                fn = None  # its closure holds the inputs and outputs: let them go with the workload
            line = f"  {tool:{max([8] + [len(x) for x in tools])}s}"
            if "us" in t:
                line += f" {t['us']:10.1f} us  {t['floor_fraction']:6.3f} of floor"
            if "copy_fraction" in t:
                line += f"  {t['copy_fraction']:6.3f} of a same-bytes copy ({rec['copy_same_bytes_us']:.1f} us)"
            if "tflops" in t:
                line += f"  {t['tflops']:6.1f} TFLOP/s"
            if (t.get("profile") or {}).get("top_kernel"):
                pr = t["profile"]
                line += (f"  most: {pr['top_kernel'][:60]} {pr['top_share']:.0%} of {pr['kernels_per_call']:g} "
                         f"kernels, {pr['kernel_us_per_call']:.1f} us of kernels")
            elif (t.get("profile") or {}).get("error"):
                line += f"  profile: {t['profile']['error'][:200]}"
            if "check" in t:
                c = t["check"]
                line += f"  check {'pass' if c['pass'] else 'FAIL'} ({c['match_ratio']:.5f}, max abs {c['max_abs_err']:.2e})"
                if "worst" in c:
                    line += f" worst {c['worst']}"
            if t.get("host_bound_warning"):
                line += f"  (host enqueue {t['host_enqueue_max_us']:.0f} us > spin: raise --delay-cycles)"
            if "error" in t:
                line += "  ERROR"
            print(line, flush=True)
    except Exception as e:
        rec["error"] = f"{type(e).__name__}: {e}"
        print(f"  [{rec['label']}] failed: {rec['error']}", file=sys.stderr)
    finally:
        del inputs
        if any(t.startswith("compile") for t in tools):
            torch._dynamo.reset()
        gc.collect()
        torch.cuda.empty_cache()
    return rec


# ----------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------

def ours_pass(rec):
    return tool_check(rec, "ours")


def aggregate(records, tools):
    """Geometric means of every column; ratios over the workloads where ours has a time."""
    g = {"floor_us": geomean([r["floor_us"] for r in records]),
         "reachable_us": geomean([r["reachable_us"] for r in records])}
    for tool in tools:
        g[f"{tool}_us"] = geomean([tool_value(r, tool, "us") for r in records])
        g[f"{tool}_floor_fraction"] = geomean([tool_value(r, tool, "floor_fraction") for r in records])
        g[f"{tool}_gbs"] = geomean([tool_value(r, tool, "gbs") for r in records])
    timed = [r for r in records if tool_value(r, "ours", "us")]
    if timed:
        ours = geomean([r["tools"]["ours"]["us"] for r in timed])
        g["floor_over_ours"] = geomean([r["floor_us"] for r in timed]) / ours
        g["reachable_over_ours"] = geomean([r["reachable_us"] for r in timed]) / ours
        copies = [r.get("copy_same_bytes_us") for r in timed]
        if all(copies):
            g["copy_same_bytes_us"] = geomean(copies)
            g["copy_over_ours"] = g["copy_same_bytes_us"] / ours
            g["floor_over_copy"] = geomean([r["floor_us"] for r in timed]) / g["copy_same_bytes_us"]
        g["ours_workloads"] = len(timed)
    if any("floor_flops" in r for r in records):
        g["floor_matrix_us"] = geomean([r.get("floor_matrix_us") for r in records])
        g["floor_memory_us"] = geomean([r.get("floor_memory_us") for r in records])
        for tool in tools:
            g[f"{tool}_tflops"] = geomean([tool_value(r, tool, "tflops") for r in records])
            g[f"{tool}_floor_fp16_fraction"] = geomean([tool_value(r, tool, "floor_fp16_fraction") for r in records])
        g["floor_fp16_us"] = geomean([r.get("floor_fp16_us") for r in records])
    for tool in tools:  # every tool's checks, failures included: a peer that fails the rule is reported as such
        verdicts = [tool_check(r, tool) for r in records]
        g[f"{tool}_passed"] = verdicts.count("pass")
        g[f"{tool}_checked"] = verdicts.count("pass") + verdicts.count("FAIL")
    checked = [r for r in records if "ours" in r["tools"]]
    g["ours_passed"] = sum(1 for r in checked if ours_pass(r) == "pass")
    g["ours_checked"] = sum(1 for r in checked if "check" in r["tools"]["ours"])
    return g


def ours_worst(rec):
    """The output of problem 2 farthest from passing, in ours' check."""
    c = (rec["tools"].get("ours") or {}).get("check") or {}
    return c.get("worst", "-")


def group_by_problem(records):
    """[(problem, its records)] in the order the problems first appear."""
    groups = {}
    for r in records:
        groups.setdefault(r["problem"], []).append(r)
    by_name = {p.name: p for p in PROBLEMS}
    return [(by_name[name], recs) for name, recs in groups.items()]


def time_cell(rec, tool):
    """The tool's median time, "FAIL" after it when its output failed the check; "failed" when it did not run."""
    if tool not in rec["tools"]:
        return "-"
    if not tool_value(rec, tool, "ok"):
        return "failed"
    return fmt(tool_value(rec, tool, "us"), ".1f") + (" FAIL" if tool_check(rec, tool) == "FAIL" else "")


def print_table(records, agg, tools, label_name="B,H,T,p"):
    flops = any("floor_flops" in r for r in records)  # problem 2: achieved TFLOP/s per tool instead of GB/s
    copy = not flops and all("copy_same_bytes_us" in r for r in records)
    cols = [label_name, "floor us", "reach us"] + (["copy us"] if copy else []) + [f"{t} us" for t in tools]
    cols += ["floor/ours"]
    if flops:
        cols += [f"{t} TFLOP/s" for t in tools] + ["pass", "worst output"]
    else:
        cols += ["GB/s", "pass"]
    rows = []
    for r in records:
        cells = [r["label"], fmt(r["floor_us"], ".1f"), fmt(r["reachable_us"], ".1f")]
        cells += [fmt(r["copy_same_bytes_us"], ".1f")] if copy else []
        cells += [time_cell(r, t) for t in tools]
        cells += [fmt(tool_value(r, "ours", "floor_fraction"), ".3f")]
        if flops:
            cells += [fmt(tool_value(r, t, "tflops"), ".1f") for t in tools] + [ours_pass(r), ours_worst(r)]
        else:
            cells += [fmt(tool_value(r, "ours", "gbs"), ".0f"), ours_pass(r)]
        rows.append(cells)
    cells = ["geomean", fmt(agg["floor_us"], ".1f"), fmt(agg["reachable_us"], ".1f")]
    cells += [fmt(agg.get("copy_same_bytes_us"), ".1f")] if copy else []
    cells += [fmt(agg.get(f"{t}_us"), ".1f") for t in tools]
    cells += [fmt(agg.get("ours_floor_fraction"), ".3f")]
    if flops:
        cells += [fmt(agg.get(f"{t}_tflops"), ".1f") for t in tools]
        cells += [f"{agg['ours_passed']}/{agg['ours_checked']}", ""]
    else:
        cells += [fmt(agg.get("ours_gbs"), ".0f"), f"{agg['ours_passed']}/{agg['ours_checked']}"]
    rows.append(cells)
    widths = [max(14, len(c)) for c in cols]
    if flops:  # long output names
        widths = [max([w] + [len(row[i]) for row in rows]) for i, w in enumerate(widths)]
    print()
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for cells in rows:
        print("  ".join(c.rjust(w) for c, w in zip(cells, widths)))
    print()
    if agg.get("floor_over_ours") is not None:
        print(f"geomean(floor) / geomean(ours) = {agg['floor_over_ours']:.3f}   "
              f"geomean(reachable) / geomean(ours) = {agg['reachable_over_ours']:.3f}   "
              f"(over {agg['ours_workloads']} workloads)")
    if agg.get("copy_over_ours") is not None:
        print(f"same-bytes copy: geomean {agg['copy_same_bytes_us']:.1f} us; copy/ours = {agg['copy_over_ours']:.3f}; "
              f"floor/copy = {agg['floor_over_copy']:.3f} (the most a kernel as fast as a copy reaches)")
    for t in tools:
        if agg.get(f"{t}_floor_fraction") is not None:
            print(f"geomean fraction of floor, {t}: {agg[f'{t}_floor_fraction']:.3f}")
    if flops:
        print(f"floor = max(matrix work / TF32 rate, bytes / copy bandwidth); geomeans: matrix "
              f"{fmt(agg.get('floor_matrix_us'), '.1f')} us, memory {fmt(agg.get('floor_memory_us'), '.1f')} us"
              + (f"; with the fp16 rate {agg['floor_fp16_us']:.1f} us" if agg.get("floor_fp16_us") else ""))
        for t in tools:
            if agg.get(f"{t}_floor_fp16_fraction") is not None:
                print(f"geomean fraction of the fp16 floor, {t}: {agg[f'{t}_floor_fp16_fraction']:.3f}")
    checks = [f"{t} {agg[f'{t}_passed']}/{agg[f'{t}_checked']}" for t in tools if agg.get(f"{t}_checked")]
    if checks:
        print("passing the public rule: " + ", ".join(checks))


def draw_axes(ax, records, tools, label_name):
    flops = any("floor_flops" in r for r in records)
    labels = [r["label"] for r in records]
    n = len(records)
    width = 0.8 / max(1, len(tools))
    top = 1.0
    for k, tool in enumerate(tools):
        ys = [tool_value(r, tool, "floor_fraction") or 0.0 for r in records]
        xs = [i + (k - (len(tools) - 1) / 2) * width for i in range(n)]
        ax.bar(xs, ys, width=width, label=tool)
        top = max([top] + ys)
    floor_label = "floor: max(matrix work / TF32 rate, bytes / copy bandwidth)" if flops else "floor (copy bandwidth)"
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label=floor_label)
    ax.plot(range(n), [r["floor_us"] / r["reachable_us"] for r in records], "k_", markersize=18,
            label="reachable: max(floor, minimal kernel)")
    ax.set_ylim(0, top * 1.25)
    ax.set_xticks(range(n))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
    ax.set_xlabel(f"workload ({label_name})")
    ax.set_ylabel("fraction of the floor reached (floor time / time)")
    if flops:
        ax.set_title("edit attention backward: fraction of the floor, cold L2, median")
    else:
        ax.set_title("attention backward: fraction of the memory floor, cold L2, median")
    ax.legend(loc="upper left", ncol=3, fontsize=8)


def draw_png(path, groups):
    """groups: [(records, tools, label name)], one subplot each."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max([len(records) for records, _, _ in groups] + [0])
    fig, axes = plt.subplots(max(1, len(groups)), 1, figsize=(max(8, 0.7 * n + 2), 5 * max(1, len(groups))),
                             squeeze=False)
    for (records, tools, label_name), ax in zip(groups, axes[:, 0]):
        draw_axes(ax, records, tools, label_name)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def clean_json(obj):
    """NaN / inf are not JSON: write them as null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    return obj


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------

def load_rows(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    rows.append(json.loads(line))
    return rows


def select(rows, only):
    """--only N: the first N workloads; --only i,j,k (a comma in it): those indices, from 0."""
    if only is None:
        return list(enumerate(rows))
    if "," in only:
        wanted = [int(x) for x in only.split(",") if x.strip()]
        return [(i, rows[i]) for i in wanted if 0 <= i < len(rows)]
    return list(enumerate(rows))[: int(only)]


ALL_TOOLS = ("ours", "ours_fp16", "ours_graph", "eager", "compile", "eager_tf32", "compile_tf32", "eager_fp16",
             "compile_fp16")
PRECISIONS = {"tf32": 0, "fp32": 1, "fp16": 2}  # enum attnbwd_precision
QUICK = {"only": "3", "iters": 10, "warmup": 3}  # --quick: these, where not given


def parse_args(argv=None):
    out_dir = os.environ.get("OUT")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suites", nargs="*", default=[os.path.join(REPO, "suites", "sol066_workload.jsonl")],
                    help="workload files (JSON lines)")
    ap.add_argument("--lib", default="build/libattnbwd.so", help="path of libattnbwd.so")
    ap.add_argument("--tools", default=None,
                    help="all, or a comma list of " + ",".join(ALL_TOOLS) + " (default: each problem's own: problem 1 "
                         "ours,eager,compile; problem 2 ours,eager,eager_tf32,compile_tf32); a problem skips those "
                         "it has not")
    ap.add_argument("--precision", default="tf32", choices=sorted(PRECISIONS),
                    help="problem 2: precision of our kernel's matrix products")
    ap.add_argument("--iters", type=int, default=None, help="timed iterations, the median reported (50)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed iterations before them (10)")
    ap.add_argument("--only", default=None, help="N: the first N workloads; i,j,k: those (from 0)")
    ap.add_argument("--quick", action="store_true",
                    help="a try: --only 3 --iters 10 --warmup 3, each where not given")
    ap.add_argument("--profile", action="store_true",
                    help="each tool: the kernel that takes the most of its busy time, and its summed kernel time "
                         "(torch.profiler around a few calls, each after the flush)")
    ap.add_argument("--profile-calls", type=int, default=5, help="calls under the profiler (--profile)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU or PyTorch: print the workloads, the tools each runs and its work, then stop")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness checks")
    ap.add_argument("--seed", type=int, default=0, help="workload i draws its inputs with seed+i")
    ap.add_argument("--copy-gib", type=float, default=4.0, help="size of the bandwidth copy's source")
    ap.add_argument("--no-same-bytes-copy", dest="same_bytes_copy", action="store_false",
                    help="memory-bound problems: skip timing a copy of each workload's floor bytes")
    ap.add_argument("--delay-cycles", type=int, default=None,
                    help="GPU spin between flush and start event that hides host overhead (0: none)")
    ap.add_argument("--json", default=os.path.join(out_dir, "bench.json") if out_dir else "bench.json")
    ap.add_argument("--png", default=os.path.join(out_dir, "bench.png") if out_dir else None)
    args = ap.parse_args(argv)
    defaults = dict(QUICK) if args.quick else {"iters": 50, "warmup": 10}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.tools == "all":  # every tool each problem has
        args.tools = ",".join(ALL_TOOLS)
    if args.tools is not None:
        args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
        for t in args.tools:
            if t not in ALL_TOOLS:
                ap.error(f"unknown tool {t!r}")
    return args


def plan(args):
    """(selected [(index, row, problem or None)], the problems met in order, the tools of the run)."""
    rows = load_rows(args.suites)
    selected = [(index, row, problem_for(row)) for index, row in select(rows, args.only)]
    used = []  # the problems of the selected workloads, in order
    for _, _, prob in selected:
        if prob is not None and prob not in used:
            used.append(prob)
    tools = args.tools
    if tools is None:  # each problem's default tools, in the order met
        tools = []
        for prob in used:
            tools += [t for t in tools_for(prob, None) if t not in tools]
    return selected, used, tools


SPIN_CLOCK_GHZ = 1.98  # the H100's and H200's boost clock: --dry-run's estimate of the spin's length


def dry_run(args):
    """What a run would do, without a GPU: per workload its problem, tools and work; then the launches and the
    spin time they cost at least. Returns 0."""
    selected, _, _ = plan(args)
    runs = compiles = 0
    spin_s = 0.0
    for index, row, prob in selected:
        if prob is None:
            print(f"[{index}] no problem knows axes {row.get('axes')}; skipped")
            continue
        ts = tools_for(prob, args.tools)
        runs += len(ts)
        spin_s += len(ts) * (args.warmup + args.iters) * delay_for(prob, args) / (SPIN_CLOCK_GHZ * 1e9)
        compiles += sum(1 for t in ts if t.startswith("compile"))
        work = f"floor bytes {prob.floor_bytes(row)}"
        if hasattr(prob, "floor_flops"):
            work += f", matrix flops {prob.floor_flops(row)} = {prob.flop_formula}"
        print(f"[{index}] {prob.name} {prob.label(row)}: {','.join(ts) or '(no tool)'}; {work}")
    print(f"{runs} tool runs ({compiles} torch.compile), {args.warmup} + {args.iters} iterations each: "
          f"{runs * (args.warmup + args.iters)} timed iterations, at least {spin_s:.0f} s of spin (at "
          f"{SPIN_CLOCK_GHZ} GHz); profile: {'on' if args.profile else 'off'}")
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.dry_run:
        return dry_run(args)
    if torch is None:
        sys.exit("bench.py needs PyTorch (pip install torch); --dry-run does not")
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    torch.cuda.init()
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, L2 {props.L2_cache_size >> 20} MiB, "
          f"torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)

    selected, used, tools = plan(args)
    for prob in used:
        if hasattr(prob, "precision"):
            prob.precision = PRECISIONS[args.precision]

    lib = None
    lib_error = None
    if any(t.startswith("ours") for t in tools):
        path = args.lib
        if not os.path.exists(path) and os.path.exists(os.path.join(REPO, path)):
            path = os.path.join(REPO, path)
        try:
            lib = Library(path)
        except (OSError, AttnbwdError) as e:
            lib_error = str(e)
            print(f"cannot use the library: {e}", file=sys.stderr)

    timer = Timer(args.warmup, args.iters, delay_for(PROBLEMS[0], args))
    copy_gbs, copy_us, copy_samples = measure_copy_bandwidth(timer, args.copy_gib)
    torch.cuda.empty_cache()  # give the copy's buffers back
    minimal_us, minimal_all = measure_minimal_kernel(timer)
    print(f"copy bandwidth {copy_gbs:.0f} GB/s ({args.copy_gib:g} GiB in {copy_us:.1f} us, read + write); "
          f"minimal kernel {minimal_us:.2f} us {minimal_all}", flush=True)
    matmul = {}  # problem 2: matrix work too, its floor at the TF32 and at the fp16 rate
    if any(hasattr(prob, "floor_flops") for prob in used):
        for precision in ("tf32", "fp16"):
            matmul.update(measure_matmul_rate(timer, precision))
            torch.cuda.empty_cache()
        print(f"TF32 matmul {matmul['tf32_tflops']:.0f} TFLOP/s ({matmul['tf32_matmul_n']}^3 in "
              f"{matmul['tf32_us']:.1f} us), fp16 {matmul['fp16_tflops']:.0f} TFLOP/s; "
              f"problem 2 precision {args.precision}", flush=True)
    rates = {p: matmul[f"{p}_tflops"] for p in ("tf32", "fp16") if f"{p}_tflops" in matmul}

    records = []
    spin_shown = None
    for index, row, prob in selected:
        if prob is None:
            print(f"workload {index}: no problem knows axes {row.get('axes')}; skipped", file=sys.stderr)
            continue
        if spin_shown != delay_for(prob, args):
            timer.use_delay(delay_for(prob, args))
            spin_shown = timer.delay_cycles
            print(f"launch-hiding spin before each timed iteration of {prob.name}: {timer.delay_cycles} cycles = "
                  f"{timer.delay_us:.0f} us", flush=True)
        print(f"[{index}] {prob.name} {prob.label(row)}", flush=True)
        records.append(run_workload(index, row, prob, lib, timer, args, copy_gbs, minimal_us, rates))

    groups = group_by_problem(records)
    if len(groups) <= 1:
        prob = groups[0][0] if groups else (used[0] if used else PROBLEMS[0])
        agg = aggregate(records, tools_for(prob, args.tools))
        print_table(records, agg, tools_for(prob, args.tools), prob.label_name)
        by_problem = None
    else:
        agg = aggregate(records, tools)
        by_problem = {}
        for prob, recs in groups:
            print(f"\n{prob.name}:")
            by_problem[prob.name] = aggregate(recs, tools_for(prob, args.tools))
            print_table(recs, by_problem[prob.name], tools_for(prob, args.tools), prob.label_name)

    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": props.name,
        "sm_count": props.multi_processor_count,
        "l2_bytes": props.L2_cache_size,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
        "lib": os.path.abspath(lib.path) if lib else args.lib,
        "lib_error": lib_error,
        "suites": args.suites,
        "tools": tools,
        "iters": args.iters,
        "warmup": args.warmup,
        "seed": args.seed,
        "method": "cold L2 (2x L2 buffer zeroed) before every iteration, then a GPU spin that hides host "
                  "launch overhead; device time from CUDA events around the tool's work alone; median",
        "delay_cycles": timer.delay_cycles,  # the last problem's; each workload has its own
        "delay_us": timer.delay_us,
        "copy_bytes": int(2 * int(args.copy_gib * (1 << 30))),
        "copy_us": copy_us,
        "copy_bandwidth_gbs": copy_gbs,
        "copy_samples_us": copy_samples,
        "minimal_kernel_us": minimal_us,
        "minimal_kernel_candidates_us": minimal_all,
        "geomean": agg,
        "workloads": records,
    }
    if matmul:
        result.update(matmul)
        result["precision"] = args.precision
        result["flop_formula"] = EditAttentionBwd.flop_formula + " (the spec's matrix work, 2 flops a multiply-add)"
    result["profile"] = ({"calls": args.profile_calls, "method": "torch.profiler (CUPTI), CUDA activities, each "
                          "call after the flush; shares of the busy time, each stretch where kernels run side by side "
                          "split evenly among them", "share_of": "busy"} if args.profile else None)
    if by_problem:
        result["geomean_by_problem"] = by_problem
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(clean_json(result), f, indent=1)
        print(f"wrote {args.json}")
    if args.png:
        try:
            draw_png(args.png, [(recs, tools_for(prob, args.tools), prob.label_name) for prob, recs in groups])
            print(f"wrote {args.png}")
        except Exception as e:
            print(f"png not drawn: {e}", file=sys.stderr)
    if lib:
        lib.close()
    failed = any(ours_pass(r) not in ("pass", "n/c", "-") for r in records)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
