#ifndef LARDER_ATOMIC_BITS_H
#define LARDER_ATOMIC_BITS_H
#include <stdint.h>

/* Words of a bit set shared between the disk writer's and the loops' threads: bits are only ever
   set, so relaxed ordering suffices (a reader that misses a bit just set looks in LMDB as before). */
static inline void larder_bits_set(uint64_t *word, uint64_t mask) {
    __atomic_fetch_or(word, mask, __ATOMIC_RELAXED);
}

static inline uint64_t larder_bits_load(const uint64_t *word) {
    return __atomic_load_n(word, __ATOMIC_RELAXED);
}
#endif
