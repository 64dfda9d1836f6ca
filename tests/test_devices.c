/* Two devices, two contexts: a process that opens a context for device 0
 * and one for device 1 (as attnbwd.torch does for cuda:0 and cuda:1) gets a
 * kernel object and a loaded module of its own in each device's context,
 * launches each kernel in its own device's context, and closing one context
 * leaves the other's module loaded. Runs against tests/fake_cuda's driver
 * ($ATTNBWD_LIBCUDA), whose launches record the device of the context they
 * were made in and which refuses a function launched from another device's
 * context. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fake_cuda/fake_cuda.h"
#include "test_util.h"

static fake_cuda_alloc_fn fake_alloc;
static fake_cuda_count_fn fake_count;
static fake_cuda_launch_fn fake_launch_at;
static fake_cuda_reset_fn fake_reset;

static int find_fake(void **state) {
    (void)state;
    const char *lib = getenv("ATTNBWD_LIBCUDA");
    void *h = lib && *lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        fprintf(stderr, "ATTNBWD_LIBCUDA (%s) should name tests/fake_cuda's library: %s\n", lib ? lib : "unset",
                dlerror());
        return -1;
    }
    *(void **)&fake_alloc = dlsym(h, "fake_cuda_alloc");
    *(void **)&fake_count = dlsym(h, "fake_cuda_count");
    *(void **)&fake_launch_at = dlsym(h, "fake_cuda_launch");
    *(void **)&fake_reset = dlsym(h, "fake_cuda_reset");
    return fake_alloc && fake_count && fake_launch_at && fake_reset ? 0 : -1;
}

static attnbwd_ctx *open_device(int device) {
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.device = device;
    o.disk_cache = 0;
    o.log_level = ATTNBWD_LOG_QUIET;
    attnbwd_ctx *ctx = NULL;
    if (attnbwd_open(&o, &ctx) != ATTNBWD_OK) fail_msg("attnbwd_open(device %d): %s", device, attnbwd_last_error());
    return ctx;
}

enum { B = 1, H = 2, T = 17 };

/* Problem 1's buffers on `device`, and one launch of k there. */
static attnbwd_status launch_on(attnbwd_kernel *k, int device) {
    const size_t n = (size_t)B * H * T * T;
    float *go = fake_alloc(4 * n, FAKE_MEM_DEVICE, device, 0), *p = fake_alloc(4 * n, FAKE_MEM_DEVICE, device, 0);
    float *out = fake_alloc(4 * n, FAKE_MEM_DEVICE, device, 0);
    uint8_t *mask = fake_alloc((size_t)B * T * T, FAKE_MEM_DEVICE, device, 0);
    uint8_t *drop = fake_alloc(n, FAKE_MEM_DEVICE, device, 0);
    return attnbwd_softmax_dropout_bwd(k, go, p, mask, drop, 0.1f, out, NULL);
}

static void two_devices_two_contexts(void **state) {
    (void)state;
    attnbwd_ctx *ctx0 = open_device(0), *ctx1 = open_device(1);
    attnbwd_ctx_info i0, i1;
    assert_int_equal(attnbwd_ctx_get_info(ctx0, &i0), ATTNBWD_OK);
    assert_int_equal(attnbwd_ctx_get_info(ctx1, &i1), ATTNBWD_OK);
    assert_int_equal(i0.device, 0);
    assert_int_equal(i1.device, 1);

    attnbwd_shape shape = {.problem = ATTNBWD_SOFTMAX_DROPOUT_BWD, .batch = B, .heads = H, .seq_len = T, .dropout = 1};
    attnbwd_kernel *k0 = NULL, *k1 = NULL;
    assert_int_equal(attnbwd_get_kernel(ctx0, &shape, &k0), ATTNBWD_OK);
    assert_int_equal(attnbwd_get_kernel(ctx1, &shape, &k1), ATTNBWD_OK);
    assert_ptr_not_equal(k0, k1);

    fake_reset();
    const long before0 = fake_count("modules@0"), before1 = fake_count("modules@1");
    assert_int_equal(launch_on(k0, 0), ATTNBWD_OK);
    assert_int_equal(launch_on(k1, 1), ATTNBWD_OK);
    assert_int_equal(launch_on(k1, 1), ATTNBWD_OK); /* the module is loaded once per context */
    assert_int_equal(fake_count("modules@0") - before0, 1);
    assert_int_equal(fake_count("modules@1") - before1, 1);
    assert_int_equal(fake_count("launches"), 3);
    assert_int_equal(fake_launch_at(0)->device, 0);
    assert_int_equal(fake_launch_at(1)->device, 1);
    assert_int_equal(fake_launch_at(2)->device, 1);

    /* Device 1's memory is refused by device 0's kernel, by name, before a launch. */
    EXPECT_STATUS(launch_on(k0, 1), ATTNBWD_ERR_INVALID_ARGUMENT, "device 1");
    assert_int_equal(fake_count("launches"), 3);

    attnbwd_close(ctx1);
    assert_int_equal(fake_count("modules@1"), before1);
    assert_int_equal(fake_count("modules@0") - before0, 1);
    assert_int_equal(launch_on(k0, 0), ATTNBWD_OK);
    attnbwd_close(ctx0);
    assert_int_equal(fake_count("modules@0"), before0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_devices_two_contexts),
    };
    return cmocka_run_group_tests(tests, find_fake, NULL);
}
