// nghttp2's allocator: a pool of freed blocks per thread (see CH2Memory.c).
#ifndef LARDER_CH2MEMORY_H
#define LARDER_CH2MEMORY_H

#include <stddef.h>
#include <nghttp2/nghttp2.h>

/// The allocator to give every nghttp2 session (`nghttp2_session_server_new3`, `..._client_new3`).
/// Blocks freed on a thread are kept for that thread's next allocations of their size class, up
/// to a bound per class; the rest go back to malloc. Any thread may allocate or free. Built with
/// a sanitizer (or `LARDER_PLAIN_MALLOC`), every block comes straight from malloc instead.
nghttp2_mem *larder_h2_memory(void);

/// The size class a block of `size` bytes comes from: -1 for sizes past the largest class, which
/// are malloc's alone.
int larder_h2_memory_class(size_t size);

/// Blocks of size class `klass` kept for the calling thread now.
size_t larder_h2_memory_kept(int klass);

/// The most blocks of size class `klass` a thread keeps.
size_t larder_h2_memory_keep_limit(int klass);

#endif
