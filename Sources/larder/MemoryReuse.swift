import Glibc

/// Keeps memory that responses free for the next responses, instead of glibc's defaults handing it
/// back to the kernel and faulting it in again. A disk hit's body buffer (an evbuffer chain of 128
/// KiB for a 64 KiB body) sits at the default mmap threshold, and a worker thread's heap gives back
/// a freed top of more than 128 KiB with `madvise`: either way every response paid for page faults
/// and zeroed pages (a fifth of Larder's CPU in disk-only hits). Setting both limits by hand also
/// stops glibc from moving them as it goes.
func keepFreedMemoryForReuse() {
    // Blocks this large still get their own mapping, returned as soon as they are freed.
    _ = glibcMallopt(mallocMmapThreshold, 4 << 20)
    // Free space at the top of a heap beyond this goes back to the kernel: far above one
    // response's buffers, low enough that each thread's heap keeps little after a burst.
    _ = glibcMallopt(mallocTrimThreshold, 8 << 20)
}

// `<malloc.h>` is not part of the Glibc module: glibc's `mallopt` and its two parameters.
@_silgen_name("mallopt")
private func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
private let mallocTrimThreshold: Int32 = -1
private let mallocMmapThreshold: Int32 = -3
