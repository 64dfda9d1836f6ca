"""attnbwd: attention backward passes as CUDA kernels written, compiled and cached at run time.

    import attnbwd
    ctx = attnbwd.Context(arch="sm_90", disk_cache=False)       # no GPU needed to compile
    k = ctx.get_kernel(attnbwd.softmax_dropout_shape(2, 16, 541, dropout=True))
    print(k.info["name"], k.info["tiles"])

attnbwd.torch (imported only when asked, needs PyTorch) has the autograd ops: masked_softmax_dropout and
RegionAwareSelfAttention. The library, libattnbwd.so, is loaded from beside this file ($ATTNBWD_LIBRARY names
another)."""

from . import binding
from .binding import EDIT_INPUTS, EDIT_OUTPUTS, EditAttentionArgs, Shape
from .core import (PRECISIONS, Context, Error, Kernel, edit_attention_shape, library,
                   softmax_dropout_shape)

__version__ = binding.ATTNBWD_VERSION_STRING

__all__ = ["Context", "Kernel", "Error", "Shape", "EditAttentionArgs", "EDIT_INPUTS", "EDIT_OUTPUTS", "PRECISIONS",
           "softmax_dropout_shape", "edit_attention_shape", "library", "binding"]
