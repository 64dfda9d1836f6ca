/* A cheap look at a cubin before it goes to the driver: an ELF file for
 * CUDA, of 64 bits, little-endian, an executable, its tables inside the
 * file, built for the context's SM. The disk cache's checksum is not keyed,
 * so this keeps a planted or garbled payload that matches its manifest from
 * reaching cuModuleLoadData (the folder's trust is the real boundary; see
 * cache.h). NVRTC's cubins pass; nothing here proves a cubin harmless. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define EM_CUDA 190
#define ET_EXEC 2
#define ELF64_HEADER 64
/* The ELF ABI version from which the SM sits in bits 8-15 of e_flags (CUDA
 * 12.8 and later write 8); before it, in bits 0-7. */
#define CUDA_ABI_SM_IN_BYTE1 8

static uint16_t u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t u64(const unsigned char *p) { return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32; }

/* 1 when [off, off + count * size) lies inside a file of len bytes. */
static int table_inside(uint64_t off, uint64_t count, uint64_t size, size_t len) {
    if (count == 0) return 1;
    if (size == 0 || count > UINT64_MAX / size) return 0;
    return off <= len && count * size <= len - off;
}

/* The SM number of "sm_90", "sm_90a", "compute_100"...; 0 when there is none. */
static unsigned arch_sm(const char *arch) {
    const char *d = strchr(arch ? arch : "", '_');
    return d ? (unsigned)strtoul(d + 1, NULL, 10) : 0;
}

const char *cubin_check(const void *data, size_t len, const char *arch) {
    const unsigned char *p = data;
    if (len < ELF64_HEADER || memcmp(p, "\x7f" "ELF", 4) != 0) return "not an ELF file (not a cubin)";
    if (p[4] != 2 || p[5] != 1) return "not a 64-bit little-endian ELF file (not a cubin)";
    if (u16(p + 18) != EM_CUDA) return "an ELF file for another machine than CUDA";
    if (u16(p + 16) != ET_EXEC) return "a CUDA ELF file that is not an executable cubin";
    if (!table_inside(u64(p + 32), u16(p + 56), u16(p + 54), len) ||
        !table_inside(u64(p + 40), u16(p + 60), u16(p + 58), len))
        return "a cubin whose program or section table lies outside the file (truncated?)";
    const uint32_t flags = u32(p + 48);
    const unsigned sm = p[8] >= CUDA_ABI_SM_IN_BYTE1 ? (flags >> 8) & 0xff : flags & 0xff;
    const unsigned want = arch_sm(arch);
    if (want && sm != want) return "a cubin for another GPU architecture than the context's";
    return NULL;
}
