"""attnbwd.torch on a GPU: our backward against PyTorch's own autograd in float64, under the public acceptance rule.

    python3 python/tests/test_torch_gpu.py [--quick]        (exit 77 without torch or a CUDA device)

Both problems at the public suites' shapes and awkward ones (T = 1, 17, 1000; problem 1's masks with rows all
false; p = 0), each in eager mode (with torch.cuda.set_sync_debug_mode("error") around the call: nothing on the
call path synchronises), compiled (torch.compile(fullgraph=True): a graph break fails) and replayed from a captured
CUDA graph (fresh inputs copied in after the capture). The reference is float64 autograd of the same forward with
the dropout mask the op drew (it is one of the op's outputs). An output passes when at least the required ratio of
its elements is within atol + rtol*|ref| and none is NaN or Inf (problem 1: atol = rtol = 1e-5, 99%; problem 2: the
suite row's atol, or for shapes outside the suite max(0.019, 0.001*sqrt(B*T)) as tests/test_gpu_edit.c, 98%).
Also: tensors checked with a clear error and no GPU fault, one context per device (two when two GPUs exist), the
README snippet (examples/torch_quickstart.py) runs. --quick takes 4 public rows of each suite. Writes
$OUT/torch_gpu.json when OUT is set. Ends with "N passed, N failed"."""

import json
import math
import os
import subprocess
import sys
import time
import traceback

try:
    import torch
except ImportError:
    print("no torch: skipped")
    sys.exit(77)
if not torch.cuda.is_available():
    print("no CUDA device: skipped")
    sys.exit(77)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))
import attnbwd  # noqa: E402
import attnbwd.torch as at  # noqa: E402

ops = torch.ops.attnbwd
DEV = torch.device("cuda", 0)
QUICK = "--quick" in sys.argv
RESULTS = []


def rows(name):
    with open(os.path.join(REPO, "suites", name)) as f:
        out = [json.loads(line) for line in f if line.strip()]
    return out[:4] if QUICK else out


def verdict(name, out, ref, atol, rtol, need):
    out, ref = out.detach().reshape(-1), ref.detach().reshape(-1).to(out.device)
    finite = bool(torch.isfinite(out).all())
    diff = (out.double() - ref).abs()
    ratio = int((diff <= atol + rtol * ref.abs()).sum()) / max(1, ref.numel())
    max_abs = float(diff.nan_to_num(nan=math.inf).max()) if ref.numel() else 0.0
    return {"output": name, "pass": finite and ratio >= need, "finite": finite, "ratio": ratio,
            "max_abs_err": max_abs}


def record(case, mode, fn):
    """Runs fn() -> [verdicts]; one line and one result per (case, mode), failing on any exception."""
    t0 = time.perf_counter()
    try:
        checks = fn()
        ok = all(c["pass"] for c in checks)
        worst = min(checks, key=lambda c: (c["pass"], c["ratio"])) if checks else {}
        err = None
    except Exception as e:  # a crash is a failure with its message, the run goes on
        ok, checks, worst, err = False, [], {}, f"{type(e).__name__}: {e}"
        traceback.print_exc()
    seconds = time.perf_counter() - t0
    RESULTS.append({"case": case, "mode": mode, "pass": ok, "seconds": seconds, "checks": checks, "error": err})
    detail = err or (f"worst {worst.get('output')} ratio {worst.get('ratio', 0):.5f} max_abs "
                     f"{worst.get('max_abs_err', 0):.3g}" if worst else "")
    print(f"{'PASS' if ok else 'FAIL'} {case} [{mode}] {seconds:.1f} s {detail}", flush=True)
    torch.cuda.empty_cache()


def capture(run, warmups=2):
    """A CUDA graph of run() (its forward and backward), after warm-ups on a side stream as PyTorch's docs ask
    (the first call compiles and loads the kernel, which a capture may not)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            run()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        held = run()
    return g, held


# ---------------------------------------------------------------------------------------------------------------
# Problem 1
# ---------------------------------------------------------------------------------------------------------------

def p1_inputs(B, H, T, rows_false, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    scores = torch.randn(B, H, T, T, device=DEV, generator=g)
    mask = torch.randint(0, 2, (B, 1, T, T), device=DEV, generator=g, dtype=torch.uint8).bool()
    if rows_false:
        mask[:, :, ::3, :] = False  # every third query row masked whole
    go = torch.randn(B, H, T, T, device=DEV, generator=g)
    return scores, mask, go


def p1_reference(scores, mask, keep, p, go, b):
    """float64 autograd of softmax(masked_fill) then dropout, batch row b."""
    s = scores[b:b + 1].double().requires_grad_()
    probs = torch.softmax(s.masked_fill(~mask[b:b + 1], at.MASK_FILL), dim=-1)
    out = probs * keep[b:b + 1] / (1.0 - p) if p > 0 else probs
    out.backward(go[b:b + 1].double())
    return s.grad


def p1_checks(scores, mask, keep, p, go, grad):
    checks = []
    for b in range(scores.shape[0]):
        ref = p1_reference(scores, mask, keep, p, go, b)
        checks.append(verdict(f"grad_scores[{b}]", grad[b:b + 1], ref, 1e-5, 1e-5, 0.99))
        del ref
    return checks


def p1_case(B, H, T, p, mode, rows_false=False, seed=0):
    scores, mask, go = p1_inputs(B, H, T, rows_false, seed)
    if mode == "eager":
        s = scores.clone().requires_grad_()
        torch.cuda.set_sync_debug_mode("error")
        try:
            out, _, keep = ops.masked_softmax_dropout(s, mask, p)
            out.backward(go)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        return p1_checks(scores, mask, keep, p, go, s.grad)
    if mode == "compiled":
        torch._dynamo.reset()
        f = torch.compile(lambda s, m: ops.masked_softmax_dropout(s, m, p), fullgraph=True, dynamic=False)
        s = scores.clone().requires_grad_()
        out, _, keep = f(s, mask)
        out.backward(go)
        return p1_checks(scores, mask, keep, p, go, s.grad)
    # graph: captured with other inputs, replayed on the case's
    s = torch.randn_like(scores).requires_grad_()
    static_go = torch.randn_like(go)

    def run():
        s.grad = None
        out, _, keep = ops.masked_softmax_dropout(s, mask, p)
        out.backward(static_go)
        return keep

    g, keep = capture(run)
    with torch.no_grad():
        s.copy_(scores)
        static_go.copy_(go)
    g.replay()
    torch.cuda.synchronize()
    return p1_checks(scores, mask, keep, p, go, s.grad)


def p1_public_wrapper():
    """masked_softmax_dropout itself, p = 0 (no mask to recover), a [B,1,1,T] mask broadcast, in eager and compiled
    mode."""
    B, H, T = 2, 4, 33
    scores, _, go = p1_inputs(B, H, T, False, 5)
    mask = torch.rand(B, 1, 1, T, device=DEV) > 0.3
    full = mask.expand(B, 1, T, T).contiguous()
    checks = []
    for name, fn in (("eager", at.masked_softmax_dropout),
                     ("compiled", torch.compile(at.masked_softmax_dropout, fullgraph=True, dynamic=False))):
        s = scores.clone().requires_grad_()
        fn(s, mask, 0.1, training=False).backward(go)
        checks += [dict(c, output=f"{name} {c['output']}") for c in p1_checks(scores, full, None, 0.0, go, s.grad)]
    return checks


# ---------------------------------------------------------------------------------------------------------------
# Problem 2
# ---------------------------------------------------------------------------------------------------------------

PARAMS = ["qkv_weight", "qkv_bias", "out_weight", "out_bias", "edit_region_bias", "within_edit_bias",
          "cross_edit_bias"]


def p2_inputs(B, T, p, precision, mask_zeros, seed):
    torch.manual_seed(seed)
    module = at.RegionAwareSelfAttention(dropout=p, precision=precision, device=DEV)
    g = torch.Generator(device=DEV).manual_seed(seed)
    hidden = torch.randn(B, T, 1024, device=DEV, generator=g)
    erm = torch.randint(0, 2, (B, T), device=DEV, generator=g).float()
    am = torch.ones(B, T, device=DEV)
    if mask_zeros and T > 1:
        am[:, 1::5] = 0  # every fifth key masked, the first kept
    go = torch.randn(B, T, 1024, device=DEV, generator=g)
    return module, hidden, erm, am, go


def spec_forward(h, erm, am, w, scale, p, keep):
    """The spec's forward with a given dropout mask (any dtype)."""
    B, T, C = h.shape
    qkv = (h @ w["qkv_weight"].t() + w["qkv_bias"]).view(B, T, 3, 16, 64).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    mi, mj = erm[:, None, :, None], erm[:, None, None, :]
    scores = (q @ k.transpose(-1, -2)) * scale + w["edit_region_bias"][:, :T, :T]
    scores = scores + w["within_edit_bias"] * (mi * mj) + w["cross_edit_bias"] * (mi * (1 - mj) + (1 - mi) * mj)
    probs = scores.masked_fill(am[:, None, None, :] == 0, float("-inf")).softmax(dim=-1)
    dropped = probs * keep / (1.0 - p) if p > 0 else probs
    att = (dropped @ v).transpose(1, 2).reshape(B, T, C)
    return att @ w["out_weight"].t() + w["out_bias"]


def p2_reference(module, hidden, erm, am, go, keep, p):
    """float64 autograd of the spec's forward, over slices of the batch (each [b,16,T,T] float64 near 512 MiB);
    the parameters' gradients add up over the slices. Returns the 8 gradients in the spec's order."""
    B, T, _ = hidden.shape
    w = {n: getattr(module, n).detach().double().requires_grad_() for n in PARAMS}
    step = max(1, (512 << 20) // (16 * T * T * 8))
    grad_hidden = []
    for b0 in range(0, B, step):
        sl = slice(b0, b0 + step)
        h = hidden[sl].double().requires_grad_()
        out = spec_forward(h, erm[sl].double(), am[sl].double(), w, module.scale, p,
                           keep[sl].double() if p > 0 else None)
        out.backward(go[sl].double())
        grad_hidden.append(h.grad)
        del out, h
    return [torch.cat(grad_hidden)] + [w[n].grad for n in PARAMS]


def p2_checks(module, hidden, erm, am, go, keep, p, grads, atol):
    ref = p2_reference(module, hidden, erm, am, go, keep, p)
    return [verdict(name, o, r, atol, 1e-5, 0.98) for name, o, r in zip(attnbwd.EDIT_OUTPUTS, grads, ref)]


def p2_grads(module, h):
    return [h.grad] + [getattr(module, n).grad for n in PARAMS]


def p2_call(module, h, erm, am):
    """The module's op with every output: (output, ..., probs [4], probs_dropped [5], ...)."""
    return ops.edit_attention(h, erm, am, *[getattr(module, n) for n in PARAMS], module.scale,
                              module.dropout, module.precision)


def p2_keep(outs, p):
    """The dropout mask the forward drew: probs_dropped != 0 (probs > 0 wherever the mask matters)."""
    return (outs[5] != 0) if p > 0 else None


def p2_case(B, T, p, mode, atol, precision="tf32", mask_zeros=False, seed=0):
    module, hidden, erm, am, go = p2_inputs(B, T, p, precision, mask_zeros, seed)
    torch.backends.cuda.matmul.allow_tf32 = False  # the forward's relations hold in fp32
    if mode in ("eager", "compiled"):
        h = hidden.clone().requires_grad_()
        if mode == "eager":
            torch.cuda.set_sync_debug_mode("error")
            try:
                outs = p2_call(module, h, erm, am)
                outs[0].backward(go)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        else:
            torch._dynamo.reset()
            f = torch.compile(lambda h, erm, am: p2_call(module, h, erm, am), fullgraph=True, dynamic=False)
            outs = f(h, erm, am)
            outs[0].backward(go)
        return p2_checks(module, hidden, erm, am, go, p2_keep(outs, p), p, p2_grads(module, h), atol)
    h = torch.randn_like(hidden).requires_grad_()
    static_go = torch.randn_like(go)

    def run():
        module.zero_grad(set_to_none=True)
        h.grad = None
        outs = p2_call(module, h, erm, am)
        outs[0].backward(static_go)
        return outs

    g, outs = capture(run)
    with torch.no_grad():
        h.copy_(hidden)
        static_go.copy_(go)
    g.replay()
    torch.cuda.synchronize()
    return p2_checks(module, hidden, erm, am, go, p2_keep(outs, p), p, p2_grads(module, h), atol)


def p2_module(B=2, T=17):
    """RegionAwareSelfAttention itself, eval mode (no dropout), default attention_mask, eager and compiled."""
    module, hidden, erm, am, go = p2_inputs(B, T, 0.1, "tf32", False, 9)
    module.eval()
    checks = []
    for name, fn in (("eager", module), ("compiled", torch.compile(module, fullgraph=True, dynamic=False))):
        module.zero_grad(set_to_none=True)
        h = hidden.clone().requires_grad_()
        fn(h, erm).backward(go)
        checks += [dict(c, output=f"{name} {c['output']}")
                   for c in p2_checks(module, hidden, erm, am, go, None, 0.0, p2_grads(module, h), 0.019)]
    return checks


def extra_atol(B, T):
    return max(0.019, 0.001 * math.sqrt(B * T))


# ---------------------------------------------------------------------------------------------------------------
# Errors, devices, the README snippet
# ---------------------------------------------------------------------------------------------------------------

def expect_error(kind, text, fn):
    try:
        fn()
    except kind as e:
        ok = text in str(e)
        return {"output": f"{kind.__name__}: {text}", "pass": ok, "finite": True, "ratio": 1.0 if ok else 0.0,
                "max_abs_err": 0.0, "message": str(e)}
    return {"output": f"{kind.__name__}: {text}", "pass": False, "finite": True, "ratio": 0.0, "max_abs_err": 0.0,
            "message": "no error"}


def errors():
    B, H, T = 2, 2, 16
    x = torch.randn(B, H, T, T, device=DEV)
    m = torch.ones(B, 1, T, T, dtype=torch.bool, device=DEV)
    big = torch.randn(B * H * T * T + 1, device=DEV)
    shifted = big[1:].view(B, H, T, T)  # contiguous, 4 bytes past a 16-byte boundary
    checks = [
        expect_error(ValueError, "dtype torch.float64", lambda: at.masked_softmax_dropout(x.double(), m, 0.1)),
        expect_error(ValueError, "on cpu", lambda: ops.softmax_dropout_bwd(x, x.cpu(), m, None, 0.0)),
        expect_error(ValueError, "mask: shape", lambda: ops.softmax_dropout_bwd(x, x, m[:1], None, 0.0)),
        expect_error(ValueError, "must be in [0, 1)", lambda: at.masked_softmax_dropout(x, m, 1.0)),
        expect_error(attnbwd.Error, "aligned", lambda: ops.softmax_dropout_bwd(x, shifted, m, None, 0.0)),
        expect_error(ValueError, "seq_len 1025", lambda: at.RegionAwareSelfAttention(device=DEV)(
            torch.randn(1, 1025, 1024, device=DEV), torch.ones(1, 1025, device=DEV))),
    ]
    torch.cuda.synchronize()  # the context is still usable: nothing faulted
    y = ops.softmax_dropout_bwd(x, torch.softmax(x, -1), m, None, 0.0)
    torch.cuda.synchronize()
    checks.append({"output": "a call after the errors", "pass": bool(torch.isfinite(y).all()), "finite": True,
                   "ratio": 1.0, "max_abs_err": 0.0})
    # Any strides: a transposed p_attn and a mask with padded rows (as Inductor may allocate them) give the
    # kernel's result on their dense copies, bit for bit.
    pt = torch.softmax(x, -1).transpose(2, 3)
    padded = torch.ones(B, 1, T, T + 3, dtype=torch.bool, device=DEV)[..., :T]
    strided = ops.softmax_dropout_bwd(x, pt, padded, None, 0.0)
    dense = ops.softmax_dropout_bwd(x, pt.contiguous(), padded.contiguous(), None, 0.0)
    checks.append({"output": "strided inputs = their dense copies", "pass": torch.equal(strided, dense),
                   "finite": bool(torch.isfinite(strided).all()), "ratio": 1.0, "max_abs_err": 0.0})
    return checks


def devices():
    """Each device its own context and kernels; on one GPU, that cuda:0's context is device 0's."""
    n = torch.cuda.device_count()
    checks = []
    for d in range(min(n, 2)):
        dev = torch.device("cuda", d)
        x = torch.randn(1, 2, 17, 17, device=dev, requires_grad=True)
        at.masked_softmax_dropout(x, torch.ones(1, 1, 17, 17, dtype=torch.bool, device=dev), 0.1).sum().backward()
        info = at.device_context(d).info()
        checks.append({"output": f"cuda:{d} context", "pass": info["device"] == d and torch.isfinite(x.grad).all()
                       .item(), "finite": True, "ratio": 1.0, "max_abs_err": 0.0})
    ordinals = sorted({o for o, _ in at.kernels()})
    checks.append({"output": f"kernels on devices {ordinals}", "pass": ordinals == list(range(min(n, 2))) or
                   (n == 1 and ordinals == [0]), "finite": True, "ratio": 1.0, "max_abs_err": 0.0})
    if n > 1:
        checks.append({"output": "two contexts", "pass": at.device_context(0) is not at.device_context(1),
                       "finite": True, "ratio": 1.0, "max_abs_err": 0.0})
    return checks


def quickstart():
    r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "torch_quickstart.py")], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "python")))
    print(r.stdout + r.stderr)
    return [{"output": "examples/torch_quickstart.py", "pass": r.returncode == 0, "finite": True, "ratio": 1.0,
             "max_abs_err": 0.0}]


def main():
    print(f"device: {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}, torch {torch.__version__}",
          flush=True)
    record("errors", "eager", errors)
    record("devices", "eager", devices)
    for row in rows("sol066_workload.jsonl"):
        a = row["axes"]
        B, H, T, p = a["batch_size"], a["n_heads"], a["seq_len"], float(row["inputs"]["p_dropout"]["value"])
        record(f"p1 B={B} H={H} T={T} p={p:g}", "eager", lambda: p1_case(B, H, T, p, "eager"))
    awkward1 = [(2, 3, 1, 0.1, False), (2, 3, 17, 0.1, False), (1, 2, 1000, 0.2, False), (2, 4, 17, 0.0, False),
                (2, 3, 17, 0.1, True), (1, 2, 1000, 0.0, True), (2, 16, 541, 0.1, False)]
    for B, H, T, p, rows_false in awkward1:
        for mode in ("eager", "compiled", "graph"):
            record(f"p1 B={B} H={H} T={T} p={p:g}{' rows-false' if rows_false else ''}", mode,
                   lambda: p1_case(B, H, T, p, mode, rows_false))
    record("p1 masked_softmax_dropout", "eager+compiled", p1_public_wrapper)
    for row in rows("sol072_workload.jsonl"):
        B, T = row["axes"]["batch_size"], row["axes"]["seq_len"]
        atol = float(row["tolerance"]["max_atol"])
        record(f"p2 B={B} T={T} p=0.1 tf32", "eager", lambda: p2_case(B, T, 0.1, "eager", atol))
    awkward2 = [(2, 1, 0.1, "tf32", False), (2, 17, 0.1, "tf32", False), (1, 1000, 0.1, "tf32", False),
                (2, 17, 0.0, "tf32", False), (2, 17, 0.1, "tf32", True), (4, 288, 0.1, "tf32", False),
                (2, 17, 0.1, "fp16", False), (2, 129, 0.1, "fp32", False)]
    for B, T, p, prec, zeros in awkward2:
        for mode in ("eager", "compiled", "graph"):
            record(f"p2 B={B} T={T} p={p:g} {prec}{' mask-zeros' if zeros else ''}", mode,
                   lambda: p2_case(B, T, p, mode, extra_atol(B, T), prec, zeros))
    record("p2 RegionAwareSelfAttention", "eager+compiled", p2_module)
    record("README snippet", "eager", quickstart)
    passed = sum(r["pass"] for r in RESULTS)
    failed = len(RESULTS) - passed
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "torch_gpu.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "results": RESULTS}, f,
                      indent=1)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
