"""A crash ends Larder within a second or two, with the Swift runtime's backtrace on stderr where it
can print one, so the supervisor restarts it rather than waiting on a process that answers nothing.

Crashes sent from outside (SIGSEGV, SIGBUS, SIGABRT with kill) and real ones inside a worker (a bad
memory access, a fatalError), the latter through the LARDER_TEST_CRASH test hook. Each test stops
and reaps its own Larder, since the fixture expects every instance to be running at teardown."""

import ctypes
import os
import platform
import re
import signal
import threading
import time

import pytest

from helpers import proxy_exchange, stop_process

# How long a crashed Larder may take to be gone, the backtrace included: symbolicating it takes a
# second on an idle machine and several on a loaded one. A crash handler that hangs took 30 s.
EXIT_LIMIT = 20.0
# The hook's log line, written just before the crash.
HOOK_LINE = "test hook: crashing worker 0"


class Traffic:
    """Requests through the proxy in a loop on a thread, so the workers are busy when it crashes."""

    def __init__(self, lr, origin):
        self.lr, self.origin = lr, origin
        self.answered = 0
        self._answers = threading.Condition()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                proxy_exchange(self.lr.port, "GET", self.origin.url(f"/bytes/2000?n={n}"), timeout=2)
                with self._answers:
                    self.answered += 1
                    self._answers.notify_all()
            except (OSError, EOFError, ValueError):
                self._stop.wait(0.02)  # the proxy is going away: try again until the test is over

    def __enter__(self):
        self._t.start()
        with self._answers:
            self._answers.wait_for(lambda: self.answered >= 5, timeout=5)
        assert self.answered >= 5, "no traffic got through before the crash"
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(5)


def exit_within(lr, limit):
    """Waits up to ``limit`` s for Larder to end; otherwise SIGKILLs it. Either way it is reaped and
    marked stopped for the fixture. Returns (seconds, return code or None if it had to be killed)."""
    start = time.monotonic()
    rc = lr.wait_exit(limit)
    elapsed = time.monotonic() - start
    if rc is None:
        stop_process(lr.proc, signal.SIGKILL, 10)
        lr.wait_exit(10)
        lr.killed = True
    return elapsed, rc


def wait_for_line(lr, text, timeout):
    """The monotonic time at which ``text`` was first seen on Larder's stderr, or None."""
    return time.monotonic() if lr.wait_for_log(re.escape(text), timeout) else None


def crash_report(lr):
    return f"\nstderr:\n{lr.log_text()[-6000:]}"


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT], ids=lambda s: s.name)
def test_crash_signal_from_outside_ends_larder_promptly(larder_factory, origin, report_metric, sig):
    lr = larder_factory(config={"workers": 2})
    with Traffic(lr, origin):
        os.kill(lr.pid, sig)  # to the process: any thread that does not block it may take it
        elapsed, rc = exit_within(lr, EXIT_LIMIT)
    report_metric(f"{sig.name} sent from outside: gone after {elapsed:.2f} s")
    assert rc is not None, f"still running {EXIT_LIMIT} s after {sig.name} (SIGKILLed){crash_report(lr)}"
    # Killed by that very signal: the supervisor sees a crash, and a core dump is written if allowed.
    assert rc == -sig, f"exit code {rc} after {sig.name}{crash_report(lr)}"
    assert "access log reopened" not in lr.log_text(), "the crash handler's signal was taken as SIGUSR1"


# tgkill's system call number, for a signal to one thread (Python only signals its own threads).
SYS_TGKILL = {"x86_64": 234, "aarch64": 131}.get(platform.machine())


def tgkill(pid, tid, sig):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_TGKILL, pid, tid, int(sig)) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


@pytest.mark.skipif(SYS_TGKILL is None, reason="tgkill's number is not known for this machine")
def test_crash_signal_to_a_worker_thread_ends_larder_promptly(larder_factory, origin, report_metric):
    """As a fault in a worker would: the main thread is not the one that crashed and has to be paused
    by the crash handler (before, it took the handler's SIGUSR1 as a log reopen, 16 times, for 30 s)."""
    lr = larder_factory(config={"workers": 2})
    with Traffic(lr, origin):
        worker = min(int(t) for t in os.listdir(f"/proc/{lr.pid}/task") if int(t) != lr.pid)
        tgkill(lr.pid, worker, signal.SIGSEGV)
        elapsed, rc = exit_within(lr, EXIT_LIMIT)
    report_metric(f"SIGSEGV sent to a worker thread: gone after {elapsed:.2f} s")
    assert rc is not None, f"still running {EXIT_LIMIT} s after SIGSEGV to a worker (SIGKILLed){crash_report(lr)}"
    assert rc == -signal.SIGSEGV, f"exit code {rc}{crash_report(lr)}"
    assert "access log reopened" not in lr.log_text(), "the crash handler's signal was taken as SIGUSR1"


@pytest.mark.parametrize("kind", ["segv", "fatal"])
def test_crash_inside_a_worker_ends_larder_promptly(larder_factory, origin, report_metric, kind):
    lr = larder_factory(config={"workers": 2}, env={"LARDER_TEST_CRASH": f"{kind}:1.5"})
    with Traffic(lr, origin):
        crashed_at = wait_for_line(lr, HOOK_LINE, 10)
        assert crashed_at is not None, f"the test hook did not fire{crash_report(lr)}"
        elapsed, rc = exit_within(lr, EXIT_LIMIT)
    report_metric(f"worker crash ({kind}): gone {elapsed:.2f} s after the hook's line")
    assert rc is not None, f"still running {EXIT_LIMIT} s after a worker crashed (SIGKILLed){crash_report(lr)}"
    # A bad access ends in SIGSEGV; fatalError traps (SIGILL on x86-64, SIGTRAP on arm64).
    expected = [-signal.SIGSEGV] if kind == "segv" else [-signal.SIGILL, -signal.SIGTRAP]
    assert rc in expected, f"exit code {rc}{crash_report(lr)}"
    if "Program crashed" in lr.log_text():  # the runtime found its backtracer: the worker's frames are shown
        assert "CrashTestHook.crashForTest" in lr.log_text(), f"no backtrace of the worker{crash_report(lr)}"


def test_crash_hook_off_without_its_variable(larder_factory):
    lr = larder_factory()
    assert lr.wait_exit(0.5) is None
    assert "test hook" not in lr.log_text()


def test_crash_hook_with_a_bad_value_is_a_start_up_error(larder_factory):
    lr = larder_factory(env={"LARDER_TEST_CRASH": "segv"}, wait=False)
    assert lr.wait_exit(10) == 2, lr.log_text()
    assert "LARDER_TEST_CRASH=segv: expected segv:SECONDS, fatal:SECONDS or lmdb:SECONDS" in lr.log_text()
