/* The CUDA driver, loaded with dlopen("libcuda.so.1") on first use, so that
 * the library loads, generates and compiles where there is no driver. */
#ifndef ATTNBWD_DRIVER_H
#define ATTNBWD_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "attnbwd.h"

typedef struct drv_device {
    int ordinal;
    int cu_device;              /* CUdevice */
    void *cu_ctx;               /* the primary CUcontext */
    int retained;
    int cc_major, cc_minor;
    int sm_count;
    size_t max_shared_optin;
    int pageable_access;        /* kernels may read and write memory CUDA does not know (HMM, ATS) */
    char name[256];
} drv_device;

/* Loads the driver and cuInit(0) once per process. On failure: NO_DRIVER with
 * dlerror's or cuInit's reason. */
attnbwd_status drv_load(void);
int drv_version(void);

/* The device of the calling thread's current context; 0 where it has none
 * (or there is no driver). */
int drv_current_device(void);

/* Retain the primary context of the device (reads its properties). */
attnbwd_status drv_device_open(int ordinal, drv_device *dev);
void drv_device_close(drv_device *dev);

/* Load a cubin into the primary context. */
attnbwd_status drv_module_load(drv_device *dev, const void *cubin, void **module);

/* A function of a loaded module; raises its dynamic shared-memory limit when
 * shared_bytes > 48 KiB. */
attnbwd_status drv_module_function(drv_device *dev, void *module, const char *func_name, unsigned shared_bytes,
                                   void **function);
void drv_module_unload(drv_device *dev, void *module);

/* cuLaunchKernel in the primary context on `stream`. programmatic: the
 * kernel may be placed before the one ahead of it on the stream ends
 * (programmatic dependent launch; the kernel must wait for it with
 * griddepcontrol.wait before touching memory). */
attnbwd_status drv_launch(drv_device *dev, void *function, const unsigned grid[3],
                          const unsigned block[3], unsigned shared_bytes, void *stream,
                          void **args, int programmatic);

/* What the driver knows of the memory at p (cuPointerGetAttributes): its
 * kind, whether managed, the device it was allocated on or registered with,
 * and the allocation or reserved address range it lies in (0, 0 where none). */
enum { DRV_MEM_UNKNOWN = 0, DRV_MEM_HOST = 1, DRV_MEM_DEVICE = 2, DRV_MEM_UNIFIED = 3 };
typedef struct drv_pointer {
    int kind, managed, device;
    uintptr_t start;
    size_t bytes;
} drv_pointer;
attnbwd_status drv_pointer_info(drv_device *dev, const void *p, drv_pointer *info);
/* This thread's stream-capture mode made relaxed for a while (queries that a
 * caller's capture must not turn into errors), and put back: drv_capture_relaxed
 * returns the mode it replaced (-1 where it could not), for drv_capture_restore. */
int drv_capture_relaxed(void);
void drv_capture_restore(int mode);

/* A 2-D TMA tensor map (CUtensorMap: 128 bytes at map, 64-byte aligned) over
 * the fp32 matrix [rows, cols] at base, ld floats between rows, boxes of
 * box_rows x box_cols, in the 128-byte swizzle or plain; zeros past the edges. */
attnbwd_status drv_tensor_map_2d(void *map, const void *base, uint64_t rows, uint64_t cols, uint64_t ld,
                                 unsigned box_rows, unsigned box_cols, int swizzle128);

/* The library's own streams and events (problem 2 runs independent kernels
 * side by side on streams forked from the caller's). drv_stream_create: a
 * non-blocking stream at priority level 2 (the greatest), 1 (halfway) or 0
 * (the least, the default). */
attnbwd_status drv_stream_create(drv_device *dev, int level, void **stream);
void drv_stream_destroy(drv_device *dev, void *stream);
attnbwd_status drv_event_create(drv_device *dev, void **event);
void drv_event_destroy(drv_device *dev, void *event);
attnbwd_status drv_event_record(drv_device *dev, void *event, void *stream);
/* Work queued on stream after this waits for the event's last record. */
attnbwd_status drv_stream_wait_event(drv_device *dev, void *stream, void *event);

/* CUDA graphs of a repeated call. drv_stream_capturing: *capturing is 1
 * while stream is being captured (and where the driver cannot say). The
 * capture is thread-local; drv_capture_end ends it and, when keep, makes the
 * executable graph (*exec, NULL otherwise). */
attnbwd_status drv_stream_capturing(drv_device *dev, void *stream, int *capturing);
attnbwd_status drv_capture_begin(drv_device *dev, void *stream);
attnbwd_status drv_capture_end(drv_device *dev, void *stream, int keep, void **exec);
attnbwd_status drv_graph_launch(drv_device *dev, void *exec, void *stream);
void drv_graph_destroy(drv_device *dev, void *exec);

#endif
