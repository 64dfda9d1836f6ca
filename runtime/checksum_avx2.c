/* XXH3-64 built with AVX2 (this file alone is compiled with -mavx2; see
 * checksum.c for when it is called). */
#include "checksum.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

uint64_t cache_checksum_avx2(const void *manifest, size_t mlen, const void *payload, size_t plen) {
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, manifest, mlen);
    XXH3_64bits_update(&st, payload, plen);
    return XXH3_64bits_digest(&st);
}
#endif
