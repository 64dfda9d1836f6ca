/* Two devices, two contexts: a process that opens a context for device 0
 * and one for device 1 (as attnbwd.torch does for cuda:0 and cuda:1) gets a
 * kernel object and a loaded module of its own in each device's context,
 * launches each kernel in its own device's context, and closing one context
 * leaves the other's module loaded. Runs against tests/fake_cuda's driver
 * ($ATTNBWD_LIBCUDA), whose launches record the device of the context they
 * were made in and which refuses a function launched from another device's
 * context. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fake_cuda/fake_cuda.h"
#include "test_util.h"

static fake_cuda_hooks fake;

static int find_fake(void **state) {
    (void)state;
    return fake_cuda_hooks_open(&fake);
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
    float *go = fake.alloc(4 * n, FAKE_MEM_DEVICE, device, 0), *p = fake.alloc(4 * n, FAKE_MEM_DEVICE, device, 0);
    float *out = fake.alloc(4 * n, FAKE_MEM_DEVICE, device, 0);
    uint8_t *mask = fake.alloc((size_t)B * T * T, FAKE_MEM_DEVICE, device, 0);
    uint8_t *drop = fake.alloc(n, FAKE_MEM_DEVICE, device, 0);
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

    fake.reset();
    const long before0 = fake.count("modules@0"), before1 = fake.count("modules@1");
    assert_int_equal(launch_on(k0, 0), ATTNBWD_OK);
    assert_int_equal(launch_on(k1, 1), ATTNBWD_OK);
    assert_int_equal(launch_on(k1, 1), ATTNBWD_OK); /* the module is loaded once per context */
    assert_int_equal(fake.count("modules@0") - before0, 1);
    assert_int_equal(fake.count("modules@1") - before1, 1);
    assert_int_equal(fake.count("launches"), 3);
    assert_int_equal(fake.launch(0)->device, 0);
    assert_int_equal(fake.launch(1)->device, 1);
    assert_int_equal(fake.launch(2)->device, 1);

    /* Device 1's memory is refused by device 0's kernel, by name, before a launch. */
    EXPECT_STATUS(launch_on(k0, 1), ATTNBWD_ERR_INVALID_ARGUMENT, "device 1");
    assert_int_equal(fake.count("launches"), 3);

    attnbwd_close(ctx1);
    assert_int_equal(fake.count("modules@1"), before1);
    assert_int_equal(fake.count("modules@0") - before0, 1);
    assert_int_equal(launch_on(k0, 0), ATTNBWD_OK);
    attnbwd_close(ctx0);
    assert_int_equal(fake.count("modules@0"), before0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_devices_two_contexts),
    };
    return cmocka_run_group_tests(tests, find_fake, NULL);
}
