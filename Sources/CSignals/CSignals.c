#define _GNU_SOURCE
#include "CSignals.h"

#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

// The signals the Swift runtime's crash handler catches on Linux.
static const int crash_signals[] = { SIGQUIT, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGTRAP };

// What each signal's handler was before ours; written before ours is installed, then only read.
static struct sigaction previous[NSIG];

static void call_previous(int sig, siginfo_t *info, void *context) {
    const struct sigaction *p = &previous[sig];
    if (p->sa_flags & SA_SIGINFO) {
        p->sa_sigaction(sig, info, context);
    } else {
        p->sa_handler(sig);
    }
}

// Default action, unblocked, sent to this thread: the process ends by `sig` (and dumps core if allowed).
static void die_by(int sig) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    pthread_sigmask(SIG_UNBLOCK, &only, NULL);
    syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
}

// ---- A fault inside LMDB: the cache is moved aside before the process ends ----------------------
//
// What runs inside the signal handler is async-signal-safe: static buffers (written by the one
// thread that claims the move), clock_gettime, rename, mkdir, write and nanosleep.

// The cache directory and where liblmdb's code lies; set once by the normal program
// (`larder_move_cache_aside_on_lmdb_fault`), read by the handler only once `lmdb_watched` is set.
static char lmdb_directory[4096];
static uintptr_t lmdb_code_start, lmdb_code_end;
static sig_atomic_t lmdb_watched;
// The move: 0 not begun, 1 under way (one thread claimed it), 2 done.
static int move_state;
// Signals whose handler is ours although there was none before (the runtime's backtracer off).
static int installed_alone[NSIG];

static int find_lmdb_code(struct dl_phdr_info *info, size_t size, void *unused) {
    (void)size; (void)unused;
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, "/liblmdb.so") == NULL) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            lmdb_code_start = info->dlpi_addr + ph->p_vaddr;
            lmdb_code_end = lmdb_code_start + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

// The address of the instruction that faulted, or 0 where this machine's context is not known.
static uintptr_t faulting_instruction(void *context) {
    const ucontext_t *uc = context;
    if (uc == NULL) return 0;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    return 0;
#endif
}

// Appends `text` to `out` (of `room` bytes, `*n` used), cut short rather than overrun.
static void put(char *out, size_t room, size_t *n, const char *text) {
    while (*text != 0 && *n + 1 < room) out[(*n)++] = *text++;
    out[*n] = 0;
}

static void put_number(char *out, size_t room, size_t *n, long long v) {
    char digits[24];
    int k = 0;
    if (v < 0) v = 0;
    do { digits[k++] = (char)('0' + v % 10); v /= 10; } while (v > 0 && k < (int)sizeof digits);
    char text[24];
    for (int i = 0; i < k; i++) text[i] = digits[k - 1 - i];
    text[k] = 0;
    put(out, room, n, text);
}

static void say(const char *text) {
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t w = write(2, text, left);
        if (w <= 0) return;
        text += w;
        left -= (size_t)w;
    }
}

// As the start-up's own move (`DiskStore.moveAside`): the directory renamed to
// `<directory>.broken-<time>`, or where it cannot be (a mount point), its LMDB files moved into
// `<directory>/broken-<time>/`.
static void move_cache_aside(int sig) {
    static char aside[4200], from[4200], to[4200], line[9000];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    size_t n = 0;
    put(aside, sizeof aside, &n, lmdb_directory);
    put(aside, sizeof aside, &n, ".broken-");
    put_number(aside, sizeof aside, &n, now.tv_sec);
    int moved = rename(lmdb_directory, aside) == 0;
    if (!moved && (errno == EBUSY || errno == EACCES || errno == EPERM || errno == EXDEV)) {
        n = 0;
        put(aside, sizeof aside, &n, lmdb_directory);
        put(aside, sizeof aside, &n, "/broken-");
        put_number(aside, sizeof aside, &n, now.tv_sec);
        if (mkdir(aside, 0700) == 0 || errno == EEXIST) {
            moved = 1;
            static const char *const files[] = { "/data.mdb", "/lock.mdb" };
            for (size_t i = 0; i < 2; i++) {
                size_t f = 0, t = 0;
                put(from, sizeof from, &f, lmdb_directory);
                put(from, sizeof from, &f, files[i]);
                put(to, sizeof to, &t, aside);
                put(to, sizeof to, &t, files[i]);
                if (rename(from, to) != 0 && errno != ENOENT) moved = 0;
            }
        }
    }
    n = 0;
    put(line, sizeof line, &n, "larder: a fault (signal ");
    put_number(line, sizeof line, &n, sig);
    put(line, sizeof line, &n, ") inside LMDB, reading a page its own checks let through: the cache in ");
    put(line, sizeof line, &n, lmdb_directory);
    if (moved) {
        put(line, sizeof line, &n, " is damaged and was moved to ");
        put(line, sizeof line, &n, aside);
        put(line, sizeof line, &n, "; the next start begins with an empty cache\n");
    } else {
        put(line, sizeof line, &n, " is damaged and could not be moved aside\n");
    }
    say(line);
}

// A fault the kernel raised (not a signal sent with kill or tgkill) at an instruction of liblmdb.
static int is_lmdb_fault(int sig, const siginfo_t *info, void *context) {
    if (!__atomic_load_n(&lmdb_watched, __ATOMIC_ACQUIRE) || (sig != SIGSEGV && sig != SIGBUS)) return 0;
    if (info == NULL || info->si_code <= 0) return 0;
    uintptr_t pc = faulting_instruction(context);
    return pc >= lmdb_code_start && pc < lmdb_code_end;
}

// A crash on any thread while another moves the cache aside waits for the move (two seconds at
// most) before the process ends: ending it half-way would leave the cache in place.
static void wait_for_move(void) {
    struct timespec pause = { 0, 1000000 };
    for (int i = 0; i < 2000 && __atomic_load_n(&move_state, __ATOMIC_ACQUIRE) == 1; i++) nanosleep(&pause, NULL);
}

static void on_crash_signal(int sig, siginfo_t *info, void *context) {
    if (is_lmdb_fault(sig, info, context)) {
        int idle = 0;  // one thread moves, once
        if (__atomic_compare_exchange_n(&move_state, &idle, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            move_cache_aside(sig);
            __atomic_store_n(&move_state, 2, __ATOMIC_RELEASE);
        }
    }
    wait_for_move();
    if (installed_alone[sig]) {
        die_by(sig);  // no backtracer to call: the default action, now
        return;
    }
    // The runtime prints the backtrace, resets its handlers to the default and returns.
    call_previous(sig, info, context);
    // A fault happens again when the faulting instruction is retried, now fatally; a signal that was
    // sent (si_code <= 0: kill, tgkill, raise, sigqueue) is not repeated, so the process would go on.
    if (info == NULL || info->si_code <= 0) {
        die_by(sig);
    }
}

static int is_function(const struct sigaction *sa) {
    if (sa->sa_flags & SA_SIGINFO) {
        return sa->sa_sigaction != NULL && sa->sa_sigaction != on_crash_signal;
    }
    return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

int larder_make_crash_signals_fatal(void) {
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++) {
        int sig = crash_signals[i];
        struct sigaction current;
        if (sigaction(sig, NULL, &current) != 0) {
            return -1;
        }
        if (!is_function(&current)) {
            continue;  // the default action already ends the process at once
        }
        previous[sig] = current;
        struct sigaction wrapped = current;  // same mask and flags as the runtime chose
        wrapped.sa_flags |= SA_SIGINFO;
        wrapped.sa_sigaction = on_crash_signal;
        if (sigaction(sig, &wrapped, NULL) != 0) {
            return -1;
        }
    }
    return 0;
}

int larder_move_cache_aside_on_lmdb_fault(const char *directory) {
    size_t length = strlen(directory);
    if (length == 0 || length >= sizeof lmdb_directory) return -1;
    if (dl_iterate_phdr(find_lmdb_code, NULL) == 0) return -1;  // liblmdb is not loaded
    memcpy(lmdb_directory, directory, length + 1);
    // Where no backtracer handles these faults, this handler does, alone.
    static const int faults[] = { SIGSEGV, SIGBUS };
    for (size_t i = 0; i < 2; i++) {
        int sig = faults[i];
        struct sigaction current;
        if (sigaction(sig, NULL, &current) != 0) return -1;
        if (is_function(&current) || (current.sa_flags & SA_SIGINFO && current.sa_sigaction == on_crash_signal)) {
            continue;  // the backtracer's, wrapped (`larder_make_crash_signals_fatal`) or to be
        }
        struct sigaction alone;
        memset(&alone, 0, sizeof alone);
        sigemptyset(&alone.sa_mask);
        alone.sa_flags = SA_SIGINFO | SA_ONSTACK;
        alone.sa_sigaction = on_crash_signal;
        installed_alone[sig] = 1;
        if (sigaction(sig, &alone, NULL) != 0) return -1;
    }
    __atomic_store_n(&lmdb_watched, 1, __ATOMIC_RELEASE);  // after the directory and the range
    return 0;
}
