// nghttp2 allocates a stream, its queued frames and a copy of each answer head for every request
// and frees them when the stream ends: five blocks per HTTP/2 hit, about a thousand instructions
// in malloc and free. Those sizes repeat, so blocks freed on a thread wait in a short list per
// size class for the next stream of that thread's loop, as a loop's connections keep reusing them.
#include "CH2Memory.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LARDER_PLAIN_MALLOC 1
#endif
#endif

enum { CLASSES = 6 };
static const size_t class_size[CLASSES] = {64, 128, 256, 512, 1024, 2048};
/// Bytes each class may keep per thread: a flood of streams leaves at most this much behind.
static const size_t keep_bytes = 256 * 1024;

/// In front of every block: its usable size and class (CLASSES: not pooled). Sixteen bytes, so
/// what follows keeps malloc's alignment.
typedef struct block_header {
    size_t size;
    size_t klass;
} block_header;

typedef struct free_block {
    struct free_block *next;
} free_block;

typedef struct pool {
    free_block *first[CLASSES];
    size_t kept[CLASSES];
    int registered;
} pool;

static __thread pool local;

int larder_h2_memory_class(size_t size) {
    for (int k = 0; k < CLASSES; k++) {
        if (size <= class_size[k]) return k;
    }
    return -1;
}

size_t larder_h2_memory_keep_limit(int klass) {
    return klass >= 0 && klass < CLASSES ? keep_bytes / class_size[klass] : 0;
}

size_t larder_h2_memory_kept(int klass) {
    return klass >= 0 && klass < CLASSES ? local.kept[klass] : 0;
}

#if defined(LARDER_PLAIN_MALLOC)
// Sanitizer builds (scripts/sanitize.sh defines this): every block straight from malloc and back,
// so that a use after free or a double free in nghttp2's memory is seen, not hidden in a list.
static void *plain_malloc(size_t size, void *user) { (void)user; return malloc(size); }
static void plain_free(void *ptr, void *user) { (void)user; free(ptr); }
static void *plain_calloc(size_t count, size_t size, void *user) { (void)user; return calloc(count, size); }
static void *plain_realloc(void *ptr, size_t size, void *user) { (void)user; return realloc(ptr, size); }
static nghttp2_mem memory = {NULL, plain_malloc, plain_free, plain_calloc, plain_realloc};
#else
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/// A thread that ends gives its kept blocks back to malloc.
static void release_pool(void *arg) {
    pool *p = arg;
    for (int k = 0; k < CLASSES; k++) {
        while (p->first[k]) {
            free_block *b = p->first[k];
            p->first[k] = b->next;
            free((block_header *)b - 1);
        }
        p->kept[k] = 0;
    }
    p->registered = 0;
}

static void make_exit_key(void) { (void)pthread_key_create(&exit_key, release_pool); }

static void *pool_malloc(size_t size, void *user) {
    (void)user;
    int k = larder_h2_memory_class(size);
    if (k >= 0 && local.first[k]) {
        free_block *b = local.first[k];
        local.first[k] = b->next;
        local.kept[k]--;
        return b;
    }
    size_t usable = k >= 0 ? class_size[k] : size;
    if (usable > SIZE_MAX - sizeof(block_header)) return NULL;
    block_header *h = malloc(sizeof(block_header) + usable);
    if (!h) return NULL;
    h->size = usable;
    h->klass = k >= 0 ? (size_t)k : CLASSES;
    return h + 1;
}

static void pool_free(void *ptr, void *user) {
    (void)user;
    if (!ptr) return;
    block_header *h = (block_header *)ptr - 1;
    size_t k = h->klass;
    if (k < CLASSES && local.kept[k] < keep_bytes / class_size[k]) {
        if (!local.registered) {
            (void)pthread_once(&exit_key_once, make_exit_key);
            local.registered = pthread_setspecific(exit_key, &local) == 0;
            if (!local.registered) {
                free(h);
                return;
            }
        }
        free_block *b = ptr;
        b->next = local.first[k];
        local.first[k] = b;
        local.kept[k]++;
        return;
    }
    free(h);
}

static void *pool_calloc(size_t count, size_t size, void *user) {
    if (size != 0 && count > SIZE_MAX / size) return NULL;
    void *p = pool_malloc(count * size, user);
    if (p) memset(p, 0, count * size);
    return p;
}

static void *pool_realloc(void *ptr, size_t size, void *user) {
    if (!ptr) return pool_malloc(size, user);
    if (size == 0) {
        pool_free(ptr, user);
        return NULL;
    }
    block_header *h = (block_header *)ptr - 1;
    if (size <= h->size) return ptr;
    void *grown = pool_malloc(size, user);
    if (!grown) return NULL;
    memcpy(grown, ptr, h->size);
    pool_free(ptr, user);
    return grown;
}

static nghttp2_mem memory = {NULL, pool_malloc, pool_free, pool_calloc, pool_realloc};
#endif

nghttp2_mem *larder_h2_memory(void) { return &memory; }
