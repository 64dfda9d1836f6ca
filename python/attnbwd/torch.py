"""PyTorch ops whose backward pass is attnbwd's kernels (import attnbwd.torch; needs torch, runs on CUDA).

    from attnbwd.torch import masked_softmax_dropout, RegionAwareSelfAttention
    probs = masked_softmax_dropout(scores, mask, p=0.1, training=True)       # problem 1
    attn = RegionAwareSelfAttention(dropout=0.1, precision="tf32").cuda()  # problem 2
    out = attn(hidden_states, edit_region_mask)

Each forward pass is the spec's, in PyTorch, and saves what the kernel's backward reads; the backward is one call of
the library's kernel. Both are torch.library custom ops (attnbwd::masked_softmax_dropout, attnbwd::edit_attention,
and their backward ops attnbwd::softmax_dropout_bwd and attnbwd::edit_attention_bwd) with fake implementations and
registered autograd formulas: they run in eager mode, under torch.compile(fullgraph=True) without a graph break, and
inside a captured CUDA graph (after one call outside it, which compiles and loads the kernel).

The kernels run on the tensors' device, on its current stream, with nothing synchronised on the way; each device
gets its own library context (device_context) and each (device, shape) its kernel object, kept for the process.
Problem 2's workspace comes from PyTorch's caching allocator. Tensors are checked (fp32, on one CUDA device, the
spec's shapes) before anything is launched: a wrong one is a ValueError naming it. Any strides are taken: a tensor
that is not contiguous reaches the kernel as a dense copy."""

import threading
from typing import Optional, Tuple

import torch
from torch import Tensor

# The kernels read their tensors as dense rows: the ops ask torch.compile for tensors with exactly the strides
# they had when traced (contiguous), which saves the copy _dense makes of a buffer with padded rows.
_EXACT = tuple(getattr(torch.Tag, n) for n in ("needs_exact_strides",) if hasattr(torch.Tag, n))

from . import binding as b
from .core import PRECISIONS, Context, edit_attention_shape, softmax_dropout_shape

# The score given to masked positions before the softmax (as The Annotated Transformer's attention does): finite,
# so a row with every position masked gets a uniform row instead of NaN; its gradient is zero there.
MASK_FILL = -1e9

HIDDEN, HEADS, HEAD_DIM, POSITIONS = 1024, 16, 64, 1024

_lock = threading.Lock()
_contexts = {}  # CUDA ordinal -> Context
_kernels = {}  # (CUDA ordinal, shape key) -> Kernel


def device_context(device):
    """The library context of a CUDA device (a torch.device, "cuda:1" or an ordinal), opened on first use with the
    default options ($ATTNBWD_CACHE_DIR or ~/.cache/attnbwd for the disk cache)."""
    index = _ordinal(device)
    ctx = _contexts.get(index)
    if ctx is None:
        with _lock:
            ctx = _contexts.get(index)
            if ctx is None:
                ctx = _contexts[index] = Context(device=index)
    return ctx


def kernels():
    """Every kernel this process has asked for: [(CUDA ordinal, its info dict)], info["origin"] saying whether it
    was compiled here or read from the disk cache."""
    with _lock:
        return [(key[0], k.info) for key, k in _kernels.items()]


def _ordinal(device):
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"attnbwd runs on CUDA devices, not {device}")
    return device.index if device.index is not None else torch.cuda.current_device()


def _kernel(device, key, make_shape):
    index = _ordinal(device)
    k = _kernels.get((index, key))
    if k is None:
        k = device_context(index).get_kernel(make_shape())
        with _lock:
            k = _kernels.setdefault((index, key), k)
    return k


def _stream(device):
    return torch.cuda.current_stream(device).cuda_stream


def _check(name, t, shape, dtype=torch.float32, device=None):
    """ValueError naming the tensor unless it is a `dtype` tensor of `shape` on CUDA `device` (any strides: the
    ops hand the kernels dense copies where a tensor is not, see _dense)."""
    if not isinstance(t, Tensor):
        raise ValueError(f"{name}: expected a tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise ValueError(f"{name}: dtype {t.dtype}, expected {dtype}")
    if t.device.type != "cuda":
        raise ValueError(f"{name}: on {t.device}; attnbwd runs on CUDA devices")
    if device is not None and t.device != device:
        raise ValueError(f"{name}: on {t.device}, the other tensors on {device}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name}: shape {tuple(t.shape)}, expected {tuple(shape)}")


def _dense(*tensors):
    """The tensors as the kernels read them, dense rows: each itself where it is contiguous, else a copy. Inductor
    may hand an op buffers with padded rows whatever strides it traced (a [B,1,33,33] mask with rows of 36), so the
    ops take any strides rather than refuse them."""
    return [t.contiguous() if t is not None else None for t in tensors]


def _check_p(p):
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability {p}: must be in [0, 1)")


# ---------------------------------------------------------------------------------------------------------------
# Problem 1: masked softmax with attention dropout
# ---------------------------------------------------------------------------------------------------------------

def _check_softmax_bwd(grad_output, p_attn, mask, dropout_mask, p):
    if grad_output.dim() != 4 or grad_output.shape[2] != grad_output.shape[3]:
        raise ValueError(f"grad_output: shape {tuple(grad_output.shape)}, expected [B, H, T, T]")
    B, H, T, _ = grad_output.shape
    dev = grad_output.device
    _check("grad_output", grad_output, (B, H, T, T))
    _check("p_attn", p_attn, (B, H, T, T), device=dev)
    _check("mask", mask, (B, 1, T, T), torch.bool, dev)
    _check_p(p)
    if p > 0:
        if dropout_mask is None:
            raise ValueError(f"dropout_mask: None with p = {p} > 0")
        _check("dropout_mask", dropout_mask, (B, H, T, T), torch.bool, dev)
    return B, H, T


@torch.library.custom_op("attnbwd::softmax_dropout_bwd", mutates_args=(), tags=_EXACT)
def softmax_dropout_bwd(grad_output: Tensor, p_attn: Tensor, mask: Tensor, dropout_mask: Optional[Tensor],
                        p: float) -> Tensor:
    """Problem 1's backward (spec softmax_dropout_bwd.md): grad_output, p_attn fp32 [B,H,T,T], mask bool
    [B,1,T,T], dropout_mask bool [B,H,T,T] (not read when p == 0; may be None then). Returns grad_scores."""
    B, H, T = _check_softmax_bwd(grad_output, p_attn, mask, dropout_mask, p)
    grad_output, p_attn, mask, dropout_mask = _dense(grad_output, p_attn, mask, dropout_mask if p > 0 else None)
    dev = grad_output.device
    k = _kernel(dev, ("softmax_dropout", B, H, T, p > 0), lambda: softmax_dropout_shape(B, H, T, p > 0))
    grad_scores = torch.empty_like(grad_output)
    k.softmax_dropout_bwd(grad_output.data_ptr(), p_attn.data_ptr(), mask.data_ptr(),
                          dropout_mask.data_ptr() if p > 0 else 0, p, grad_scores.data_ptr(), _stream(dev))
    return grad_scores


@softmax_dropout_bwd.register_fake
def _(grad_output, p_attn, mask, dropout_mask, p):
    _check_softmax_bwd(grad_output, p_attn, mask, dropout_mask, p)
    return torch.empty_like(grad_output)


def _check_softmax_fwd(scores, mask, p):
    if scores.dim() != 4 or scores.shape[2] != scores.shape[3]:
        raise ValueError(f"scores: shape {tuple(scores.shape)}, expected [B, H, T, T]")
    B, H, T, _ = scores.shape
    _check("scores", scores, (B, H, T, T))
    _check("mask", mask, (B, 1, T, T), torch.bool, scores.device)
    _check_p(p)


@torch.library.custom_op("attnbwd::masked_softmax_dropout", mutates_args=(), tags=_EXACT)
def _masked_softmax_dropout(scores: Tensor, mask: Tensor, p: float) -> Tuple[Tensor, Tensor, Tensor]:
    """(output, p_attn, dropout_mask): p_attn = softmax(scores, masked positions filled with MASK_FILL), output =
    p_attn * dropout_mask / (1-p). With p == 0 output is p_attn and the other two are empty."""
    _check_softmax_fwd(scores, mask, p)
    p_attn = torch.softmax(scores.masked_fill(~mask, MASK_FILL), dim=-1)
    if p == 0:
        return p_attn, p_attn.new_empty(0), mask.new_empty(0)
    keep = torch.empty_like(p_attn, dtype=torch.bool).bernoulli_(1.0 - p)
    return p_attn * keep * (1.0 / (1.0 - p)), p_attn, keep


@_masked_softmax_dropout.register_fake
def _(scores, mask, p):
    _check_softmax_fwd(scores, mask, p)
    if p == 0:
        return torch.empty_like(scores), scores.new_empty(0), mask.new_empty(0)
    return torch.empty_like(scores), torch.empty_like(scores), torch.empty_like(scores, dtype=torch.bool)


def _softmax_setup(ctx, inputs, output):
    _, mask, p = inputs
    out, p_attn, keep = output
    ctx.p = p
    ctx.save_for_backward(p_attn if p > 0 else out, mask, keep)


def _softmax_backward(ctx, grad_out, _grad_p_attn, _grad_keep):
    p_attn, mask, keep = ctx.saved_tensors
    grad = softmax_dropout_bwd(grad_out, p_attn, mask, keep if ctx.p > 0 else None, ctx.p)
    return grad, None, None


_masked_softmax_dropout.register_autograd(_softmax_backward, setup_context=_softmax_setup)


def masked_softmax_dropout(scores, mask, p, training=True):
    """dropout(softmax(scores.masked_fill(~mask, MASK_FILL)), p) with attnbwd's kernel as its backward.

    scores: fp32 [B, H, T, T] on a CUDA device; mask: bool, True = kept, [B, 1, T, T] or any shape that broadcasts
    to it (e.g. [B, 1, 1, T], a key padding mask); p: the dropout probability, in [0, 1), applied only when
    training. The dropout mask is drawn from PyTorch's generator (torch.manual_seed applies)."""
    if scores.dim() != 4:
        raise ValueError(f"scores: shape {tuple(scores.shape)}, expected [B, H, T, T]")
    B, _, T, _ = scores.shape
    if mask.dtype != torch.bool:
        raise ValueError(f"mask: dtype {mask.dtype}, expected torch.bool (True = kept)")
    if tuple(mask.shape) != (B, 1, T, T) or not mask.is_contiguous():
        mask = mask.expand(B, 1, T, T).contiguous()
    return _masked_softmax_dropout(scores, mask, float(p) if training else 0.0)[0]


# ---------------------------------------------------------------------------------------------------------------
# Problem 2: region-aware self-attention with edit bias
# ---------------------------------------------------------------------------------------------------------------

def _check_edit_inputs(hidden_states, edit_region_mask, attention_mask, qkv_weight, out_weight):
    if hidden_states.dim() != 3 or hidden_states.shape[2] != HIDDEN:
        raise ValueError(f"hidden_states: shape {tuple(hidden_states.shape)}, expected [B, T, {HIDDEN}]")
    B, T, _ = hidden_states.shape
    if T > POSITIONS:
        raise ValueError(f"seq_len {T}: at most {POSITIONS} (the positions of edit_region_bias)")
    dev = hidden_states.device
    _check("hidden_states", hidden_states, (B, T, HIDDEN))
    _check("edit_region_mask", edit_region_mask, (B, T), device=dev)
    _check("attention_mask", attention_mask, (B, T), device=dev)
    _check("qkv_weight", qkv_weight, (3 * HIDDEN, HIDDEN), device=dev)
    _check("out_weight", out_weight, (HIDDEN, HIDDEN), device=dev)
    return B, T, dev


def _check_edit_bwd(grad_output, hidden_states, edit_region_mask, qkv_weight, out_weight, attention_mask, query,
                    key, value, attention_probs, attention_probs_dropped, attention_output, dropout_p, precision):
    B, T, dev = _check_edit_inputs(hidden_states, edit_region_mask, attention_mask, qkv_weight, out_weight)
    _check("grad_output", grad_output, (B, T, HIDDEN), device=dev)
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check(name, t, (B, HEADS, T, HEAD_DIM), device=dev)
    _check("attention_probs", attention_probs, (B, HEADS, T, T), device=dev)
    _check("attention_probs_dropped", attention_probs_dropped, (B, HEADS, T, T), device=dev)
    _check("attention_output", attention_output, (B, T, HIDDEN), device=dev)
    _check_p(dropout_p)
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    return B, T, dev


def _edit_grads_like(hidden_states):
    """Empty tensors for the 8 gradients, in the spec's order."""
    B, T, _ = hidden_states.shape
    new = hidden_states.new_empty
    return (new(B, T, HIDDEN), new(3 * HIDDEN, HIDDEN), new(3 * HIDDEN), new(HIDDEN, HIDDEN), new(HIDDEN),
            new(HEADS, POSITIONS, POSITIONS), new(HEADS), new(HEADS))


@torch.library.custom_op("attnbwd::edit_attention_bwd", mutates_args=(), tags=_EXACT)
def edit_attention_bwd(grad_output: Tensor, hidden_states: Tensor, edit_region_mask: Tensor, qkv_weight: Tensor,
                       out_weight: Tensor, attention_mask: Tensor, query: Tensor, key: Tensor, value: Tensor,
                       attention_probs: Tensor, attention_probs_dropped: Tensor, attention_output: Tensor,
                       scale: float, dropout_p: float, precision: str
                       ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Problem 2's backward (spec edit_attention_bwd.md) on the inputs the kernel reads; returns grad_hidden_states,
    grad_qkv_weight, grad_qkv_bias, grad_out_weight, grad_out_bias, grad_edit_region_bias [16,1024,1024],
    grad_within_edit_bias [16], grad_cross_edit_bias [16]. attention_probs_dropped must be attention_probs * the
    dropout mask / (1 - dropout_p), attention_output = attention_probs_dropped @ value per head (the forward's)."""
    B, T, dev = _check_edit_bwd(grad_output, hidden_states, edit_region_mask, qkv_weight, out_weight,
                                attention_mask, query, key, value, attention_probs, attention_probs_dropped,
                                attention_output, dropout_p, precision)
    k = _kernel(dev, ("edit_attention", B, T, dropout_p > 0, precision),
                lambda: edit_attention_shape(B, T, dropout_p > 0, precision))
    grads = _edit_grads_like(hidden_states)
    workspace = torch.empty(k.workspace_bytes, dtype=torch.uint8, device=dev)  # the caching allocator's
    a = b.EditAttentionArgs()
    inputs = {"grad_output": grad_output, "hidden_states": hidden_states, "edit_region_mask": edit_region_mask,
              "qkv_weight": qkv_weight, "out_weight": out_weight, "attention_mask": attention_mask, "query": query,
              "key": key, "value": value, "attention_probs": attention_probs,
              "attention_probs_dropped": attention_probs_dropped, "attention_output": attention_output}
    inputs = dict(zip(inputs, _dense(*inputs.values())))  # kept alive until the kernel is enqueued
    for name, t in inputs.items():  # the inputs the kernel does not read stay NULL
        setattr(a, name, t.data_ptr())
    for name, t in zip(b.EDIT_OUTPUTS, grads):
        setattr(a, name, t.data_ptr())
    a.scale, a.dropout_p = scale, dropout_p
    a.workspace = workspace.data_ptr() if workspace.numel() else None
    a.workspace_bytes = workspace.numel()
    k.edit_attention_bwd(a, _stream(dev))
    return grads


@edit_attention_bwd.register_fake
def _(grad_output, hidden_states, edit_region_mask, qkv_weight, out_weight, attention_mask, query, key, value,
      attention_probs, attention_probs_dropped, attention_output, scale, dropout_p, precision):
    _check_edit_bwd(grad_output, hidden_states, edit_region_mask, qkv_weight, out_weight, attention_mask, query,
                    key, value, attention_probs, attention_probs_dropped, attention_output, dropout_p, precision)
    return _edit_grads_like(hidden_states)


def _check_edit_fwd(hidden_states, edit_region_mask, attention_mask, qkv_weight, qkv_bias, out_weight, out_bias,
                    edit_region_bias, within_edit_bias, cross_edit_bias, p, precision):
    B, T, dev = _check_edit_inputs(hidden_states, edit_region_mask, attention_mask, qkv_weight, out_weight)
    _check("qkv_bias", qkv_bias, (3 * HIDDEN,), device=dev)
    _check("out_bias", out_bias, (HIDDEN,), device=dev)
    _check("edit_region_bias", edit_region_bias, (HEADS, POSITIONS, POSITIONS), device=dev)
    _check("within_edit_bias", within_edit_bias, (HEADS, 1, 1), device=dev)
    _check("cross_edit_bias", cross_edit_bias, (HEADS, 1, 1), device=dev)
    _check_p(p)
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    return B, T


@torch.library.custom_op("attnbwd::edit_attention", mutates_args=(), tags=_EXACT)
def _edit_attention(hidden_states: Tensor, edit_region_mask: Tensor, attention_mask: Tensor, qkv_weight: Tensor,
                    qkv_bias: Tensor, out_weight: Tensor, out_bias: Tensor, edit_region_bias: Tensor,
                    within_edit_bias: Tensor, cross_edit_bias: Tensor, scale: float, p: float, precision: str
                    ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The spec's forward: (output, query, key, value, probs, probs_dropped, attention_output); probs_dropped is
    empty when p == 0 (it is probs then). precision only reaches the backward."""
    B, T = _check_edit_fwd(hidden_states, edit_region_mask, attention_mask, qkv_weight, qkv_bias, out_weight,
                           out_bias, edit_region_bias, within_edit_bias, cross_edit_bias, p, precision)
    qkv = (hidden_states @ qkv_weight.t() + qkv_bias).view(B, T, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
    q, k, v = (qkv[i].contiguous() for i in range(3))
    mi = edit_region_mask[:, None, :, None]  # query i
    mj = edit_region_mask[:, None, None, :]  # key j
    scores = (q @ k.transpose(-1, -2)) * scale + edit_region_bias[:, :T, :T]
    scores = scores + within_edit_bias * (mi * mj) + cross_edit_bias * (mi * (1 - mj) + (1 - mi) * mj)
    probs = scores.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf")).softmax(dim=-1)
    if p > 0:
        keep = torch.empty_like(probs, dtype=torch.bool).bernoulli_(1.0 - p)
        dropped = probs * keep * (1.0 / (1.0 - p))
    else:
        dropped = probs
    attention_output = (dropped @ v).transpose(1, 2).reshape(B, T, HIDDEN)
    output = attention_output @ out_weight.t() + out_bias
    return output, q, k, v, probs, dropped if p > 0 else probs.new_empty(0), attention_output


@_edit_attention.register_fake
def _(hidden_states, edit_region_mask, attention_mask, qkv_weight, qkv_bias, out_weight, out_bias,
      edit_region_bias, within_edit_bias, cross_edit_bias, scale, p, precision):
    B, T = _check_edit_fwd(hidden_states, edit_region_mask, attention_mask, qkv_weight, qkv_bias, out_weight,
                           out_bias, edit_region_bias, within_edit_bias, cross_edit_bias, p, precision)
    new = hidden_states.new_empty
    heads = (B, HEADS, T, HEAD_DIM)
    return (new(B, T, HIDDEN), new(heads), new(heads), new(heads), new(B, HEADS, T, T),
            new(B, HEADS, T, T) if p > 0 else new(0), new(B, T, HIDDEN))


def _edit_setup(ctx, inputs, output):
    hidden_states, edit_region_mask, attention_mask, qkv_weight, _, out_weight = inputs[:6]
    ctx.scale, ctx.p, ctx.precision = inputs[10:13]
    _, q, k, v, probs, dropped, attention_output = output
    ctx.save_for_backward(hidden_states, edit_region_mask, attention_mask, qkv_weight, out_weight, q, k, v, probs,
                          dropped if ctx.p > 0 else probs, attention_output)


def _edit_backward(ctx, grad_output, *_unused):
    hidden_states, edit_region_mask, attention_mask, qkv_weight, out_weight, q, k, v, probs, dropped, \
        attention_output = ctx.saved_tensors
    g = edit_attention_bwd(grad_output.contiguous(), hidden_states, edit_region_mask, qkv_weight, out_weight,
                           attention_mask, q, k, v, probs, dropped, attention_output, ctx.scale, ctx.p,
                           ctx.precision)
    grad_hidden, grad_qkv_w, grad_qkv_b, grad_out_w, grad_out_b, grad_erb, grad_within, grad_cross = g
    return (grad_hidden, None, None, grad_qkv_w, grad_qkv_b, grad_out_w, grad_out_b, grad_erb,
            grad_within.view(HEADS, 1, 1), grad_cross.view(HEADS, 1, 1), None, None, None)


_edit_attention.register_autograd(_edit_backward, setup_context=_edit_setup)


class RegionAwareSelfAttention(torch.nn.Module):
    """Region-aware self-attention with edit bias (spec edit_attention_bwd.md): hidden 1024, 16 heads of 64, T up to
    1024. forward(hidden_states [B,T,1024], edit_region_mask [B,T] (0/1), attention_mask [B,T] (1 valid, 0 masked;
    None: all valid)) -> [B,T,1024]. The forward is PyTorch's (its matrix products follow torch's TF32 settings);
    the backward is attnbwd's kernel with `precision`: "tf32" (default), "fp16" (which products take
    fp16 operands: attnbwd.h's attnbwd_precision) or exact "fp32".
    Parameters are drawn as the public benchmark draws them: weights and edit biases 0.02 * randn, biases 0."""

    def __init__(self, dropout=0.1, precision="tf32", device=None):
        super().__init__()
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
        _check_p(dropout)
        self.dropout, self.precision, self.scale = float(dropout), precision, HEAD_DIM ** -0.5

        def param(*shape, std=0.02):
            t = torch.randn(*shape, device=device) * std if std else torch.zeros(*shape, device=device)
            return torch.nn.Parameter(t)

        self.qkv_weight = param(3 * HIDDEN, HIDDEN)
        self.qkv_bias = param(3 * HIDDEN, std=0)
        self.out_weight = param(HIDDEN, HIDDEN)
        self.out_bias = param(HIDDEN, std=0)
        self.edit_region_bias = param(HEADS, POSITIONS, POSITIONS)
        self.within_edit_bias = param(HEADS, 1, 1)
        self.cross_edit_bias = param(HEADS, 1, 1)

    def forward(self, hidden_states, edit_region_mask, attention_mask=None):
        if attention_mask is None:
            attention_mask = hidden_states.new_ones(hidden_states.shape[:2])
        p = self.dropout if self.training else 0.0
        return _edit_attention(hidden_states, edit_region_mask, attention_mask, self.qkv_weight, self.qkv_bias,
                               self.out_weight, self.out_bias, self.edit_region_bias, self.within_edit_bias,
                               self.cross_edit_bias, self.scale, p, self.precision)[0]

    def extra_repr(self):
        return f"dropout={self.dropout}, precision={self.precision!r}"
