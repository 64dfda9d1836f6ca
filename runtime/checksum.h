/* The disk cache entries' checksums (cache.h): XXH3-64 over a part of an
 * entry's manifest, then its payload (or none). One function for the writer,
 * the reader and the cache tools, so that they cannot disagree. */
#ifndef ATTNBWD_CHECKSUM_H
#define ATTNBWD_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

uint64_t cache_checksum(const void *manifest, size_t mlen, const void *payload, size_t plen);

/* The same hash built for AVX2 (checksum_avx2.c); call only where the CPU has it. */
uint64_t cache_checksum_avx2(const void *manifest, size_t mlen, const void *payload, size_t plen);

#endif
