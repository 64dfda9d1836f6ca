/* The disk cache's checksum (runtime/checksum.c) is the same number whichever
 * build of XXH3 the CPU gets: entries written on a machine with AVX2 are read
 * on one without, and the other way round. Checked against XXH3-64 built here
 * with the compiler's baseline vectors, over sizes around XXH3's block and
 * stripe edges and a whole problem-2 entry's size. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "checksum.h"

static uint64_t baseline(const void *a, size_t alen, const void *b, size_t blen) {
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, a, alen);
    XXH3_64bits_update(&st, b, blen);
    return XXH3_64bits_digest(&st);
}

static void same_value_as_the_baseline_build(void **state) {
    (void)state;
    enum { MAX = 1 << 20 };
    unsigned char *buf = malloc(MAX);
    assert_non_null(buf);
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < MAX; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    static const size_t sizes[] = {0, 1, 16, 17, 128, 129, 240, 241, 1023, 1024, 1025, 65536, 180001, MAX / 2};
    int avx2 = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    avx2 = __builtin_cpu_supports("avx2");
#endif
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
            const unsigned char *a = buf, *b = buf + MAX / 2;
            uint64_t want = baseline(a, sizes[i], b, sizes[j]);
            assert_true(cache_checksum(a, sizes[i], b, sizes[j]) == want);
            if (avx2) assert_true(cache_checksum_avx2(a, sizes[i], b, sizes[j]) == want);
        }
    }
    print_message("AVX2 build %s\n", avx2 ? "compared" : "not compared (no AVX2 on this CPU)");
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(same_value_as_the_baseline_build)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
