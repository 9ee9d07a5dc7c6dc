#ifndef LARDER_ATOMIC_BITS_H
#define LARDER_ATOMIC_BITS_H
#include <stdint.h>

/* Words of a bit set shared between the threads that store and the loops' threads that read. Bits
   are only ever set, and relaxed ordering suffices: a bit is set before its commit is queued under
   the writer's lock, and a loop learns that an entry is committed (or pending) only through a lock
   or its own queue, which makes the bit visible too. A reader that sees a bit still clear without
   such news is one whose lookup came before the commit, as a read snapshot taken earlier would. */
static inline void larder_bits_set(uint64_t *word, uint64_t mask) {
    __atomic_fetch_or(word, mask, __ATOMIC_RELAXED);
}

static inline uint64_t larder_bits_load(const uint64_t *word) {
    return __atomic_load_n(word, __ATOMIC_RELAXED);
}
#endif
