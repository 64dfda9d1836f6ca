"""The library's objects in Python: Context (attnbwd_ctx), Kernel (attnbwd_kernel) and Error, over the ctypes
binding (attnbwd/binding.py). Pointers are integers (a tensor's data_ptr(), a stream's cuda_stream); nothing here
needs torch or a GPU: a Context with arch="sm_90" compiles kernels on any machine."""

import ctypes
import os
import threading

from . import binding as b

PRECISIONS = {"tf32": b.ATTNBWD_PRECISION_TF32, "fp32": b.ATTNBWD_PRECISION_FP32, "fp16": b.ATTNBWD_PRECISION_FP16}

_lib = None
_lib_lock = threading.Lock()


def library():
    """The loaded libattnbwd.so (binding.load(), once per process)."""
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = b.load()
        return _lib


class Error(RuntimeError):
    """A call into libattnbwd failed: .status (an ATTNBWD_ERR_* value), .status_name and .message (the library's
    attnbwd_last_error(): which argument, which limit, NVRTC's log)."""

    def __init__(self, status, message, what=""):
        self.status = status
        self.status_name = library().attnbwd_status_name(status).decode()
        self.message = message
        super().__init__(f"{what + ': ' if what else ''}{self.status_name}: {message}")


def check(status, what):
    """Raises Error for a status other than ATTNBWD_OK. The message is read on the calling thread, right after the
    call: attnbwd_last_error() is per thread."""
    if status != b.ATTNBWD_OK:
        raise Error(status, (library().attnbwd_last_error() or b"").decode(errors="replace"), what)


def _text(s):
    return s.decode() if s else ""


def softmax_dropout_shape(batch, heads, seq_len, dropout):
    """Problem 1's shape; dropout: True exactly when p_dropout > 0 will be passed."""
    return b.Shape(problem=b.ATTNBWD_SOFTMAX_DROPOUT_BWD, batch=batch, heads=heads, seq_len=seq_len,
                   dropout=1 if dropout else 0, precision=0)


def edit_attention_shape(batch, seq_len, dropout=True, precision="tf32"):
    """Problem 2's shape (16 heads); precision "tf32", "fp16" or "fp32"."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    return b.Shape(problem=b.ATTNBWD_EDIT_ATTENTION_BWD, batch=batch, heads=16, seq_len=seq_len,
                   dropout=1 if dropout else 0, precision=PRECISIONS[precision])


class Context:
    """attnbwd_open's context: one device (or only an arch to compile for), its kernels and cache folder.

    device: a CUDA ordinal, or None for the thread's current device; arch: e.g. "sm_90" to compile without a GPU;
    cache_dir: None for $ATTNBWD_CACHE_DIR or ~/.cache/attnbwd; disk_cache=False keeps kernels in memory only,
    "ro" reads a shared store without writing it; cache_max_bytes: the folder's budget (None: $ATTNBWD_CACHE_MAX_BYTES
    or 1 GiB); gpu_model: the GPU the kernels are for ("h100", "h200", a driver's name; None: the device's);
    log: None (lines to stderr) or a function (level, line); log_level: an ATTNBWD_LOG_* value."""

    def __init__(self, device=None, arch=None, cache_dir=None, disk_cache=True, deterministic=False, log=None,
                 log_level=None, cache_max_bytes=None, gpu_model=None):
        self._lib = library()
        opt = b.Options()
        self._lib.attnbwd_options_init(ctypes.byref(opt))
        opt.device = b.ATTNBWD_DEVICE_CURRENT if device is None else int(device)
        self._keep = [arch.encode() if arch else None, cache_dir.encode() if cache_dir else None,
                      gpu_model.encode() if gpu_model else None]
        opt.arch, opt.cache_dir, opt.gpu_model = self._keep
        if disk_cache == "ro":
            opt.disk_cache = b.ATTNBWD_DISK_CACHE_READ_ONLY
        else:
            opt.disk_cache = 1 if disk_cache else 0
        if cache_max_bytes is not None:
            opt.cache_max_bytes = int(cache_max_bytes)
        opt.deterministic = 1 if deterministic else 0
        if log_level is not None:
            opt.log_level = int(log_level)
        if log is not None:
            # Kept on the context: the library calls it from any thread as long as the context lives.
            self._log_fn = b.LOG_FN(lambda level, line, user: log(level, line.decode(errors="replace")))
            opt.log_fn = self._log_fn
        handle = ctypes.c_void_p()
        check(self._lib.attnbwd_open(ctypes.byref(opt), ctypes.byref(handle)), "attnbwd_open")
        self._handle = handle
        self._kernels = {}

    @property
    def handle(self):
        if not self._handle:
            raise Error(b.ATTNBWD_ERR_INVALID_ARGUMENT, "the context is closed")
        return self._handle

    def close(self):
        """Unloads the context's modules; its kernels become unusable."""
        if getattr(self, "_handle", None):
            self._lib.attnbwd_close(self._handle)
            self._handle = None
            self._kernels.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def get_kernel(self, shape, tiles=None):
        """The Kernel for a Shape (softmax_dropout_shape, edit_attention_shape): from memory, the disk cache, or
        compiled. tiles: "key=value ..." over the heuristic's (attnbwd_get_kernel_tiles)."""
        handle = ctypes.c_void_p()
        if tiles is None:
            check(self._lib.attnbwd_get_kernel(self.handle, ctypes.byref(shape), ctypes.byref(handle)),
                  "attnbwd_get_kernel")
        else:
            check(self._lib.attnbwd_get_kernel_tiles(self.handle, ctypes.byref(shape), tiles.encode(),
                                                     ctypes.byref(handle)), "attnbwd_get_kernel_tiles")
        kernel = self._kernels.get(handle.value)
        if kernel is None:
            kernel = self._kernels[handle.value] = Kernel(self, handle)
        return kernel

    def candidates(self, shape):
        """The tile choices the problem's script offers for a shape, the heuristic's first."""
        arr, n = ctypes.POINTER(ctypes.c_void_p)(), ctypes.c_size_t()
        check(self._lib.attnbwd_candidates(self.handle, ctypes.byref(shape), ctypes.byref(arr), ctypes.byref(n)),
              "attnbwd_candidates")
        try:
            return [ctypes.string_at(arr[i]).decode() for i in range(n.value)]
        finally:
            for i in range(n.value):
                self._lib.attnbwd_free(arr[i])
            self._lib.attnbwd_free(arr)

    def generate(self, shape):
        """(CUDA source, tile choices) for a shape, without compiling."""
        src, tiles = ctypes.c_void_p(), ctypes.c_void_p()
        check(self._lib.attnbwd_generate(self.handle, ctypes.byref(shape), ctypes.byref(src), ctypes.byref(tiles)),
              "attnbwd_generate")
        try:
            return ctypes.string_at(src).decode(), ctypes.string_at(tiles).decode()
        finally:
            self._lib.attnbwd_free(src)
            self._lib.attnbwd_free(tiles)

    def prewarm(self, shapes, threads=0, progress=None):
        """Finds in the cache or compiles every shape's kernel. progress: None or a function (event dict). Returns
        the summary as a dict; raises Error when a shape failed."""
        shapes = list(shapes)
        arr = (b.Shape * len(shapes))(*shapes)
        summary = b.PrewarmSummary()

        def on_event(ev, user):
            e = ev.contents
            progress({"index": e.index, "done": e.done, "total": e.total, "status": e.status,
                      "message": _text(e.message), "origin": b.ORIGINS.get(e.origin, e.origin),
                      "seconds": e.seconds})

        fn = b.PROGRESS_FN(on_event) if progress else b.PROGRESS_FN()
        status = self._lib.attnbwd_prewarm(self.handle, arr, len(shapes), threads, fn, None, ctypes.byref(summary))
        check(status, "attnbwd_prewarm")
        return {k: getattr(summary, k) for k, _ in b.PrewarmSummary._fields_}

    def info(self):
        """attnbwd_ctx_get_info as a dict: library and NVRTC versions, driver, device, arch, cache folder and size."""
        i = b.CtxInfo()
        check(self._lib.attnbwd_ctx_get_info(self.handle, ctypes.byref(i)), "attnbwd_ctx_get_info")
        return {name: _text(getattr(i, name)) if t is ctypes.c_char_p else getattr(i, name)
                for name, t in b.CtxInfo._fields_}

    def cache_clear(self):
        """Empties the disk cache folder; returns (files, bytes) removed."""
        files, nbytes = ctypes.c_uint64(), ctypes.c_uint64()
        check(self._lib.attnbwd_cache_clear(self.handle, ctypes.byref(files), ctypes.byref(nbytes)),
              "attnbwd_cache_clear")
        return files.value, nbytes.value

    def cache_stats(self):
        """attnbwd_cache_get_stats as a dict: entries, bytes, max_bytes, hits, misses, evicted, evicted_bytes and
        since (unix seconds, 0 when nothing is counted yet), all processes' counts."""
        st = b.CacheStats()
        check(self._lib.attnbwd_cache_get_stats(self.handle, ctypes.byref(st)), "attnbwd_cache_get_stats")
        return {name: getattr(st, name) for name, _ in b.CacheStats._fields_}

    def cache_list(self, verify=False):
        """The folder's entries as dicts, most recently used first (attnbwd_cache_list); "problem" is None for a
        sound entry, else why it cannot be used. verify=True reads every entry whole and checks its checksum and
        cubin."""
        entries = []

        def on_entry(ptr, user):
            e = ptr.contents
            d = {name: _text(getattr(e, name)) if t is ctypes.c_char_p else getattr(e, name)
                 for name, t in b.CacheEntry._fields_ if name != "shape"}
            d["problem"] = e.problem.decode(errors="replace") if e.problem else None
            s = e.shape
            d["shape"] = ({"problem": s.problem, "batch": s.batch, "heads": s.heads, "seq_len": s.seq_len,
                           "dropout": s.dropout, "precision": s.precision} if e.has_shape else None)
            entries.append(d)
            return 0

        damaged = ctypes.c_uint64()
        fn = b.CACHE_ENTRY_FN(on_entry)
        check(self._lib.attnbwd_cache_list(self.handle, b.ATTNBWD_CACHE_VERIFY if verify else 0, fn, None,
                                           ctypes.byref(damaged)), "attnbwd_cache_list")
        return entries

    def cache_prune(self, max_bytes=0, older_than_seconds=0):
        """Removes the least recently used entries down to max_bytes (0: the context's budget) and every entry
        unused for older_than_seconds (0: no age limit); returns (files, bytes) removed."""
        files, nbytes = ctypes.c_uint64(), ctypes.c_uint64()
        check(self._lib.attnbwd_cache_prune(self.handle, int(max_bytes), int(older_than_seconds),
                                            ctypes.byref(files), ctypes.byref(nbytes)), "attnbwd_cache_prune")
        return files.value, nbytes.value

    def cache_export(self, path, key_prefixes=()):
        """Writes one archive of the entries whose key starts with one of key_prefixes (none: every entry) to path;
        returns (entries, bytes) written."""
        prefixes = [p.encode() for p in key_prefixes]
        arr = (ctypes.c_char_p * max(len(prefixes), 1))(*prefixes)
        entries, nbytes = ctypes.c_uint64(), ctypes.c_uint64()
        check(self._lib.attnbwd_cache_export(self.handle, os.fsencode(path), arr, len(prefixes),
                                             ctypes.byref(entries), ctypes.byref(nbytes)), "attnbwd_cache_export")
        return entries.value, nbytes.value

    def cache_import(self, path):
        """Adds an archive's entries to the folder, every entry checked first; returns (entries, bytes) added."""
        entries, nbytes = ctypes.c_uint64(), ctypes.c_uint64()
        check(self._lib.attnbwd_cache_import(self.handle, os.fsencode(path), ctypes.byref(entries),
                                             ctypes.byref(nbytes)), "attnbwd_cache_import")
        return entries.value, nbytes.value


class Kernel:
    """One shape's kernel (attnbwd_kernel), alive while its Context is open."""

    def __init__(self, ctx, handle):
        self.ctx = ctx  # keeps the context open as long as the kernel is referenced
        self._handle = handle
        self._lib = ctx._lib
        self.info = self._read_info()

    @property
    def handle(self):
        self.ctx.handle  # raises once the context is closed
        return self._handle

    def _read_info(self):
        i = b.KernelInfo()
        check(self._lib.attnbwd_kernel_get_info(self._handle, ctypes.byref(i)), "attnbwd_kernel_get_info")
        s = i.shape
        return {
            "shape": {"problem": s.problem, "batch": s.batch, "heads": s.heads, "seq_len": s.seq_len,
                      "dropout": s.dropout, "precision": s.precision},
            "name": _text(i.name), "arch": _text(i.arch), "grid": list(i.grid), "block": list(i.block),
            "shared_bytes": i.shared_bytes, "tiles": _text(i.tiles), "cache_key": _text(i.cache_key),
            "origin": b.ORIGINS.get(i.origin, i.origin), "build_seconds": i.build_seconds,
            "cubin_bytes": i.cubin_bytes, "unordered_outputs": i.unordered_outputs,
        }

    def softmax_dropout_bwd(self, grad_output, p_attn, mask, dropout_mask, p_dropout, grad_scores, stream=0):
        """Problem 1 on device pointers (integers); stream: a CUstream handle (0: the legacy stream)."""
        check(self._lib.attnbwd_softmax_dropout_bwd(self.handle, grad_output, p_attn, mask, dropout_mask or None,
                                                    p_dropout, grad_scores, stream or None),
              "attnbwd_softmax_dropout_bwd")

    @property
    def workspace_bytes(self):
        """Bytes of device workspace problem 2's call needs (0 for problem 1)."""
        return self._lib.attnbwd_edit_attention_workspace(self.handle)

    def edit_attention_bwd(self, args, stream=0):
        """Problem 2: args is a binding.EditAttentionArgs (every pointer an integer, scale, dropout_p, the
        workspace)."""
        check(self._lib.attnbwd_edit_attention_bwd(self.handle, ctypes.byref(args), stream or None),
              "attnbwd_edit_attention_bwd")
