/* The test hooks of tests/fake_cuda/fake_libcuda.c, a CUDA driver library
 * that runs nothing: a test whose $ATTNBWD_LIBCUDA names it sees every
 * launch, tensor map and pointer query the library makes, on a machine with
 * no GPU. Reach them with dlsym on dlopen of that path. */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <stddef.h>

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

#endif
