"""ctypes binding of include/attnbwd.h, the whole public header: its constants, structs and function prototypes.

One binding for every Python user of libattnbwd.so: the package's Context and Kernel (attnbwd/core.py), attnbwd.torch
and bench/bench.py. No torch and no GPU here. tests/check_ctypes_layout.py compares every struct's layout and every
constant with the C compiler's, and the prototypes with the header's declarations: a struct grown in the header
would otherwise be written past the end of the Python object."""

import ctypes
import os

# Version (ATTNBWD_VERSION_*)
ATTNBWD_VERSION_MAJOR = 0
ATTNBWD_VERSION_MINOR = 1
ATTNBWD_VERSION_PATCH = 0
ATTNBWD_VERSION_STRING = "0.1.0"

# enum attnbwd_status
ATTNBWD_OK = 0
ATTNBWD_ERR_INVALID_ARGUMENT = 1
ATTNBWD_ERR_UNSUPPORTED = 2
ATTNBWD_ERR_OUT_OF_MEMORY = 3
ATTNBWD_ERR_LUA = 4
ATTNBWD_ERR_COMPILE = 5
ATTNBWD_ERR_CACHE = 6
ATTNBWD_ERR_NO_DRIVER = 7
ATTNBWD_ERR_NO_DEVICE = 8
ATTNBWD_ERR_CUDA = 9
ATTNBWD_ERR_IO = 10

# enum attnbwd_problem
ATTNBWD_SOFTMAX_DROPOUT_BWD = 1
ATTNBWD_EDIT_ATTENTION_BWD = 2

# enum attnbwd_log_level
ATTNBWD_LOG_QUIET = 0
ATTNBWD_LOG_WARN = 1
ATTNBWD_LOG_INFO = 2
ATTNBWD_LOG_DEBUG = 3

ATTNBWD_DEVICE_CURRENT = -1

# enum attnbwd_precision
ATTNBWD_PRECISION_TF32 = 0
ATTNBWD_PRECISION_FP32 = 1
ATTNBWD_PRECISION_FP16 = 2

# enum attnbwd_origin
ATTNBWD_FROM_COMPILE = 0
ATTNBWD_FROM_DISK = 1
ATTNBWD_FROM_MEMORY = 2
ORIGINS = {ATTNBWD_FROM_COMPILE: "compile", ATTNBWD_FROM_DISK: "disk", ATTNBWD_FROM_MEMORY: "memory"}

# options.disk_cache, the disk cache's default budget, attnbwd_cache_list's flags
ATTNBWD_DISK_CACHE_READ_ONLY = 2
ATTNBWD_CACHE_DEFAULT_MAX_BYTES = 1 << 30
ATTNBWD_CACHE_VERIFY = 1

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
        ("cache_max_bytes", ctypes.c_uint64),
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


class PrewarmEvent(ctypes.Structure):
    """struct attnbwd_prewarm_event"""
    _fields_ = [
        ("index", ctypes.c_size_t),
        ("done", ctypes.c_size_t),
        ("total", ctypes.c_size_t),
        ("shape", ctypes.POINTER(Shape)),
        ("status", ctypes.c_int),  # enum attnbwd_status
        ("message", ctypes.c_char_p),
        ("origin", ctypes.c_int),  # enum attnbwd_origin
        ("seconds", ctypes.c_double),
    ]


PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(PrewarmEvent), ctypes.c_void_p)


class PrewarmSummary(ctypes.Structure):
    """struct attnbwd_prewarm_summary"""
    _fields_ = [
        ("compiled", ctypes.c_size_t),
        ("from_disk", ctypes.c_size_t),
        ("from_memory", ctypes.c_size_t),
        ("failed", ctypes.c_size_t),
        ("seconds", ctypes.c_double),
    ]


class CtxInfo(ctypes.Structure):
    """struct attnbwd_ctx_info"""
    _fields_ = [
        ("library_version", ctypes.c_char_p),
        ("nvrtc_major", ctypes.c_int),
        ("nvrtc_minor", ctypes.c_int),
        ("driver_version", ctypes.c_int),
        ("driver_error", ctypes.c_char_p),
        ("device_name", ctypes.c_char_p),
        ("arch", ctypes.c_char_p),
        ("cache_dir", ctypes.c_char_p),
        ("disk_cache", ctypes.c_int),
        ("cache_bytes", ctypes.c_uint64),
        ("cache_entries", ctypes.c_uint64),
        ("device", ctypes.c_int),
        ("deterministic", ctypes.c_int),
        ("gpu_model", ctypes.c_char_p),
        ("gpu_model_from", ctypes.c_char_p),
        ("gpu_sm_count", ctypes.c_int),
        ("tuning_table", ctypes.c_char_p),
        ("tuning_note", ctypes.c_char_p),
        ("cache_mode", ctypes.c_char_p),
        ("cache_read", ctypes.c_int),
        ("user_tuning_table", ctypes.c_char_p),
    ]


class CacheStats(ctypes.Structure):
    """struct attnbwd_cache_stats"""
    _fields_ = [
        ("entries", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("max_bytes", ctypes.c_uint64),
        ("hits", ctypes.c_uint64),
        ("misses", ctypes.c_uint64),
        ("evicted", ctypes.c_uint64),
        ("evicted_bytes", ctypes.c_uint64),
        ("since", ctypes.c_int64),
    ]


class CacheEntry(ctypes.Structure):
    """struct attnbwd_cache_entry"""
    _fields_ = [
        ("key", ctypes.c_char_p),
        ("bytes", ctypes.c_uint64),
        ("last_use", ctypes.c_int64),
        ("problem", ctypes.c_char_p),
        ("current", ctypes.c_int),
        ("library_version", ctypes.c_char_p),
        ("nvrtc_version", ctypes.c_char_p),
        ("arch", ctypes.c_char_p),
        ("kernel", ctypes.c_char_p),
        ("tiles", ctypes.c_char_p),
        ("has_shape", ctypes.c_int),
        ("shape", Shape),
        ("gpu_model", ctypes.c_char_p),
    ]


CACHE_ENTRY_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(CacheEntry), ctypes.c_void_p)


STRUCTS = {"attnbwd_options": Options, "attnbwd_shape": Shape, "attnbwd_kernel_info": KernelInfo,
           "attnbwd_edit_attention_args": EditAttentionArgs, "attnbwd_prewarm_event": PrewarmEvent,
           "attnbwd_prewarm_summary": PrewarmSummary, "attnbwd_ctx_info": CtxInfo,
           "attnbwd_cache_stats": CacheStats, "attnbwd_cache_entry": CacheEntry}

_p, _i, _f, _sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_size_t
_u64, _i64, _s = ctypes.c_uint64, ctypes.c_int64, ctypes.c_char_p
_P = ctypes.POINTER

# Every function of the header: name -> (return type, argument types). Opaque handles (attnbwd_ctx *,
# attnbwd_kernel *) and device pointers are c_void_p; enums are c_int.
PROTOTYPES = {
    "attnbwd_status_name": (ctypes.c_char_p, [_i]),
    "attnbwd_last_error": (ctypes.c_char_p, []),
    "attnbwd_options_init": (None, [_P(Options)]),
    "attnbwd_open": (_i, [_P(Options), _P(_p)]),
    "attnbwd_close": (None, [_p]),
    "attnbwd_get_kernel": (_i, [_p, _P(Shape), _P(_p)]),
    "attnbwd_get_kernel_tiles": (_i, [_p, _P(Shape), ctypes.c_char_p, _P(_p)]),
    "attnbwd_candidates": (_i, [_p, _P(Shape), _P(_P(_p)), _P(_sz)]),
    "attnbwd_kernel_get_info": (_i, [_p, _P(KernelInfo)]),
    # kernel, grad_output, p_attn, mask, dropout_mask, p_dropout, grad_scores, stream
    "attnbwd_softmax_dropout_bwd": (_i, [_p, _p, _p, _p, _p, _f, _p, _p]),
    "attnbwd_edit_attention_workspace": (_sz, [_p]),
    "attnbwd_edit_attention_bwd": (_i, [_p, _P(EditAttentionArgs), _p]),
    "attnbwd_generate": (_i, [_p, _P(Shape), _P(_p), _P(_p)]),
    "attnbwd_free": (None, [_p]),
    "attnbwd_prewarm": (_i, [_p, _P(Shape), _sz, _i, PROGRESS_FN, _p, _P(PrewarmSummary)]),
    "attnbwd_ctx_get_info": (_i, [_p, _P(CtxInfo)]),
    "attnbwd_cache_clear": (_i, [_p, _P(_u64), _P(_u64)]),
    "attnbwd_cache_get_stats": (_i, [_p, _P(CacheStats)]),
    # ctx, flags, fn, user, damaged
    "attnbwd_cache_list": (_i, [_p, ctypes.c_uint, CACHE_ENTRY_FN, _p, _P(_u64)]),
    # ctx, max_bytes, older_than_seconds, files, bytes
    "attnbwd_cache_prune": (_i, [_p, _u64, _i64, _P(_u64), _P(_u64)]),
    # ctx, path, key_prefixes, n, entries, bytes
    "attnbwd_cache_export": (_i, [_p, _s, _P(_s), _sz, _P(_u64), _P(_u64)]),
    "attnbwd_cache_import": (_i, [_p, _s, _P(_u64), _P(_u64)]),
}

LIBRARY_NAME = "libattnbwd.so"


def default_library_path():
    """$ATTNBWD_LIBRARY when set, else the libattnbwd.so installed beside this module (the wheel's)."""
    env = os.environ.get("ATTNBWD_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)


def load(path=None):
    """libattnbwd.so loaded by absolute path (no LD_LIBRARY_PATH needed), every prototype of the header set."""
    path = os.path.abspath(path or default_library_path())
    if not os.path.exists(path):
        raise OSError(f"{path}: no such file; build the package (pip install .) or set ATTNBWD_LIBRARY to a "
                      f"libattnbwd.so")
    lib = ctypes.CDLL(path)
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    lib.path = path
    return lib
