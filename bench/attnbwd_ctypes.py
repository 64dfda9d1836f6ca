"""ctypes binding of include/attnbwd.h: the constants and structs that bench/bench.py (and tools built on it)
pass to libattnbwd.so. No torch here, so that tests/check_ctypes_layout.py can compare these layouts with the
C compiler's on a machine without a GPU (a struct that drifted from the header would corrupt memory)."""

import ctypes


ATTNBWD_OK = 0
ATTNBWD_SOFTMAX_DROPOUT_BWD = 1
ATTNBWD_EDIT_ATTENTION_BWD = 2
ORIGINS = {0: "compile", 1: "disk", 2: "memory"}

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class Options(ctypes.Structure):
    """struct attnbwd_options"""
    _fields_ = [
        ("device", ctypes.c_int),
        ("cache_dir", ctypes.c_char_p),
        ("disk_cache", ctypes.c_int),
        ("arch", ctypes.c_char_p),
        ("log_level", ctypes.c_int),
        ("log_fn", LOG_FN),
        ("log_user", ctypes.c_void_p),
        ("deterministic", ctypes.c_int),
        ("gpu_model", ctypes.c_char_p),
    ]


class Shape(ctypes.Structure):
    """struct attnbwd_shape"""
    _fields_ = [
        ("problem", ctypes.c_int),  # enum attnbwd_problem
        ("batch", ctypes.c_int64),
        ("heads", ctypes.c_int64),
        ("seq_len", ctypes.c_int64),
        ("dropout", ctypes.c_int),
        ("precision", ctypes.c_int),
    ]


class KernelInfo(ctypes.Structure):
    """struct attnbwd_kernel_info"""
    _fields_ = [
        ("shape", Shape),
        ("name", ctypes.c_char_p),
        ("arch", ctypes.c_char_p),
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_uint),
        ("tiles", ctypes.c_char_p),
        ("cache_key", ctypes.c_char_p),
        ("origin", ctypes.c_int),  # enum attnbwd_origin
        ("build_seconds", ctypes.c_double),
        ("cubin_bytes", ctypes.c_size_t),
        ("unordered_outputs", ctypes.c_uint),
    ]


EDIT_INPUTS = ["grad_output", "hidden_states", "edit_region_mask", "qkv_weight", "qkv_bias", "out_weight",
               "out_bias", "edit_region_bias", "within_edit_bias", "cross_edit_bias", "attention_mask", "query", "key",
               "value", "attention_scores", "attention_probs", "attention_probs_dropped", "attention_output",
               "dropout_mask"]
EDIT_OUTPUTS = ["grad_hidden_states", "grad_qkv_weight", "grad_qkv_bias", "grad_out_weight", "grad_out_bias",
                "grad_edit_region_bias", "grad_within_edit_bias", "grad_cross_edit_bias"]


class EditAttentionArgs(ctypes.Structure):
    """struct attnbwd_edit_attention_args: 19 input pointers, scale, dropout_p, 8 output pointers, workspace"""
    _fields_ = ([(name, ctypes.c_void_p) for name in EDIT_INPUTS]
                + [("scale", ctypes.c_float), ("dropout_p", ctypes.c_float)]
                + [(name, ctypes.c_void_p) for name in EDIT_OUTPUTS]
                + [("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t)])
