/* The test hooks of tests/fake_cuda/fake_libcuda.c, a CUDA driver library
 * that runs nothing: a test whose $ATTNBWD_LIBCUDA names it sees every
 * launch, tensor map and pointer query the library makes, on a machine with
 * no GPU. fake_cuda_hooks_open reaches them. */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct fake_launch {
    char name[128];
    unsigned grid[3], block[3], shared_bytes;
    void *stream;
    int programmatic; /* cuLaunchKernelEx with programmatic stream serialization */
    int captured;     /* into a stream capture, not run */
    int device;       /* of the context current at the launch */
} fake_launch;

enum { FAKE_MEM_HOST = 1, FAKE_MEM_DEVICE = 2 };

/* An address range the fake's cuPointerGetAttributes knows: memory of
 * `kind` (a CUmemorytype, FAKE_MEM_*; 0 for none) of `device`, managed or
 * not. Addresses only: nothing is mapped there. */
typedef void *(*fake_cuda_alloc_fn)(size_t bytes, int kind, int device, int managed);
/* Counters: "launches" (run or captured), "captured", "graph_launches",
 * "pointer_queries", "tensor_maps", "modules" (loaded, not unloaded),
 * "modules@D" (of those, loaded in device D's context),
 * "params" (kernel parameters read at launches, as the images list them). */
typedef long (*fake_cuda_count_fn)(const char *what);
/* Launch i since the last reset (NULL past the end). */
typedef const fake_launch *(*fake_cuda_launch_fn)(int i);
/* Forgets the launches and zeroes the counters (allocations stay). */
typedef void (*fake_cuda_reset_fn)(void);
/* Makes the call of `what` ("launch": cuLaunchKernel or Ex; "instantiate":
 * cuGraphInstantiateWithFlags; "module_load": cuModuleLoadData) after `after`
 * more succeed fail, once; -1 takes it back. */
typedef void (*fake_cuda_fail_fn)(const char *what, long after);
/* The devices' properties as the next cuDeviceGetAttribute reads them:
 * "device_count" (2), "cc_major" (9), "cc_minor" (0), "sm_count" (132),
 * "smem_optin" (232448), "pageable_access" (0). */
typedef void (*fake_cuda_set_fn)(const char *what, long value);

/* The hooks and the driver entry points the tests call themselves, from the
 * library $ATTNBWD_LIBCUDA names (tests/CMakeLists.txt sets it). */
typedef struct fake_cuda_hooks {
    fake_cuda_alloc_fn alloc;
    fake_cuda_count_fn count;
    fake_cuda_launch_fn launch;
    fake_cuda_reset_fn reset;
    fake_cuda_set_fn set;
    fake_cuda_fail_fn fail_next;
    /* The driver's own entry points (CUresult is an int). */
    int (*begin_capture)(void *stream, int mode);
    int (*end_capture)(void *stream, void **graph);
    int (*stream_create)(void **stream, unsigned flags, int priority);
    int (*primary_retain)(void **ctx, int device);
    int (*push)(void *ctx);
    int (*pop)(void **ctx);
} fake_cuda_hooks;

/* Fills *hooks from $ATTNBWD_LIBCUDA; 0, or -1 with a line on stderr saying
 * why (unset, not loadable, not the fake). */
static inline int fake_cuda_hooks_open(fake_cuda_hooks *hooks) {
    const char *lib = getenv("ATTNBWD_LIBCUDA");
    void *h = lib && *lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        fprintf(stderr, "ATTNBWD_LIBCUDA (%s) should name tests/fake_cuda's library: %s\n", lib ? lib : "unset",
                dlerror());
        return -1;
    }
    *(void **)&hooks->alloc = dlsym(h, "fake_cuda_alloc");
    *(void **)&hooks->count = dlsym(h, "fake_cuda_count");
    *(void **)&hooks->launch = dlsym(h, "fake_cuda_launch");
    *(void **)&hooks->reset = dlsym(h, "fake_cuda_reset");
    *(void **)&hooks->set = dlsym(h, "fake_cuda_set");
    *(void **)&hooks->fail_next = dlsym(h, "fake_cuda_fail");
    *(void **)&hooks->begin_capture = dlsym(h, "cuStreamBeginCapture_v2");
    *(void **)&hooks->end_capture = dlsym(h, "cuStreamEndCapture");
    *(void **)&hooks->stream_create = dlsym(h, "cuStreamCreateWithPriority");
    *(void **)&hooks->primary_retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    *(void **)&hooks->push = dlsym(h, "cuCtxPushCurrent_v2");
    *(void **)&hooks->pop = dlsym(h, "cuCtxPopCurrent_v2");
    if (!hooks->alloc || !hooks->count || !hooks->launch || !hooks->reset || !hooks->set || !hooks->fail_next ||
        !hooks->begin_capture || !hooks->end_capture || !hooks->stream_create || !hooks->primary_retain ||
        !hooks->push || !hooks->pop) {
        fprintf(stderr, "%s is not tests/fake_cuda's library\n", lib);
        return -1;
    }
    return 0;
}

#endif
