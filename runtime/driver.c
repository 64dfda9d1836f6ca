/* The CUDA driver through dlopen("libcuda.so.1"), so the library loads,
 * generates and compiles on machines with no driver; only a launch (or
 * asking for the device's architecture) needs one. Kernels run in the
 * device's primary context, the one the CUDA runtime and PyTorch use, so
 * their pointers and streams work as they are. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "driver.h"
#include "error.h"

/* The entry points used, resolved by their versioned symbol names. */
#define DRIVER_FUNCTIONS(X)                                                                       \
    X(cuInit, "cuInit", (unsigned))                                                               \
    X(cuDriverGetVersion, "cuDriverGetVersion", (int *))                                          \
    X(cuGetErrorName, "cuGetErrorName", (CUresult, const char **))                                \
    X(cuDeviceGetCount, "cuDeviceGetCount", (int *))                                              \
    X(cuDeviceGet, "cuDeviceGet", (CUdevice *, int))                                              \
    X(cuDeviceGetName, "cuDeviceGetName", (char *, int, CUdevice))                                \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *, CUdevice_attribute, CUdevice))        \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))              \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice))                      \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", (CUcontext *))                                          \
    X(cuCtxGetDevice, "cuCtxGetDevice", (CUdevice *))                                             \
    X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", (CUcontext))                                       \
    X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", (CUcontext *))                                       \
    X(cuModuleLoadData, "cuModuleLoadData", (CUmodule *, const void *))                           \
    X(cuModuleUnload, "cuModuleUnload", (CUmodule))                                               \
    X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction *, CUmodule, const char *))         \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction, CUfunction_attribute, int))          \
    X(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", (CUstream *, unsigned, int))      \
    X(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", (int *, int *))                 \
    X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream))                                          \
    X(cuEventCreate, "cuEventCreate", (CUevent *, unsigned))                                      \
    X(cuEventDestroy, "cuEventDestroy_v2", (CUevent))                                             \
    X(cuEventRecord, "cuEventRecord", (CUevent, CUstream))                                        \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", (CUstream, CUevent, unsigned))                      \
    X(cuStreamIsCapturing, "cuStreamIsCapturing", (CUstream, CUstreamCaptureStatus *))            \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream, CUstreamCaptureMode))           \
    X(cuStreamEndCapture, "cuStreamEndCapture", (CUstream, CUgraph *))                            \
    X(cuGraphInstantiate, "cuGraphInstantiateWithFlags", (CUgraphExec *, CUgraph, unsigned long long)) \
    X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec, CUstream))                                    \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec))                                    \
    X(cuGraphDestroy, "cuGraphDestroy", (CUgraph))                                                \
    X(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", (CUstreamCaptureMode *)) \
    X(cuPointerGetAttributes, "cuPointerGetAttributes",                                          \
      (unsigned, CUpointer_attribute *, void **, CUdeviceptr))                                    \
    X(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled",                                          \
      (CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *, \
       const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,          \
       CUtensorMapL2promotion, CUtensorMapFloatOOBfill))                                          \
    X(cuLaunchKernel, "cuLaunchKernel",                                                           \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, \
       void **, void **))

#define DECLARE(name, sym, args) static CUresult(*p_##name) args;
DRIVER_FUNCTIONS(DECLARE)
#undef DECLARE
/* Optional: without it (a driver before CUDA 11.8) every launch is a plain one. */
static CUresult (*p_cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static attnbwd_status load_status;
static char load_error[512];
static int driver_version;

static const char *cu_name(CUresult r) {
    const char *n = NULL;
    if (p_cuGetErrorName && p_cuGetErrorName(r, &n) == CUDA_SUCCESS && n) return n;
    return "CUDA_ERROR_UNKNOWN";
}

/* One check macro for the driver: records the call and the error's name and
 * jumps to the function's cleanup label. */
#define CU_CHECK(call)                                                                     \
    do {                                                                                   \
        CUresult r_ = (call);                                                              \
        if (r_ != CUDA_SUCCESS) {                                                          \
            status = err_set(ATTNBWD_ERR_CUDA, "%s failed: %s", #call, cu_name(r_));      \
            goto cleanup;                                                                  \
        }                                                                                  \
    } while (0)

/* $ATTNBWD_LIBCUDA names another driver library (tests/fake_cuda's, which
 * records what the library asks of it; NVRTC, which loads libcuda.so.1
 * itself where there is one, must not get that one). */
static void load_driver(void) {
    const char *lib = getenv("ATTNBWD_LIBCUDA");
    if (!lib || !*lib) lib = "libcuda.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        load_status = ATTNBWD_ERR_NO_DRIVER;
        snprintf(load_error, sizeof load_error, "no CUDA driver: dlopen(%s): %s", lib, dlerror());
        return;
    }
#define RESOLVE(name, sym, args)                                                                       \
    *(void **)(&p_##name) = dlsym(h, sym);                                                             \
    if (!p_##name) {                                                                                   \
        load_status = ATTNBWD_ERR_NO_DRIVER;                                                           \
        snprintf(load_error, sizeof load_error, "the CUDA driver has no %s (too old?)", sym);          \
        return;                                                                                        \
    }
    DRIVER_FUNCTIONS(RESOLVE)
#undef RESOLVE
    *(void **)(&p_cuLaunchKernelEx) = dlsym(h, "cuLaunchKernelEx");
    CUresult r = p_cuInit(0);
    if (r != CUDA_SUCCESS) {
        load_status = r == CUDA_ERROR_NO_DEVICE ? ATTNBWD_ERR_NO_DEVICE : ATTNBWD_ERR_NO_DRIVER;
        snprintf(load_error, sizeof load_error, "cuInit failed: %s", cu_name(r));
        return;
    }
    p_cuDriverGetVersion(&driver_version);
    load_status = ATTNBWD_OK;
}

attnbwd_status drv_load(void) {
    pthread_once(&load_once, load_driver);
    if (load_status != ATTNBWD_OK) return err_set(load_status, "%s", load_error);
    return ATTNBWD_OK;
}

int drv_version(void) { return drv_load() == ATTNBWD_OK ? driver_version : 0; }

#define DEV(d) ((d)->cu_device)
#define CTX(d) ((CUcontext)(d)->cu_ctx)

int drv_current_device(void) {
    CUcontext cur = NULL;
    CUdevice d = 0;
    if (drv_load() != ATTNBWD_OK || p_cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur ||
        p_cuCtxGetDevice(&d) != CUDA_SUCCESS)
        return 0;
    return (int)d;
}

attnbwd_status drv_device_open(int ordinal, drv_device *dev) {
    attnbwd_status status = drv_load();
    memset(dev, 0, sizeof *dev);
    dev->ordinal = ordinal;
    if (status != ATTNBWD_OK) return status;
    int count = 0;
    CU_CHECK(p_cuDeviceGetCount(&count));
    if (ordinal < 0 || ordinal >= count)
        return err_set(ATTNBWD_ERR_NO_DEVICE, "device ordinal %d is out of range: %d CUDA device(s)", ordinal,
                       count);
    CUdevice d;
    CU_CHECK(p_cuDeviceGet(&d, ordinal));
    DEV(dev) = d;
    CU_CHECK(p_cuDeviceGetName(dev->name, (int)sizeof dev->name, d));
    CU_CHECK(p_cuDeviceGetAttribute(&dev->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
    CU_CHECK(p_cuDeviceGetAttribute(&dev->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d));
    CU_CHECK(p_cuDeviceGetAttribute(&dev->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
    int optin = 0;
    CU_CHECK(p_cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d));
    dev->max_shared_optin = (size_t)optin;
    CU_CHECK(p_cuDeviceGetAttribute(&dev->pageable_access, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, d));
    CUcontext ctx;
    CU_CHECK(p_cuDevicePrimaryCtxRetain(&ctx, d));
    dev->cu_ctx = ctx;
    dev->retained = 1;
cleanup:
    return status;
}

void drv_device_close(drv_device *dev) {
    if (dev->retained) p_cuDevicePrimaryCtxRelease(DEV(dev));
    dev->retained = 0;
}

/* Makes the primary context current for one call unless it already is (the
 * usual case under the CUDA runtime or PyTorch). Returns 1 when pushed. */
static int enter(drv_device *dev, attnbwd_status *status) {
    CUcontext cur = NULL;
    if (p_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == CTX(dev)) return 0;
    CUresult r = p_cuCtxPushCurrent(CTX(dev));
    if (r != CUDA_SUCCESS) {
        *status = err_set(ATTNBWD_ERR_CUDA, "cuCtxPushCurrent failed: %s", cu_name(r));
        return -1;
    }
    return 1;
}

static void leave(int pushed) {
    CUcontext dummy;
    if (pushed == 1) p_cuCtxPopCurrent(&dummy);
}

attnbwd_status drv_module_load(drv_device *dev, const void *cubin, void **module) {
    attnbwd_status status = ATTNBWD_OK;
    CUmodule mod = NULL;
    *module = NULL;
    if (!dev->retained) return err_set(ATTNBWD_ERR_NO_DEVICE, "no device is open");
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    CU_CHECK(p_cuModuleLoadData(&mod, cubin));
    *module = mod;
cleanup:
    leave(pushed);
    return status;
}

attnbwd_status drv_module_function(drv_device *dev, void *module, const char *func_name, unsigned shared_bytes,
                                   void **function) {
    attnbwd_status status = ATTNBWD_OK;
    CUfunction fn = NULL;
    *function = NULL;
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    CU_CHECK(p_cuModuleGetFunction(&fn, (CUmodule)module, func_name));
    if (shared_bytes > 48 * 1024) {
        if (shared_bytes > dev->max_shared_optin) {
            status = err_set(ATTNBWD_ERR_UNSUPPORTED, "kernel %s needs %u bytes of shared memory; the device allows %zu",
                             func_name, shared_bytes, dev->max_shared_optin);
            goto cleanup;
        }
        CU_CHECK(p_cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared_bytes));
        /* All of the unified L1 as shared memory: these kernels are sized for
         * two blocks per SM, which a smaller carveout would not hold. */
        CU_CHECK(p_cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                      CU_SHAREDMEM_CARVEOUT_MAX_SHARED));
    }
    *function = fn;
cleanup:
    leave(pushed);
    return status;
}

void drv_module_unload(drv_device *dev, void *module) {
    if (!module || !dev->retained) return;
    attnbwd_status ignored;
    int pushed = enter(dev, &ignored);
    p_cuModuleUnload((CUmodule)module);
    leave(pushed);
}

attnbwd_status drv_launch(drv_device *dev, void *function, const unsigned grid[3],
                          const unsigned block[3], unsigned shared_bytes, void *stream,
                          void **args, int programmatic) {
    attnbwd_status status = ATTNBWD_OK;
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    if (programmatic && p_cuLaunchKernelEx) {
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig config = {
            .gridDimX = grid[0], .gridDimY = grid[1], .gridDimZ = grid[2],
            .blockDimX = block[0], .blockDimY = block[1], .blockDimZ = block[2],
            .sharedMemBytes = shared_bytes, .hStream = (CUstream)stream, .attrs = &attr, .numAttrs = 1,
        };
        CU_CHECK(p_cuLaunchKernelEx(&config, (CUfunction)function, args, NULL));
    } else {
        CU_CHECK(p_cuLaunchKernel((CUfunction)function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                  shared_bytes, (CUstream)stream, args, NULL));
    }
cleanup:
    leave(pushed);
    return status;
}

attnbwd_status drv_pointer_info(drv_device *dev, const void *p, drv_pointer *info) {
    attnbwd_status status = ATTNBWD_OK;
    unsigned type = 0;
    int device = -1;
    unsigned managed = 0; /* 4 bytes, whether the driver writes a bool or an int */
    CUdeviceptr start = 0;
    size_t bytes = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[] = {&type, &device, &managed, &start, &bytes};
    memset(info, 0, sizeof *info);
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    /* Memory CUDA does not know is no error here: its attributes stay 0. */
    CU_CHECK(p_cuPointerGetAttributes(5, attrs, data, (CUdeviceptr)(uintptr_t)p));
    info->kind = type == CU_MEMORYTYPE_DEVICE    ? DRV_MEM_DEVICE
                 : type == CU_MEMORYTYPE_HOST    ? DRV_MEM_HOST
                 : type == CU_MEMORYTYPE_UNIFIED ? DRV_MEM_UNIFIED
                                                 : DRV_MEM_UNKNOWN; /* an array is no pointer to linear memory */
    info->managed = managed != 0;
    info->device = device;
    info->start = (uintptr_t)start;
    info->bytes = bytes;
cleanup:
    leave(pushed);
    return status;
}

int drv_capture_relaxed(void) {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (drv_load() != ATTNBWD_OK || p_cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS) return -1;
    return (int)mode;
}

void drv_capture_restore(int mode) {
    CUstreamCaptureMode m = (CUstreamCaptureMode)mode;
    if (mode >= 0) p_cuThreadExchangeStreamCaptureMode(&m);
}

attnbwd_status drv_tensor_map_2d(void *map, const void *base, uint64_t rows, uint64_t cols, uint64_t ld,
                                 unsigned box_rows, unsigned box_cols, int swizzle128) {
    attnbwd_status status = drv_load();
    if (status != ATTNBWD_OK) return status;
    const cuuint64_t dims[2] = {cols, rows}, strides[1] = {ld * 4};
    const cuuint32_t box[2] = {box_cols, box_rows}, element_strides[2] = {1, 1};
    /* Zeros past the matrix (FLOAT_OOB_FILL_NONE), L2 fetches of 256 bytes. */
    CU_CHECK(p_cuTensorMapEncodeTiled((CUtensorMap *)map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)base, dims,
                                      strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
cleanup:
    return status;
}

attnbwd_status drv_stream_create(drv_device *dev, int level, void **stream) {
    attnbwd_status status = ATTNBWD_OK;
    CUstream st = NULL;
    *stream = NULL;
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    int least = 0, greatest = 0;
    CU_CHECK(p_cuCtxGetStreamPriorityRange(&least, &greatest));
    /* Non-blocking: no implicit order with the legacy default stream; the
     * plan's events give the only order these streams need. */
    /* level 2: the greatest priority (numerically the least), 0: the least, 1: halfway. */
    const int priority = level >= 2 ? greatest : level <= 0 ? least : least + (greatest - least) / 2;
    CU_CHECK(p_cuStreamCreateWithPriority(&st, CU_STREAM_NON_BLOCKING, priority));
    *stream = st;
cleanup:
    leave(pushed);
    return status;
}

attnbwd_status drv_event_create(drv_device *dev, void **event) {
    attnbwd_status status = ATTNBWD_OK;
    CUevent ev = NULL;
    *event = NULL;
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    CU_CHECK(p_cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    *event = ev;
cleanup:
    leave(pushed);
    return status;
}

void drv_stream_destroy(drv_device *dev, void *stream) {
    if (!stream || !dev->retained) return;
    attnbwd_status ignored;
    int pushed = enter(dev, &ignored);
    p_cuStreamDestroy((CUstream)stream); /* work still queued on it completes first */
    leave(pushed);
}

void drv_event_destroy(drv_device *dev, void *event) {
    if (!event || !dev->retained) return;
    attnbwd_status ignored;
    int pushed = enter(dev, &ignored);
    p_cuEventDestroy((CUevent)event);
    leave(pushed);
}

attnbwd_status drv_event_record(drv_device *dev, void *event, void *stream) {
    attnbwd_status status = ATTNBWD_OK;
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    CU_CHECK(p_cuEventRecord((CUevent)event, (CUstream)stream));
cleanup:
    leave(pushed);
    return status;
}

attnbwd_status drv_stream_wait_event(drv_device *dev, void *stream, void *event) {
    attnbwd_status status = ATTNBWD_OK;
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    CU_CHECK(p_cuStreamWaitEvent((CUstream)stream, (CUevent)event, 0));
cleanup:
    leave(pushed);
    return status;
}

attnbwd_status drv_stream_capturing(drv_device *dev, void *stream, int *capturing) {
    attnbwd_status status = ATTNBWD_OK;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    *capturing = 1;
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    CU_CHECK(p_cuStreamIsCapturing((CUstream)stream, &cs));
    *capturing = cs != CU_STREAM_CAPTURE_STATUS_NONE;
cleanup:
    leave(pushed);
    return status;
}

attnbwd_status drv_capture_begin(drv_device *dev, void *stream) {
    attnbwd_status status = ATTNBWD_OK;
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    /* Thread-local: other threads' calls neither break nor join this capture. */
    CU_CHECK(p_cuStreamBeginCapture((CUstream)stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
cleanup:
    leave(pushed);
    return status;
}

attnbwd_status drv_capture_end(drv_device *dev, void *stream, int keep, void **exec) {
    attnbwd_status status = ATTNBWD_OK;
    CUgraph graph = NULL;
    CUgraphExec ge = NULL;
    *exec = NULL;
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    CU_CHECK(p_cuStreamEndCapture((CUstream)stream, &graph));
    if (keep) {
        /* The kernels at their streams' priorities as captured (lane 0's
         * greatest), not all at the priority of the stream it is launched on. */
        CU_CHECK(p_cuGraphInstantiate(&ge, graph, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
        *exec = ge;
    }
cleanup:
    if (graph) p_cuGraphDestroy(graph); /* the executable graph keeps what it needs */
    leave(pushed);
    return status;
}

attnbwd_status drv_graph_launch(drv_device *dev, void *exec, void *stream) {
    attnbwd_status status = ATTNBWD_OK;
    int pushed = enter(dev, &status);
    if (pushed < 0) return status;
    CU_CHECK(p_cuGraphLaunch((CUgraphExec)exec, (CUstream)stream));
cleanup:
    leave(pushed);
    return status;
}

void drv_graph_destroy(drv_device *dev, void *exec) {
    if (!exec || !dev->retained) return;
    attnbwd_status ignored;
    int pushed = enter(dev, &ignored);
    p_cuGraphExecDestroy((CUgraphExec)exec); /* a replay still queued completes first */
    leave(pushed);
}
