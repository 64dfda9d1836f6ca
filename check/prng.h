/* The random generators of the checks and the references: splitmix64 to
 * expand a seed, xoshiro256** to draw. Header-only, so each caller keeps its
 * own seeding scheme and state. */
#ifndef ATTNBWD_PRNG_H
#define ATTNBWD_PRNG_H

#include <stdint.h>

static inline uint64_t prng_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t prng_rotl(uint64_t v, int k) { return (v << k) | (v >> (64 - k)); }

/* One xoshiro256** step on the state s[4]. */
static inline uint64_t prng_xoshiro256ss(uint64_t s[4]) {
    const uint64_t out = prng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = prng_rotl(s[3], 45);
    return out;
}

#endif
