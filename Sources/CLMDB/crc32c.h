// CRC32C (Castagnoli) with the SSE4.2 instruction: the checksum the cache stores with every body
// chunk and record it writes to LMDB. The portable fallback is plain Swift (CacheStore's CRC32C).
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

/// Whether `larder_crc32c_sse42` may run on this CPU.
static inline int larder_crc32c_hardware_available(void) {
#if defined(__x86_64__)
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c & bit_SSE4_2) != 0;
#else
    return 0;
#endif
}

/// Continues `crc` (0 to start) over `count` bytes at `data`: eight bytes per crc32q
/// (_mm_crc32_u64, through its builtin so no intrinsics header is imported into Swift).
#if defined(__x86_64__)
__attribute__((target("sse4.2")))
#endif
static inline uint32_t larder_crc32c_sse42(uint32_t crc, const void *data, size_t count) {
#if defined(__x86_64__)
    const unsigned char *p = (const unsigned char *)data;
    uint64_t c = (uint32_t)~crc;
    // Unrolled so the loop's own instructions are a third of the work, not half.
    while (count >= 64) {
        uint64_t w[8];
        memcpy(w, p, 64);
        c = __builtin_ia32_crc32di(c, w[0]);
        c = __builtin_ia32_crc32di(c, w[1]);
        c = __builtin_ia32_crc32di(c, w[2]);
        c = __builtin_ia32_crc32di(c, w[3]);
        c = __builtin_ia32_crc32di(c, w[4]);
        c = __builtin_ia32_crc32di(c, w[5]);
        c = __builtin_ia32_crc32di(c, w[6]);
        c = __builtin_ia32_crc32di(c, w[7]);
        p += 64;
        count -= 64;
    }
    while (count >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        count -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (count > 0) {
        c32 = __builtin_ia32_crc32qi(c32, *p++);
        count--;
    }
    return ~c32;
#else
    (void)data; (void)count;
    return crc;  // never called: larder_crc32c_hardware_available() is 0
#endif
}

/// Bytes per stream in `larder_crc32c_sse42_3way`: three runs of this length are checksummed side
/// by side, then joined.
#define LARDER_CRC32C_BLOCK 1024

/// `state` advanced over `n` zero bytes, for the `n` a table was made for (`larder_crc32c_sse42_3way`).
static inline uint32_t larder_crc32c_shift(const uint32_t *table, uint32_t state) {
    return table[state & 0xff] ^ table[256 + ((state >> 8) & 0xff)] ^ table[512 + ((state >> 16) & 0xff)]
        ^ table[768 + (state >> 24)];
}

/// The same checksum as `larder_crc32c_sse42`, three times as fast on long inputs: one crc32q waits
/// three cycles for the one before, so three independent runs over adjacent blocks keep the unit
/// busy. CRC arithmetic is linear, so the runs join as crc(A B C) = shift2(crc(A)) ^ shift1(crc(B)) ^
/// crc(C), where `shifts` holds the tables of advancing a state over one block of zeros (entries
/// 0-1023) and over two (1024-2047), indexed by each byte of the state.
#if defined(__x86_64__)
__attribute__((target("sse4.2")))
#endif
static inline uint32_t larder_crc32c_sse42_3way(uint32_t crc, const void *data, size_t count, const uint32_t *shifts) {
#if defined(__x86_64__)
    const unsigned char *p = (const unsigned char *)data;
    uint32_t state = ~crc;
    while (count >= 3 * LARDER_CRC32C_BLOCK) {
        uint64_t a = state, b = 0, c = 0;
        for (size_t i = 0; i < LARDER_CRC32C_BLOCK; i += 8) {
            uint64_t wa, wb, wc;
            memcpy(&wa, p + i, 8);
            memcpy(&wb, p + LARDER_CRC32C_BLOCK + i, 8);
            memcpy(&wc, p + 2 * LARDER_CRC32C_BLOCK + i, 8);
            a = __builtin_ia32_crc32di(a, wa);
            b = __builtin_ia32_crc32di(b, wb);
            c = __builtin_ia32_crc32di(c, wc);
        }
        state = larder_crc32c_shift(shifts + 1024, (uint32_t)a) ^ larder_crc32c_shift(shifts, (uint32_t)b) ^ (uint32_t)c;
        p += 3 * LARDER_CRC32C_BLOCK;
        count -= 3 * LARDER_CRC32C_BLOCK;
    }
    return larder_crc32c_sse42(~state, p, count);
#else
    (void)data; (void)count; (void)shifts;
    return crc;  // never called: larder_crc32c_hardware_available() is 0
#endif
}

