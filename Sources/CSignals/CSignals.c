#define _GNU_SOURCE
#include "CSignals.h"

#include <string.h>
#include <sys/syscall.h>
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

static void on_crash_signal(int sig, siginfo_t *info, void *context) {
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
