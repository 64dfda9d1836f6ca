/* A CUDA driver library that runs nothing (see fake_cuda.h): the entry points
 * runtime/driver.c resolves, each checking what the real driver would refuse
 * (a cubin that is no ELF image, a function the image does not name, more
 * shared memory than the function was allowed, grid and block limits, tensor
 * maps the TMA cannot use, fewer parameters than the kernel takes), and
 * recording launches, captures and pointer queries for the tests. Devices: "NVIDIA H200" with 132 SMs by
 * default ($FAKE_CUDA_DEVICE_NAME and $FAKE_CUDA_SM_COUNT, read at cuInit, name another, so that a process
 * such as the attnbwd tool sees the GPU a test chooses), as many as "device_count" says. */
#define _GNU_SOURCE /* memmem */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "fake_cuda.h"

#define MAX_LAUNCHES 65536
#define MAX_ALLOCS 4096
#define MAX_STACK 8

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    long device_count, cc_major, cc_minor, sm_count, smem_optin, pageable_access;
} props = {2, 9, 0, 132, 232448, 0};
static fake_launch launches[MAX_LAUNCHES];
static long n_launches, n_captured, n_graph_launches, n_pointer_queries, n_tensor_maps, n_modules, n_params;
static struct alloc {
    uintptr_t start;
    size_t bytes;
    int kind, device, managed;
} allocs[MAX_ALLOCS];
static int n_allocs;
static uintptr_t next_address = (uintptr_t)1 << 44; /* far from the heap and from mmap's usual places */
static int primary[16];                               /* a context handle per device: &primary[d] */
static __thread CUcontext stack[MAX_STACK];
static __thread int depth;
static __thread CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static int capture_invalidated; /* by a call the capture's mode forbids */
#define MAX_DEVICES 16
static long n_modules_on[MAX_DEVICES]; /* modules loaded and not unloaded, by device */

/* The device of the calling thread's current context (-1: none). */
static int current_device(void) { return depth ? (int)((int *)stack[depth - 1] - primary) : -1; }

#define MAX_PARAMS 64
typedef struct fake_function {
    char name[128];
    int max_dynamic_shared;
    int n_params;                  /* from the image's .nv.info.<name> */
    int device;                    /* the device whose context loaded its module */
    unsigned param_size[MAX_PARAMS];
    struct fake_function *next; /* the module's functions, freed with it */
} fake_function;
typedef struct fake_stream {
    int capturing;
    long ops;        /* launches and waits queued on it */
    long joined_ops; /* of those, the ones the capture's origin has waited for (an event after them) */
} fake_stream;
typedef struct fake_event {
    int captured;     /* recorded on a stream being captured */
    fake_stream *src; /* where, and after how many of its ops */
    long src_ops;
} fake_event;

/* ---- hooks ---- */

void *fake_cuda_alloc(size_t bytes, int kind, int device, int managed) {
    pthread_mutex_lock(&mu);
    void *p = NULL;
    if (n_allocs < MAX_ALLOCS) {
        allocs[n_allocs++] = (struct alloc){next_address, bytes, kind, device, managed};
        p = (void *)next_address;
        next_address += (bytes + (1u << 21) + 4095) & ~(uintptr_t)4095; /* 2 MB apart, 4 KB aligned */
    }
    pthread_mutex_unlock(&mu);
    return p;
}

long fake_cuda_count(const char *what) {
    if (!strcmp(what, "launches")) return n_launches;
    if (!strcmp(what, "captured")) return n_captured;
    if (!strcmp(what, "graph_launches")) return n_graph_launches;
    if (!strcmp(what, "pointer_queries")) return n_pointer_queries;
    if (!strcmp(what, "tensor_maps")) return n_tensor_maps;
    if (!strcmp(what, "modules")) return n_modules;
    if (!strcmp(what, "params")) return n_params;
    int d;
    if (sscanf(what, "modules@%d", &d) == 1 && d >= 0 && d < MAX_DEVICES) return n_modules_on[d];
    return -1;
}

const fake_launch *fake_cuda_launch(int i) { return i >= 0 && i < n_launches ? &launches[i] : NULL; }

void fake_cuda_reset(void) {
    pthread_mutex_lock(&mu);
    n_launches = n_captured = n_graph_launches = n_pointer_queries = n_tensor_maps = n_params = 0;
    pthread_mutex_unlock(&mu);
}

/* Failures asked for by fake_cuda_fail: the call of `what` after `after` more succeed. */
enum { FAIL_LAUNCH, FAIL_INSTANTIATE, FAIL_MODULE_LOAD, FAIL_KINDS };
static const char *const fail_names[FAIL_KINDS] = {"launch", "instantiate", "module_load"};
static long fail_after[FAIL_KINDS] = {-1, -1, -1};

void fake_cuda_fail(const char *what, long after) {
    for (int i = 0; i < FAIL_KINDS; ++i)
        if (!strcmp(what, fail_names[i])) fail_after[i] = after;
}

/* 1 when this call of kind i is the one to fail. */
static int failing(int i) {
    if (fail_after[i] < 0) return 0;
    return fail_after[i]-- == 0;
}

void fake_cuda_set(const char *what, long value) {
    if (!strcmp(what, "device_count")) props.device_count = value;
    else if (!strcmp(what, "cc_major")) props.cc_major = value;
    else if (!strcmp(what, "cc_minor")) props.cc_minor = value;
    else if (!strcmp(what, "sm_count")) props.sm_count = value;
    else if (!strcmp(what, "smem_optin")) props.smem_optin = value;
    else if (!strcmp(what, "pageable_access")) props.pageable_access = value;
}

/* ---- the driver ---- */

static char device_name[256] = "NVIDIA H200";

CUresult CUDAAPI cuInit(unsigned flags) {
    const char *name = getenv("FAKE_CUDA_DEVICE_NAME"), *sms = getenv("FAKE_CUDA_SM_COUNT");
    pthread_mutex_lock(&mu);
    if (name && *name) snprintf(device_name, sizeof device_name, "%s", name);
    if (sms && atol(sms) > 0) props.sm_count = atol(sms);
    pthread_mutex_unlock(&mu);
    return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *v) {
    *v = 13000;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult r, const char **name) {
    switch (r) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_INVALID_IMAGE: *name = "CUDA_ERROR_INVALID_IMAGE"; break;
    case CUDA_ERROR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED: *name = "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"; break;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: *name = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *name = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    default: *name = "CUDA_ERROR_UNKNOWN"; break;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *n) {
    *n = (int)props.device_count;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal) {
    if (ordinal < 0 || ordinal >= props.device_count || ordinal >= 16) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d) {
    snprintf(name, (size_t)len, "%s", device_name);
    return d >= 0 && d < props.device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    if (d < 0 || d >= props.device_count) return CUDA_ERROR_INVALID_DEVICE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = (int)props.cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = (int)props.cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = (int)props.sm_count; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = (int)props.smem_optin; break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: *v = (int)props.pageable_access; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    if (d < 0 || d >= 16) return CUDA_ERROR_INVALID_DEVICE;
    *c = (CUcontext)&primary[d];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) { return d >= 0 && d < 16 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; }

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c) {
    *c = depth ? stack[depth - 1] : NULL;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) {
    if (!depth) return CUDA_ERROR_INVALID_CONTEXT;
    *d = (CUdevice)((int *)stack[depth - 1] - primary);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext c) {
    if (depth == MAX_STACK) return CUDA_ERROR_UNKNOWN;
    stack[depth++] = c;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *c) {
    if (!depth) return CUDA_ERROR_INVALID_CONTEXT;
    *c = stack[--depth];
    return CUDA_SUCCESS;
}

static int have_context(void) { return depth > 0; }

/* The ELF image's extent, from its section headers (64-bit ELF). */
static size_t elf_size(const unsigned char *e) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, e + 0x28, 8);
    memcpy(&shentsize, e + 0x3A, 2);
    memcpy(&shnum, e + 0x3C, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
}

typedef struct fake_module {
    const unsigned char *image;
    size_t size;
    fake_function *functions;
    int device; /* the device whose context was current at the load */
} fake_module;


CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *image) {
    const unsigned char *e = image;
    if (!have_context()) return CUDA_ERROR_INVALID_CONTEXT;
    if (failing(FAIL_MODULE_LOAD)) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!e || memcmp(e, "\x7f" "ELF", 4) != 0 || e[4] != 2) return CUDA_ERROR_INVALID_IMAGE;
    fake_module *fm = malloc(sizeof *fm);
    if (!fm) return CUDA_ERROR_OUT_OF_MEMORY;
    fm->image = e;
    fm->size = elf_size(e);
    fm->functions = NULL;
    fm->device = current_device();
    *m = (CUmodule)fm;
    ++n_modules;
    ++n_modules_on[fm->device];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule m) {
    fake_module *fm = (fake_module *)m;
    if (!fm) return CUDA_ERROR_INVALID_HANDLE;
    for (fake_function *f = fm->functions, *next; f; f = next) {
        next = f->next;
        free(f);
    }
    --n_modules_on[fm->device];
    free(fm);
    --n_modules;
    return CUDA_SUCCESS;
}

/* The kernel's parameters as its .nv.info.<name> section lists them:
 * EIATTR_KPARAM_INFO (0x17) records of 12 bytes (index, ordinal 2 bytes,
 * offset 2 bytes, then the size in bits 18-31), among records of 4 bytes
 * (format, attribute, a 2-byte value) or, format 4, 4 + their 2-byte size.
 * -1 where the image has no such section. */
static int kernel_params(const fake_module *fm, const char *name, unsigned *sizes) {
    const unsigned char *e = fm->image;
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, e + 0x28, 8);
    memcpy(&shentsize, e + 0x3A, 2);
    memcpy(&shnum, e + 0x3C, 2);
    memcpy(&shstrndx, e + 0x3E, 2);
    uint64_t strings;
    memcpy(&strings, e + shoff + (uint64_t)shstrndx * shentsize + 0x18, 8);
    for (unsigned i = 0; i < shnum; ++i) {
        const unsigned char *sh = e + shoff + (uint64_t)i * shentsize;
        uint32_t name_at;
        uint64_t off, size;
        memcpy(&name_at, sh, 4);
        memcpy(&off, sh + 0x18, 8);
        memcpy(&size, sh + 0x20, 8);
        const char *section = (const char *)e + strings + name_at;
        if (strncmp(section, ".nv.info.", 9) || strcmp(section + 9, name)) continue;
        int n = 0;
        for (uint64_t p = 0; p + 4 <= size;) {
            const unsigned char *r = e + off + p;
            uint16_t len = 0;
            if (r[0] == 4) memcpy(&len, r + 2, 2);
            if (r[0] == 4 && r[1] == 0x17 && len == 12) {
                uint16_t ordinal;
                uint32_t bits;
                memcpy(&ordinal, r + 8, 2);
                memcpy(&bits, r + 12, 4);
                if (ordinal < MAX_PARAMS) {
                    sizes[ordinal] = bits >> 18;
                    if (ordinal + 1 > n) n = ordinal + 1;
                }
            }
            p += 4 + (r[0] == 4 ? len : 0);
        }
        return n;
    }
    return -1;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    fake_module *fm = (fake_module *)m;
    size_t len = strlen(name);
    if (!fm || len >= sizeof ((fake_function *)0)->name) return CUDA_ERROR_INVALID_VALUE;
    /* The name with its terminating zero, as the image's string table holds it. */
    if (!memmem(fm->image, fm->size, name, len + 1)) return CUDA_ERROR_NOT_FOUND;
    fake_function *fn = calloc(1, sizeof *fn);
    if (!fn) return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(fn->name, name, len + 1);
    fn->max_dynamic_shared = 48 * 1024;
    fn->n_params = kernel_params(fm, name, fn->param_size);
    fn->device = fm->device;
    fn->next = fm->functions;
    fm->functions = fn;
    *f = (CUfunction)fn;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
    fake_function *fn = (fake_function *)f;
    if (!fn) return CUDA_ERROR_INVALID_HANDLE;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        if (v < 0 || v > props.smem_optin) return CUDA_ERROR_INVALID_VALUE;
        fn->max_dynamic_shared = v;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    *least = 0;
    *greatest = -5;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *s, unsigned flags, int priority) {
    if (!have_context()) return CUDA_ERROR_INVALID_CONTEXT;
    (void)flags, (void)priority;
    *s = (CUstream)calloc(1, sizeof(fake_stream));
    return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuStreamDestroy(CUstream s) {
    free(s);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned flags) {
    (void)flags;
    *e = (CUevent)calloc(1, sizeof(fake_event));
    return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuEventDestroy(CUevent e) {
    free(e);
    return CUDA_SUCCESS;
}

/* The legacy stream (NULL) is never captured here. */
static int capturing(CUstream s) { return s && ((fake_stream *)s)->capturing; }

CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
    fake_event *ev = (fake_event *)e;
    if (!ev) return CUDA_ERROR_INVALID_HANDLE;
    ev->captured = capturing(s);
    ev->src = (fake_stream *)s;
    ev->src_ops = s ? ((fake_stream *)s)->ops : 0;
    return CUDA_SUCCESS;
}


CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
    *st = capturing(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

/* One capture at a time (per process, enough for the tests): the streams in
 * it, its origin first. */
#define MAX_STREAMS_IN_CAPTURE 64
static fake_stream *in_capture[MAX_STREAMS_IN_CAPTURE];
static int n_in_capture;

static CUresult join_capture(fake_stream *s) {
    if (s->capturing) return CUDA_SUCCESS;
    if (n_in_capture == MAX_STREAMS_IN_CAPTURE) return CUDA_ERROR_UNKNOWN;
    s->capturing = 1;
    in_capture[n_in_capture++] = s;
    return CUDA_SUCCESS;
}

/* A stream waiting on an event recorded in a capture joins the capture; the
 * origin waiting on one joins the event's stream back up to that event. */
CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
    fake_event *ev = (fake_event *)e;
    if (!ev || flags) return CUDA_ERROR_INVALID_VALUE;
    if (s) ((fake_stream *)s)->ops++;
    if (!ev->captured) return CUDA_SUCCESS;
    if (!s) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    if (n_in_capture && in_capture[0] == (fake_stream *)s && ev->src && ev->src_ops > ev->src->joined_ops)
        ev->src->joined_ops = ev->src_ops;
    return join_capture((fake_stream *)s);
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
    (void)mode;
    if (!s) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (capturing(s) || n_in_capture) return CUDA_ERROR_ILLEGAL_STATE;
    return join_capture((fake_stream *)s);
}

/* Every stream that joined must be joined back: the origin has waited on an
 * event recorded after its last launch or wait (directly: stricter than
 * CUDA, which also takes joins through other streams). */
CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *g) {
    if (!n_in_capture || in_capture[0] != (fake_stream *)s) return CUDA_ERROR_ILLEGAL_STATE;
    int unjoined = 0;
    for (int i = 1; i < n_in_capture; ++i) unjoined |= in_capture[i]->joined_ops != in_capture[i]->ops;
    for (int i = 0; i < n_in_capture; ++i) in_capture[i]->capturing = 0;
    n_in_capture = 0;
    if (unjoined) return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    if (capture_invalidated) {
        capture_invalidated = 0;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *g = (CUgraph)malloc(1);
    return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *ge, CUgraph g, unsigned long long flags) {
    (void)flags;
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    if (failing(FAIL_INSTANTIATE)) return CUDA_ERROR_NOT_SUPPORTED;
    *ge = (CUgraphExec)malloc(1);
    return *ge ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec ge, CUstream s) {
    (void)s;
    if (!ge) return CUDA_ERROR_INVALID_HANDLE;
    ++n_graph_launches;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec ge) {
    free(ge);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
    free(g);
    return CUDA_SUCCESS;
}

/* The rules of cuTensorMapEncodeTiled that the library's maps must meet
 * (2-D, fp32, tiled): 16-byte aligned base and strides, boxes of 1-256
 * elements a side and whole 16-byte rows, the 128-byte swizzle's rows of at
 * most 128 bytes. */
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *base,
                                        const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                        const cuuint32_t *element_strides, CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                        CUtensorMapFloatOOBfill oob) {
    (void)l2, (void)oob;
    if (type != CU_TENSOR_MAP_DATA_TYPE_FLOAT32 || rank != 2 || interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
        return CUDA_ERROR_INVALID_VALUE;
    if ((uintptr_t)map % 64 || (uintptr_t)base % 16 || strides[0] % 16 || strides[0] >= (1ull << 40))
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < 2; ++i)
        if (!dims[i] || dims[i] > (1ull << 32) || !box[i] || box[i] > 256 || element_strides[i] != 1)
            return CUDA_ERROR_INVALID_VALUE;
    if (strides[0] < dims[0] * 4 || box[0] * 4 % 16) return CUDA_ERROR_INVALID_VALUE;
    if (swizzle == CU_TENSOR_MAP_SWIZZLE_128B && box[0] * 4 > 128) return CUDA_ERROR_INVALID_VALUE;
    memset(map, 0, sizeof *map);
    ++n_tensor_maps;
    return CUDA_SUCCESS;
}

/* Each of the kernel's parameters read from where params points (a short
 * list meets the NULL after its last, or, under ASan, the end of its array). */
static CUresult read_params(const fake_function *fn, void **params) {
    unsigned char value[4096];
    for (int i = 0; i < fn->n_params; ++i) {
        if (!params[i] || fn->param_size[i] > sizeof value) return CUDA_ERROR_INVALID_VALUE;
        memcpy(value, params[i], fn->param_size[i]);
    }
    pthread_mutex_lock(&mu);
    n_params += fn->n_params > 0 ? fn->n_params : 0;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned smem, CUstream s,
                       int programmatic, void **params) {
    const fake_function *fn = (const fake_function *)f;
    if (!have_context()) return CUDA_ERROR_INVALID_CONTEXT;
    if (!fn) return CUDA_ERROR_INVALID_HANDLE;
    if (fn->device != current_device()) return CUDA_ERROR_INVALID_HANDLE; /* another context's function */
    if (read_params(fn, params) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    if (!grid[0] || !grid[1] || !grid[2] || grid[0] >= (1u << 31) || grid[1] > 65535 || grid[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    if (!block[0] || !block[1] || !block[2] || (unsigned long long)block[0] * block[1] * block[2] > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (smem > (unsigned)fn->max_dynamic_shared) return CUDA_ERROR_INVALID_VALUE;
    if (failing(FAIL_LAUNCH)) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    pthread_mutex_lock(&mu);
    if (n_launches < MAX_LAUNCHES) {
        fake_launch *l = &launches[n_launches];
        memcpy(l->name, fn->name, sizeof l->name);
        memcpy(l->grid, grid, sizeof l->grid);
        memcpy(l->block, block, sizeof l->block);
        l->shared_bytes = smem;
        l->device = current_device();
        l->stream = s;
        l->programmatic = programmatic;
        l->captured = capturing(s);
        if (s) ((fake_stream *)s)->ops++;
        ++n_launches;
        n_captured += l->captured;
    }
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned smem, CUstream s, void **params, void **extra) {
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    if (!params || extra) return CUDA_ERROR_INVALID_VALUE;
    return launch(f, grid, block, smem, s, 0, params);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ},
                   block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
    int programmatic = 0;
    if (!params || extra) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < c->numAttrs; ++i)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
            programmatic = c->attrs[i].value.programmaticStreamSerializationAllowed;
    return launch(f, grid, block, c->sharedMemBytes, c->hStream, programmatic, params);
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
    const CUstreamCaptureMode old = capture_mode;
    capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* Pointer queries count here as calls a capture's strict modes forbid (CUDA
 * does not list them as safe): made while a capture is open and this
 * thread's mode is not relaxed, one fails and the capture is lost. */
CUresult CUDAAPI cuPointerGetAttributes(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr) {
    const struct alloc *a = NULL;
    if (n_in_capture && capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        capture_invalidated = 1;
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_lock(&mu);
    ++n_pointer_queries;
    for (int i = 0; i < n_allocs; ++i)
        if (ptr >= allocs[i].start && ptr < allocs[i].start + allocs[i].bytes) a = &allocs[i];
    pthread_mutex_unlock(&mu);
    for (unsigned i = 0; i < n; ++i) {
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data[i] = a ? (unsigned)a->kind : 0; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data[i] = a ? a->device : 0; break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(char *)data[i] = a ? (char)a->managed : 0; break; /* a bool */
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data[i] = a ? a->start : 0; break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data[i] = a ? a->bytes : 0; break;
        default: return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}
