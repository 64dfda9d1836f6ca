"""attnbwd's two ops from PyTorch, as the README shows them (the lines between the markers are the README's snippet;
python/tests/test_readme.py checks that they agree, python/tests/test_torch_gpu.py runs this file).

    PYTHONPATH=python ATTNBWD_LIBRARY=build/libattnbwd.so python3 examples/torch_quickstart.py   (or after pip install .)
"""
# [readme begin]
import torch
from attnbwd.torch import masked_softmax_dropout, RegionAwareSelfAttention

# Problem 1: softmax over masked scores, then dropout; the backward is attnbwd's kernel.
scores = torch.randn(2, 16, 541, 541, device="cuda", requires_grad=True)
mask = torch.rand(2, 1, 541, 541, device="cuda") > 0.5          # True = kept
probs = masked_softmax_dropout(scores, mask, p=0.1)
probs.sum().backward()

# Problem 2: the attention block as a module; its backward is attnbwd's kernel ("tf32", "fp16" or "fp32").
attn = RegionAwareSelfAttention(dropout=0.1, precision="tf32").cuda()
hidden = torch.randn(4, 288, 1024, device="cuda", requires_grad=True)
edit_region = (torch.rand(4, 288, device="cuda") > 0.5).float()
attn(hidden, edit_region).sum().backward()
# [readme end]

assert torch.isfinite(scores.grad).all() and torch.isfinite(hidden.grad).all()
print(f"problem 1: grad {tuple(scores.grad.shape)}; problem 2: grad {tuple(hidden.grad.shape)}, "
      f"edit_region_bias grad {tuple(attn.edit_region_bias.grad.shape)}")
