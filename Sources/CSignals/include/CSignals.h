// Signal plumbing Swift cannot do on its own: the signalfd API (not in Swift's Glibc module) and a
// crash handler written in C, where running inside a signal handler is well defined.
#ifndef LARDER_CSIGNALS_H
#define LARDER_CSIGNALS_H

#include <signal.h>
#include <sys/signalfd.h>

/// Wraps the handlers already installed for the crash signals (the Swift runtime's backtracer) so
/// that a crash signal sent with kill, tgkill or raise ends the process once the backtrace is
/// printed. Signals left at their default action are left alone. Returns 0, or -1 with errno.
int larder_make_crash_signals_fatal(void);

/// A SIGSEGV or SIGBUS whose faulting instruction is inside liblmdb (a damaged page LMDB's own
/// checks let through, read through a wild offset) moves `directory`, the cache, aside before the
/// process ends, as an LMDB assertion does, so that the next start begins with an empty cache
/// rather than meeting the same page. Call once the crash handlers are wrapped, from the normal
/// program. Returns 0, or -1 (liblmdb not loaded, a path too long, or errno from sigaction).
int larder_move_cache_aside_on_lmdb_fault(const char *directory);

#endif
