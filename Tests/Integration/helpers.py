"""Helpers for Larder's integration tests: processes, raw HTTP, small servers.

Everything here talks to 127.0.0.1 only, every wait is bounded.
"""

import contextlib
import ctypes
import hashlib
import json
import os
import re
import select
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import origin as origin_mod  # noqa: E402  (pattern functions shared with the origin)

pattern = origin_mod.pattern
pattern_chunks = origin_mod.pattern_chunks
pattern_sha256 = origin_mod.pattern_sha256

LOCALHOST = "127.0.0.1"
START_TIMEOUT = 15.0
STOP_TIMEOUT = 15.0

# Child processes started by the current test; the per-test watchdog kills them.
CHILDREN = []
CHILDREN_LOCK = threading.Lock()


def _register_child(proc):
    with CHILDREN_LOCK:
        CHILDREN.append(proc)


# ---------------------------------------------------------------------------
# Locating the binary, environment for children


def larder_bin():
    env = os.environ.get("LARDER_BIN")
    if env:
        path = Path(env)
        if not path.exists():
            import pytest
            pytest.fail(f"LARDER_BIN={env} does not exist", pytrace=False)
        return str(path)
    for candidate in (REPO_ROOT / ".build" / "release" / "larder",
                      REPO_ROOT / ".build" / "debug" / "larder"):
        if candidate.exists():
            return str(candidate)
    import pytest
    pytest.fail("larder binary not found: set LARDER_BIN or build it "
                f"({REPO_ROOT}/.build/release/larder or {REPO_ROOT}/.build/debug/larder)", pytrace=False)


def child_env():
    """os.environ without proxy settings and LARDER_* overrides."""
    env = {}
    for k, v in os.environ.items():
        kl = k.lower()
        if kl in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy"):
            continue
        if k.startswith("LARDER_"):
            continue
        env[k] = v
    return env


_libc = None


def _die_with_parent():
    """preexec_fn: ask the kernel to SIGKILL the child if the test process dies."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


# Load libc before any fork so preexec_fn does as little as possible.
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:
    _libc = None


def spawn(cmd, **kw):
    kw.setdefault("env", child_env())
    kw.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.Popen([str(c) for c in cmd], preexec_fn=_die_with_parent, **kw)
    _register_child(proc)
    return proc


def wait_process(proc, timeout):
    """Waits up to ``timeout`` s for a child process to exit; its exit code, or None if it is still
    running. Event-driven: a pidfd becomes readable when the process exits (Popen.wait with a
    timeout would poll with sleeps)."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (an old kernel): Popen's own wait
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    try:
        ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
    finally:
        os.close(fd)
    return proc.wait() if ready else proc.poll()


def stop_process(proc, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
    """Signal a process by PID, wait; SIGKILL as a last resort. Returns (rc, killed)."""
    if proc.poll() is not None:
        return proc.returncode, False
    try:
        os.kill(proc.pid, sig)
    except ProcessLookupError:
        pass
    rc = wait_process(proc, timeout)
    if rc is not None:
        return rc, False
    try:
        os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return wait_process(proc, 10), True


# ---------------------------------------------------------------------------
# YAML (just enough to write Larder configs)


class Raw(str):
    """A YAML scalar written verbatim (e.g. ``off``)."""


def _yaml_scalar(v):
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if v is None:
        return "null"
    return json.dumps(str(v))


def to_yaml(obj, indent=0):
    pad = "  " * indent
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict):
                if v:
                    out.append(f"{pad}{k}:")
                    out.append(to_yaml(v, indent + 1))
                else:
                    out.append(f"{pad}{k}: {{}}")
            elif isinstance(v, (list, tuple)):
                if v:
                    out.append(f"{pad}{k}:")
                    for item in v:
                        # Mappings in lists as JSON flow style, which YAML reads as is.
                        text = json.dumps(item) if isinstance(item, dict) else _yaml_scalar(item)
                        out.append(f"{pad}  - {text}")
                else:
                    out.append(f"{pad}{k}: []")
            else:
                out.append(f"{pad}{k}: {_yaml_scalar(v)}")
    else:
        out.append(pad + _yaml_scalar(obj))
    return "\n".join(line for line in out if line != "")


def deep_merge(base, over):
    result = dict(base)
    for k, v in (over or {}).items():
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict) and isinstance(result.get(k), dict):
            result[k] = deep_merge(result[k], v)
        else:
            result[k] = v
    return result


# ---------------------------------------------------------------------------
# Larder process


LISTEN_RE = re.compile(r"proxy listening on 127\.0\.0\.1:(\d+)")
ADMIN_RE = re.compile(r"admin endpoint listening on 127\.0\.0\.1:(\d+)")


class Larder:
    def __init__(self, workdir, config=None, args=(), listeners=1, name="larder",
                 listen_flag=True, wait=True, wrapper=(), binary=None, start_timeout=START_TIMEOUT, env=None,
                 clock=None):
        self.workdir = Path(workdir)
        # ``clock``: a TestClock this instance runs on (``self.clock.advance(s)``), or None.
        self.clock = clock
        if clock is not None:
            env = {**clock.env, **(env or {})}
        self.name = name
        self.cache_dir = self.workdir / f"{name}-cache"
        # Larder's own interception CA, apart from the cache as in a real installation.
        self.ca_dir = self.workdir / f"{name}-ca"
        base = {
            "admin_listen": Raw("off"),
            "workers": 2,
            "cache_dir": str(self.cache_dir),
            "tls": {"intercept_ca_dir": str(self.ca_dir)},
            "shutdown_grace": "5s",
            "connect_ports": [443],
            "via_name": "larder",
            "log_level": "info",
        }
        self.config = deep_merge(base, config or {})
        self.config_path = self.workdir / f"{name}.yaml"
        self.config_path.write_text(to_yaml(self.config) + "\n")
        cmd = [*wrapper, binary or larder_bin(), "--config", self.config_path]
        if listen_flag:
            cmd += ["--listen", "127.0.0.1:0"]
        cmd += ["--cache-dir", self.cache_dir]
        cmd += list(args)
        self.cmd = [str(c) for c in cmd]
        self.lines = []
        self.lines_lock = threading.Lock()
        # Notified for every line the reader thread adds (``wait_for_log`` waits on it).
        self.lines_added = threading.Condition(self.lines_lock)
        self.reader_done = False
        self.ports = []
        self.admin_ports = []
        self.listeners = listeners
        self.ready = threading.Event()
        self.stopped = False
        self.killed = False
        self.returncode = None
        # ``env``: variables added to the child's (LARDER_* ones included, which are otherwise dropped).
        self.proc = spawn(self.cmd, env={**child_env(), **(env or {})}, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()
        if wait:
            self.wait_listening(start_timeout)

    def _read_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.lines_lock:
                self.lines.append(line)
                a = ADMIN_RE.search(line)
                if a:
                    self.admin_ports.append(int(a.group(1)))
                m = LISTEN_RE.search(line)
                if m:
                    self.ports.append(int(m.group(1)))
                    if len(self.ports) >= self.listeners:
                        self.ready.set()
                self.lines_added.notify_all()
        self.ready.set()
        with self.lines_lock:
            self.reader_done = True
            self.lines_added.notify_all()

    def wait_listening(self, timeout=START_TIMEOUT):
        if not self.ready.wait(timeout) or len(self.ports) < self.listeners:
            rc = self.proc.poll()
            raise AssertionError(
                f"larder did not report 'proxy listening on 127.0.0.1:PORT' within {timeout}s "
                f"(exit code {rc}); command: {' '.join(self.cmd)}\nstderr:\n{self.log_text()[-4000:]}")

    @property
    def port(self):
        return self.ports[0]

    @property
    def admin_port(self):
        """The admin endpoint's port (it is logged just after the proxy's)."""
        deadline = time.monotonic() + START_TIMEOUT
        with self.lines_lock:
            while not self.admin_ports:
                left = deadline - time.monotonic()
                if left <= 0 or self.reader_done:
                    break
                self.lines_added.wait(left)
            if self.admin_ports:
                return self.admin_ports[0]
        raise AssertionError(f"larder did not report its admin endpoint\n{self.log_text()[-3000:]}")

    @property
    def proxy_url(self):
        return f"http://127.0.0.1:{self.port}"

    def log_text(self):
        with self.lines_lock:
            return "\n".join(self.lines)

    def wait_for_log(self, pattern, timeout=5):
        """The first match of ``pattern`` in the log, waiting up to ``timeout`` s for the reader
        thread to catch up with what the process has already written; None if it never appears."""
        began = time.monotonic()
        deadline = began + timeout
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        with self.lines_lock:
            while True:
                m = rx.search("\n".join(self.lines))
                left = deadline - time.monotonic()
                if m or left <= 0 or self.reader_done:
                    if not m and left <= 0:
                        note_expired(began, "wait_for_log")
                    return m
                self.lines_added.wait(left)

    def wait_for_text(self, text, timeout=5):
        """Waits for ``text`` (plain text, not a pattern) to appear in the log; fails if it does not."""
        if not self.wait_for_log(re.escape(text), timeout):
            raise AssertionError(f"no {text!r} in {self.name}'s log within {timeout} s:\n{self.log_text()[-3000:]}")

    def count_in_log(self, text):
        with self.lines_lock:
            return sum(line.count(text) for line in self.lines)

    def wait_for_count(self, text, n, timeout=5):
        """Waits until ``text`` has appeared ``n`` times in the log; returns the count reached."""
        began = time.monotonic()
        deadline = began + timeout
        with self.lines_lock:
            while True:
                got = sum(line.count(text) for line in self.lines)
                left = deadline - time.monotonic()
                if got >= n or left <= 0 or self.reader_done:
                    if got < n and left <= 0:
                        note_expired(began, "wait_for_count")
                    return got
                self.lines_added.wait(left)

    def wait_exit(self, timeout):
        rc = wait_process(self.proc, timeout)
        if rc is None:
            return None
        self.reader.join(5)
        self.returncode = rc
        self.stopped = True
        return rc

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM, wait up to ``timeout`` s, SIGKILL as a last resort. Returns the exit code."""
        if self.stopped:
            return self.returncode
        rc, killed = stop_process(self.proc, signal.SIGTERM, timeout)
        self.reader.join(5)
        self.stopped = True
        self.killed = killed
        self.returncode = rc
        return rc

    def rss_kib(self, field="VmRSS"):
        """Resident memory in KiB: VmRSS, or RssAnon (without file pages such as the cache's map)."""
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        return int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            return None
        return None


class RSSSampler:
    """Samples a process's VmRSS every ``interval`` seconds in a thread."""

    def __init__(self, larder, interval=0.05, field="VmRSS"):
        self.larder = larder
        self.interval = interval
        self.field = field
        self.peak_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            v = self.larder.rss_kib(self.field)
            if v is not None:
                self.samples += 1
                self.peak_kib = max(self.peak_kib, v)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(5)


# ---------------------------------------------------------------------------
# The report of fixed waits (LARDER_SLEEP_REPORT=1; conftest.py prints it at the end of the run)
#
# Every second the suite spends waiting for time rather than for an event is noted here, per test
# and per place in the code: time.sleep anywhere in the test process (conftest.py wraps it), pace(),
# the slow peers' pauses in origin.py (which it reports on its notes when started with
# --report-sleeps), quiet windows (a wait that must see nothing happen) and event waits that ran
# out their time limit (a wait for something that did not come is a fixed wait too).

SLEEP_REPORT = os.environ.get("LARDER_SLEEP_REPORT") == "1"
SLEEPS = {}  # test id -> {place: [seconds, count]}
SLEEP_SPANS = {}  # test id -> [(began, ended)] on time.monotonic(), for the time some wait was under way
_SLEEPS_LOCK = threading.Lock()
CURRENT_TEST = [None]


def caller_place():
    """``file:line`` of the nearest caller outside helpers.py and conftest.py (a test's line)."""
    f = sys._getframe(1)
    while f is not None and Path(f.f_code.co_filename).name in ("helpers.py", "conftest.py", "threading.py"):
        f = f.f_back
    if f is None:
        return "?"
    return f"{Path(f.f_code.co_filename).name}:{f.f_lineno}"


def note_sleep(seconds, place):
    """Counts ``seconds`` of fixed waiting at ``place`` for the test running now (report only)."""
    if not SLEEP_REPORT or seconds <= 0:
        return
    ended = time.monotonic()
    test = CURRENT_TEST[0] or "(between tests)"
    with _SLEEPS_LOCK:
        entry = SLEEPS.setdefault(test, {}).setdefault(place, [0.0, 0])
        entry[0] += seconds
        entry[1] += 1
        SLEEP_SPANS.setdefault(test, []).append((ended - seconds, ended))


def span_union(spans):
    """Seconds covered by at least one of the (began, ended) spans."""
    total, reach = 0.0, None
    for began, ended in sorted(spans):
        if reach is None or began > reach:
            total += ended - began
            reach = ended
        elif ended > reach:
            total += ended - reach
            reach = ended
    return total


def note_expired(began, what):
    """A wait for an event that ran out its time limit: counted as a fixed wait."""
    if SLEEP_REPORT:
        note_sleep(time.monotonic() - began, f"{what} ran out at {caller_place()}")


_NEVER = threading.Event()


def pace(seconds):
    """How a simulated slow peer (an origin sending a piece at a time, a client reading at a set
    rate or a byte a second) spaces what it does: a timed wait, the behaviour under test. Tests
    themselves never wait with it; they wait for events (and the few polls left use time.sleep)."""
    began = time.monotonic()
    _NEVER.wait(seconds)
    if SLEEP_REPORT:
        note_sleep(time.monotonic() - began, f"pace at {caller_place()}")


def wait_until(check, timeout=5.0, interval=0.01):
    """Polls ``check()`` until it is true or ``timeout`` passed; its last result. Only for state
    nothing announces (the time a poll sleeps is short, and counted like every sleep)."""
    began = time.monotonic()
    deadline = began + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            if not got:
                note_expired(began, "wait_until")
            return got
        time.sleep(interval)


# ---------------------------------------------------------------------------
# Waiting for files to change (inotify), not polling them


class FileWatch:
    """Wakes when files in ``directory`` are created, written, renamed or removed (inotify through
    libc): ``wait(timeout)`` returns True on a change, False when ``timeout`` passed without one."""

    IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = (
        0x2, 0x4, 0x8, 0x40, 0x80, 0x100, 0x200)

    def __init__(self, directory):
        self.fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        mask = (self.IN_MODIFY | self.IN_ATTRIB | self.IN_CLOSE_WRITE | self.IN_MOVED_FROM | self.IN_MOVED_TO
                | self.IN_CREATE | self.IN_DELETE)
        if _libc.inotify_add_watch(self.fd, str(directory).encode(), mask) < 0:
            err = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(err, f"inotify_add_watch {directory}")

    def wait(self, timeout, name=None):
        """True once a file (the one called ``name``, when given) changed; False after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return False
            names = set()
            try:
                while True:
                    data = os.read(self.fd, 65536)
                    if not data:
                        break
                    i = 0
                    while i + 16 <= len(data):  # struct inotify_event: wd, mask, cookie, len, name
                        _, _, _, n = struct.unpack_from("iIII", data, i)
                        names.add(data[i + 16:i + 16 + n].rstrip(b"\0").decode(errors="replace"))
                        i += 16 + n
            except BlockingIOError:
                pass
            if name is None or name in names:
                return True

    def close(self):
        os.close(self.fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def wait_for_file(path, check, timeout=5.0):
    """Calls ``check()`` until it returns something true, again each time the file ``path`` changes
    (is created, written, renamed or removed; for a directory, any file in it), for up to
    ``timeout`` s; returns its last result."""
    began = time.monotonic()
    deadline = began + timeout
    directory = Path(path).is_dir()
    with FileWatch(Path(path) if directory else Path(path).parent) as watch:
        while True:
            got = check()
            left = deadline - time.monotonic()
            if got or left <= 0:
                if not got:
                    note_expired(began, "wait_for_file")
                return got
            watch.wait(left, None if directory else Path(path).name)


# ---------------------------------------------------------------------------
# The test clock


class TestClock:
    """Moves a Larder's clock forward without waiting: for tests of what happens once time passes
    (entries going stale, rate limits, ages).

    ``LARDER_TEST_CLOCK_FILE=<path>`` in a Larder's environment, read once at its start-up, makes its
    one clock (``ProxyClock``: every date, age, duration and deadline it computes) the system's plus
    an offset read from that file: its first 8 bytes, a little-endian signed count of nanoseconds,
    mapped shared by the binary, so ``advance`` is seen by the proxy's next read of the time, with
    no signal and no restart. The binary logs a loud warning when the variable is set; unset, it
    reads the system clock directly and the file is never opened. The offset only grows (the
    proxy's monotonic clock must never go back). libevent timers still fire after real time: a
    timeout is not brought forward, but a deadline checked after the move sees the time moved.

    The origin (origin.py) dates its scripted responses by the same file (``clock.offset`` next to
    its log, i.e. in the test's directory), so after a move the two agree on what "now" is.

        clock = TestClock(workdir)
        lr = larder_factory(env=clock.env)
        ...
        clock.advance(61)   # every response cached so far is 61 s older
    """

    __test__ = False  # not a test class for pytest

    def __init__(self, workdir):
        import mmap
        self.path = Path(workdir) / "clock.offset"
        self.path.write_bytes(b"\0" * 8)
        self._file = open(self.path, "r+b")
        self._map = mmap.mmap(self._file.fileno(), 8)
        # One aligned 8-byte store: the proxy never reads half of an update.
        self._offset = ctypes.c_int64.from_buffer(self._map)
        self.offset = 0.0

    @property
    def env(self):
        """The environment that gives a Larder this clock (``larder_factory(env=clock.env)``)."""
        return {"LARDER_TEST_CLOCK_FILE": str(self.path)}

    def advance(self, seconds):
        """Moves the clock ``seconds`` forward, at once, for every process started with it."""
        assert seconds >= 0, "the test clock only moves forward"
        self.offset += seconds
        self._offset.value = round(self.offset * 1e9)

    def now(self):
        """Wall-clock seconds as the proxy sees them (for dates a test writes itself)."""
        return time.time() + self.offset


# ---------------------------------------------------------------------------
# Origin process


def started_line(proc, pattern, what):
    """The match of ``pattern`` in the first line a server process prints on stdout (read with a
    bounded wait); the process is killed and the test fails when it does not start."""
    got = []
    t = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(START_TIMEOUT)
    line = got[0].decode() if got else ""
    m = re.search(pattern, line)
    if not m:
        stop_process(proc, signal.SIGKILL, 5)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise AssertionError(f"{what} did not start: {line!r} {err}")
    return m


class OriginProcess:
    def __init__(self, workdir, name="origin"):
        self.log_path = Path(workdir) / f"{name}.jsonl"
        self.proc = spawn([sys.executable, HERE / "origin.py", "--port", "0", "--log", self.log_path, "--notify",
                           *(["--report-sleeps"] if SLEEP_REPORT else [])],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # origin.py --notify writes a line to stdout after each request it logs: waits wake on it.
        self.logged = 0
        self.ended = []  # (connection number, "done" or "peer-gone") as connections end
        self.logged_cond = threading.Condition()
        self.pid = self.proc.pid
        self.port = None
        m = started_line(self.proc, r"origin listening on 127\.0\.0\.1:(\d+) \(gates on 127\.0\.0\.1:(\d+)\)", "origin")
        self.port = int(m.group(1))
        self.gates_port = int(m.group(2))
        self.base = f"http://127.0.0.1:{self.port}"
        self.hostport = f"127.0.0.1:{self.port}"
        self._notes = threading.Thread(target=self._read_notes, daemon=True)
        self._notes.start()

    def _read_notes(self):
        for line in iter(self.proc.stdout.readline, b""):
            if line.startswith(b"slept "):
                _, seconds, where = line.decode().split()
                note_sleep(float(seconds), f"pace at {where}")
                continue
            with self.logged_cond:
                if line.startswith(b"ended "):
                    _, conn, how = line.decode().split()
                    self.ended.append((int(conn), how))
                else:
                    self.logged += 1
                self.logged_cond.notify_all()
        with self.logged_cond:
            self.logged = float("inf")  # the origin is gone: nothing more will come
            self.logged_cond.notify_all()

    def url(self, path):
        return self.base + path

    def open_gate(self, name, passes=None, shut=False):
        """Opens the origin's gate ``name`` (for the next ``passes`` requests only, when given; with
        ``shut``, shuts it): requests with ``hold=NAME``, and scripted resources with
        ``"pause_until": NAME`` or ``"hold_at"``, wait at it (see origin.py's Gates)."""
        how = "shut" if shut else "open" if passes is None else str(int(passes))
        with socket.create_connection((LOCALHOST, self.gates_port), timeout=10) as s:
            s.settimeout(10)
            s.sendall(f"{name} {how}\n".encode())
            answer = SockReader(s).read_line()
            assert answer == b"ok\n", answer

    def requests(self):
        try:
            text = self.log_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.split("\n"):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line being written right now
        return out

    def wait_ended(self, n, timeout=10.0):
        """How the origin's connections ended, once ``n`` have (or ``timeout`` passed): a list of
        (connection number, "done" or "peer-gone"), in the order they ended."""
        began = time.monotonic()
        with self.logged_cond:
            if not self.logged_cond.wait_for(lambda: len(self.ended) >= n, timeout):
                note_expired(began, "wait_ended")
            return list(self.ended)

    def wait_requests(self, n, timeout=5.0):
        """The requests logged once there are ``n`` (or ``timeout`` passed): woken by the origin's
        note after each request it logs."""
        began = time.monotonic()
        deadline = began + timeout
        with self.logged_cond:
            while self.logged < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    note_expired(began, "wait_requests")
                    break
                self.logged_cond.wait(left)
        return self.requests()

    def stop(self):
        rc, _ = stop_process(self.proc, signal.SIGTERM, 5)
        return rc


class FTPOriginProcess:
    """ftp_origin.py (pyftpdlib) serving ``root`` on a port picked at start; ``commands()`` are the
    command lines it received, waited for with ``wait_for``."""

    def __init__(self, workdir, root, name="ftp", options=()):
        self.root = Path(root)
        self.log_path = Path(workdir) / f"{name}.jsonl"
        self.proc = spawn([sys.executable, HERE / "ftp_origin.py", "--root", self.root, "--log", self.log_path,
                           *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        self.logged = 0
        self.cond = threading.Condition()
        self.port = int(started_line(self.proc, r"ftp origin listening on 127\.0\.0\.1:(\d+)", "ftp origin").group(1))
        threading.Thread(target=self._read_notes, daemon=True).start()

    def _read_notes(self):
        for _ in iter(self.proc.stdout.readline, b""):
            with self.cond:
                self.logged += 1
                self.cond.notify_all()
        with self.cond:
            self.logged = float("inf")
            self.cond.notify_all()

    def url(self, path, userinfo=""):
        return f"ftp://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}{path}"

    def commands(self):
        """(session, command, argument) of each command received so far."""
        if not self.log_path.exists():
            return []
        out = []
        for line in self.log_path.read_text().splitlines():
            r = json.loads(line)
            out.append((r["session"], r["command"], r["argument"]))
        return out

    def wait_for(self, predicate, timeout=10.0):
        """Waits until ``predicate(commands)`` holds (woken by each command logged); the commands."""
        deadline = time.monotonic() + timeout
        while True:
            with self.cond:
                seen = self.logged
            got = self.commands()
            left = deadline - time.monotonic()
            if predicate(got) or left <= 0:
                return got
            with self.cond:
                self.cond.wait_for(lambda: self.logged > seen, left)

    def stop(self):
        rc, _ = stop_process(self.proc, signal.SIGTERM, 5)
        return rc


def headers_named(headers, name):
    return [v for n, v in headers if n.lower() == name.lower()]


# ---------------------------------------------------------------------------
# Raw HTTP over sockets


class SockReader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.eof = False

    def _fill(self):
        if self.eof:
            return False
        data = self.sock.recv(256 * 1024)
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def read_line(self, limit=1 << 20):
        while True:
            idx = self.buf.find(b"\n")
            if idx >= 0:
                line = bytes(self.buf[:idx + 1])
                del self.buf[:idx + 1]
                return line
            if len(self.buf) > limit:
                raise ValueError("line too long")
            if not self._fill():
                if self.buf:
                    raise EOFError(f"EOF inside a line: {bytes(self.buf[:200])!r}")
                raise EOFError("EOF before a line")

    def read_exact(self, n, sink=None):
        got = bytearray() if sink is None else None
        remaining = n
        while remaining > 0:
            if not self.buf and not self._fill():
                raise EOFError(f"EOF after {n - remaining} of {n} body bytes")
            take = min(remaining, len(self.buf))
            piece = bytes(self.buf[:take])
            del self.buf[:take]
            if sink is None:
                got += piece
            else:
                sink(piece)
            remaining -= take
        return bytes(got) if got is not None else b""

    def read_to_eof(self, sink=None):
        got = bytearray()
        while True:
            if self.buf:
                if sink is None:
                    got += self.buf
                else:
                    sink(bytes(self.buf))
                self.buf.clear()
            if not self._fill():
                return bytes(got)

    def read_some(self, n=65536):
        if self.buf:
            data = bytes(self.buf[:n])
            del self.buf[:n]
            return data
        if not self._fill():
            return b""
        return self.read_some(n)


class Response:
    def __init__(self, version, status, reason, headers):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = b""
        self.interim = []
        self.framing = None
        self.trailers = []

    def all(self, name):
        return headers_named(self.headers, name)

    def header(self, name):
        vals = self.all(name)
        return ", ".join(vals) if vals else None

    def names(self):
        return [n.lower() for n, _ in self.headers]

    def __repr__(self):
        return f"<Response {self.status} {self.reason!r} {self.headers!r} body={self.body[:200]!r}>"


def _read_head(reader):
    line = reader.read_line()
    while line in (b"\r\n", b"\n"):
        line = reader.read_line()
    status_line = line.rstrip(b"\r\n").decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ValueError(f"bad status line {status_line!r}")
    version, code = parts[0], int(parts[1])
    reason = parts[2] if len(parts) > 2 else ""
    headers = []
    while True:
        line = reader.read_line()
        if line in (b"\r\n", b"\n"):
            break
        text = line.rstrip(b"\r\n").decode("latin-1")
        name, sep, value = text.partition(":")
        if not sep:
            raise ValueError(f"bad header line {text!r}")
        headers.append((name, value.strip(" \t")))
    return Response(version, code, reason, headers)


def read_response(reader, method="GET", sink=None):
    """Read one final response (collecting 1xx interim ones except 101)."""
    interim = []
    while True:
        resp = _read_head(reader)
        if 100 <= resp.status < 200 and resp.status != 101:
            interim.append(resp)
            continue
        break
    resp.interim = interim
    te = resp.header("Transfer-Encoding")
    cl = resp.all("Content-Length")
    if method == "HEAD" or resp.status in (101, 204, 304) or \
            (method == "CONNECT" and 200 <= resp.status < 300):
        resp.framing = "none"
        return resp
    body = bytearray() if sink is None else None

    def add(piece):
        if sink is None:
            body.extend(piece)
        else:
            sink(piece)

    if te is not None:
        if te.split(",")[-1].strip().lower() != "chunked":
            raise ValueError(f"response with transfer-encoding {te!r}")
        resp.framing = "chunked"
        while True:
            size_line = reader.read_line().rstrip(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:
                    t = reader.read_line()
                    if t in (b"\r\n", b"\n"):
                        break
                    n, _, v = t.rstrip(b"\r\n").decode("latin-1").partition(":")
                    resp.trailers.append((n, v.strip()))
                break
            reader.read_exact(size, add)
            crlf = reader.read_line()
            if crlf not in (b"\r\n", b"\n"):
                raise ValueError(f"missing CRLF after chunk: {crlf[:50]!r}")
    elif cl:
        if len(set(v.strip() for v in cl)) != 1:
            raise ValueError(f"conflicting Content-Length {cl}")
        resp.framing = "length"
        reader.read_exact(int(cl[0]), add)
    else:
        resp.framing = "close"
        data = reader.read_to_eof(None if sink is None else add)
        if sink is None:
            body.extend(data)
    resp.body = bytes(body) if body is not None else b""
    return resp


def build_request(method, target, headers=(), body=b"", version="HTTP/1.1"):
    lines = [f"{method} {target} {version}"]
    for n, v in headers:
        lines.append(f"{n}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def std_request(method, url, headers=(), body=b"", version="HTTP/1.1"):
    """Absolute-form request with Host and (if a body) Content-Length added."""
    headers = list(headers)
    names = {n.lower() for n, _ in headers}
    if "host" not in names:
        m = re.match(r"[a-z]+://([^/]+)", url)
        if m:
            headers.insert(0, ("Host", m.group(1)))
    if body and "content-length" not in names and "transfer-encoding" not in names:
        headers.append(("Content-Length", str(len(body))))
    return build_request(method, url, headers, body, version)


def connect(port, timeout=10.0):
    s = socket.create_connection((LOCALHOST, port), timeout=timeout)
    s.settimeout(timeout)
    return s


class RawClient:
    """A raw TCP client connection with a response reader."""

    def __init__(self, port, timeout=10.0):
        self.sock = connect(port, timeout)
        self.reader = SockReader(self.sock)

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method, url, headers=(), body=b"", version="HTTP/1.1"):
        self.sock.sendall(std_request(method, url, headers, body, version))
        return read_response(self.reader, method)

    def response(self, method="GET", sink=None):
        return read_response(self.reader, method, sink)

    def closed_by_peer(self, timeout=5.0):
        """True if the peer closes (EOF or reset) within ``timeout`` with no more data."""
        if self.reader.buf:
            return False
        old = self.sock.gettimeout()
        self.sock.settimeout(timeout)
        began = time.monotonic()
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            note_expired(began, "closed_by_peer")
            return False
        finally:
            try:
                self.sock.settimeout(old)
            except OSError:
                pass
        if data:
            self.reader.buf += data
            return False
        return True

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def in_background(fn):
    """Starts fn() on a thread; returns a function that waits for it (up to ``timeout`` s) and gives
    its result, or raises what it raised."""
    out = []

    def run():
        try:
            out.append((True, fn()))
        except BaseException as e:  # handed to the waiter
            out.append((False, e))

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def result(timeout=30):
        t.join(timeout)
        assert out, f"still running after {timeout} s"
        ok, value = out[0]
        if not ok:
            raise value
        return value

    return result


def concurrently(n, fn):
    """Runs fn(i) on n threads started together; returns the results in order."""
    results = [None] * n
    errors = []
    gate = threading.Barrier(n)

    def run(i):
        try:
            gate.wait(10)
            results[i] = fn(i)
        except Exception as e:  # reported below, with the index
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    return results


def proxy_exchange(larder_port, method, url, headers=(), body=b"", timeout=10.0):
    """One request through the proxy on a new connection."""
    with RawClient(larder_port, timeout) as c:
        return c.request(method, url, headers, body)


# ---------------------------------------------------------------------------
# curl


def curl(*args, timeout=60):
    cmd = ["curl", "-sS", "--max-time", str(int(timeout))] + [str(a) for a in args]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
                          stdin=subprocess.DEVNULL, timeout=timeout + 10)


# ---------------------------------------------------------------------------
# Small servers running as threads in the test process


def free_port(dual_stack=False):
    """A port nothing listens on now (another process may still take it before it is used).
    ``dual_stack``: free on every IPv4 and IPv6 address, for a wildcard listener."""
    if dual_stack:
        s = socket.socket(socket.AF_INET6)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", 0))
    else:
        s = socket.socket()
        s.bind((LOCALHOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class _ThreadedServer:
    def __init__(self):
        self.srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind((LOCALHOST, 0))
        self.srv.listen(64)
        self.srv.settimeout(0.2)
        self.port = self.srv.getsockname()[1]
        self.connections = 0
        self.events = []
        self._stop = threading.Event()
        self._threads = []
        self._socks = []
        self._t = threading.Thread(target=self._accept_loop, daemon=True)
        self._t.start()

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                sock, peer = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            self._socks.append(sock)
            sock.settimeout(15)
            t = threading.Thread(target=self._guard, args=(sock, peer), daemon=True)
            t.start()
            self._threads.append(t)

    def _guard(self, sock, peer):
        try:
            self.handle(sock, peer)
        except (OSError, ssl.SSLError, ValueError) as e:
            self.events.append(f"error: {e!r}")
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def handle(self, sock, peer):
        raise NotImplementedError

    def wrapped(self, sock):
        """``sock`` in place of the accepted socket it wraps (a TLS socket takes over its
        descriptor): ``stop`` shuts it down like the others."""
        self._socks.append(sock)
        return sock

    def stop(self):
        self._stop.set()
        try:
            self.srv.close()
        except OSError:
            pass
        self._t.join(2)
        # Connections a client keeps open (Larder's idle pooled ones) would hold their handler in
        # recv until its timeout: shut down, they end at once.
        for s in self._socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:
            t.join(2)


class EchoServer(_ThreadedServer):
    """Echoes bytes as they arrive; at EOF sends ``[eof after N bytes]`` and closes."""

    def handle(self, sock, peer):
        total = 0
        while True:
            data = sock.recv(65536)
            if not data:
                break
            total += len(data)
            sock.sendall(data)
        self.events.append(f"eof after {total}")
        sock.sendall(f"[eof after {total} bytes]".encode())
        sock.shutdown(socket.SHUT_WR)


class TLSServer(_ThreadedServer):
    """HTTPS server: answers one request per connection with ``hello over tls <path>``."""

    def __init__(self, certfile, keyfile):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certfile, keyfile)
        super().__init__()

    def handle(self, sock, peer):
        tls = self.wrapped(self.ctx.wrap_socket(sock, server_side=True))
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = tls.recv(65536)
            if not data:
                return
            buf += data
        line = buf.split(b"\r\n", 1)[0].decode("latin-1")
        path = line.split(" ")[1] if " " in line else "?"
        body = f"hello over tls {path}\n".encode()
        tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n\r\n" % len(body) + body)
        self.events.append(f"served {path}")
        try:
            tls.unwrap()
        except (OSError, ssl.SSLError):
            pass


def make_self_signed_cert(directory):
    directory = Path(directory)
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    return str(cert), str(key)


class FakeDNS:
    """UDP DNS server on 127.0.0.1: A records for the names in ``records`` (name -> IPv4 address),
    no data for their other types, NXDOMAIN for every other name.

    ``ttl``: the TTL of its A records, ``ttls`` (name -> seconds) for some names apart.
    ``silent``: a regular expression; names it matches are never answered (a dead domain).
    ``slow``: a regular expression; names it matches are answered after ``slow_delay`` seconds.
    ``records6`` (name -> IPv6 address): AAAA records; ``slow6``: names whose AAAA answer comes late.
    ``soa_minimum``: when set, negative answers (NXDOMAIN, no data) carry an SOA record with this
    minimum and TTL, as real servers' do; without it they carry none.
    Every query is counted: ``asked(name)`` says how often, ``wait_asked(name, n)`` waits for it."""

    def __init__(self, records=None, ttl=60, ttls=None, silent=None, soa_minimum=None, slow=None, slow_delay=1.0,
                 records6=None, slow6=None):
        self.records = {k.lower(): v for k, v in (records or {}).items()}
        self.records6 = {k.lower(): v for k, v in (records6 or {}).items()}
        self.slow6 = re.compile(slow6, re.I) if slow6 else None
        self.ttl = ttl
        self.ttls = {k.lower(): v for k, v in (ttls or {}).items()}
        self.silent = re.compile(silent, re.I) if silent else None
        self.soa_minimum = soa_minimum
        self.slow = re.compile(slow, re.I) if slow else None
        self.slow_delay = slow_delay
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((LOCALHOST, 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.queries = []
        self._asked = threading.Condition()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    @staticmethod
    def _qname(msg):
        labels, i = [], 12
        while i < len(msg) and msg[i] != 0:
            ln = msg[i]
            labels.append(msg[i + 1:i + 1 + ln].decode("latin-1"))
            i += 1 + ln
        qtype = struct.unpack("!H", msg[i + 1:i + 3])[0] if i + 3 <= len(msg) else 0
        return ".".join(labels), i + 5, qtype

    def asked(self, name, qtype=1):
        """How many queries of ``qtype`` (1: A, 28: AAAA, None: any) came for ``name``."""
        name = name.lower()
        with self._asked:
            return sum(1 for n, t in self.queries if n.lower() == name and (qtype is None or t == qtype))

    def asked_matching(self, pattern, qtype=1):
        rx = re.compile(pattern, re.I)
        with self._asked:
            return sum(1 for n, t in self.queries if rx.fullmatch(n) and (qtype is None or t == qtype))

    def wait_asked(self, name, n, timeout=10, qtype=1):
        """Waits until ``name`` was asked ``n`` times; returns the count reached."""
        began = time.monotonic()
        deadline = began + timeout
        with self._asked:
            while True:
                got = sum(1 for q, t in self.queries if q.lower() == name.lower() and (qtype is None or t == qtype))
                left = deadline - time.monotonic()
                if got >= n or left <= 0:
                    if got < n:
                        note_expired(began, "wait_asked")
                    return got
                self._asked.wait(left)

    def _soa(self):
        # example.: mname and rname as the root, then serial, refresh, retry, expire, minimum.
        rdata = b"\x00\x00" + struct.pack("!IIIII", 1, 3600, 600, 86400, self.soa_minimum)
        return b"\x00" + struct.pack("!HHIH", 6, 1, self.soa_minimum, len(rdata)) + rdata

    def _run(self):
        while not self._stop.is_set():
            try:
                msg, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            if len(msg) < 12:
                continue
            qid, flags, qd = struct.unpack("!HHH", msg[:6])
            name, qend, qtype = self._qname(msg)
            with self._asked:
                self.queries.append((name, qtype))
                self._asked.notify_all()
            if self.silent and self.silent.fullmatch(name):
                continue
            address = self.records.get(name.lower()) or self.records6.get(name.lower())
            answers = b""
            ttl = self.ttls.get(name.lower(), self.ttl)
            if qtype == 1 and self.records.get(name.lower()):
                answers = struct.pack("!HHHIH", 0xC00C, 1, 1, ttl, 4) + socket.inet_aton(self.records[name.lower()])
            if qtype == 28 and self.records6.get(name.lower()):
                answers = struct.pack("!HHHIH", 0xC00C, 28, 1, ttl, 16) + socket.inet_pton(
                    socket.AF_INET6, self.records6[name.lower()])
            authority = self._soa() if not answers and self.soa_minimum is not None else b""
            rcode = 0 if address else 3  # NOERROR, NXDOMAIN
            rflags = 0x8000 | (flags & 0x7900) | 0x0080 | rcode  # QR, opcode+RD, RA
            reply = struct.pack("!HHHHHH", qid, rflags, 1 if qd else 0, 1 if answers else 0,
                                1 if authority else 0, 0)
            if qd:
                reply += msg[12:qend] + answers + authority
            if (self.slow and self.slow.fullmatch(name)) or (qtype == 28 and self.slow6 and self.slow6.fullmatch(name)):
                t = threading.Timer(self.slow_delay, self._send, (reply, peer))
                t.daemon = True
                t.start()
            else:
                self._send(reply, peer)

    def _send(self, reply, peer):
        try:
            self.sock.sendto(reply, peer)
        except OSError:
            pass

    def stop(self):
        self._stop.set()
        self._t.join(2)
        self.sock.close()


@contextlib.contextmanager
def mounted_tmpfs(directory, size):
    """A tmpfs of `size` (e.g. "12m") mounted on `directory` for the block (root only; the test is
    skipped otherwise), unmounted after it."""
    import pytest
    directory.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.decode().strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def sha256(data):
    return hashlib.sha256(data).hexdigest()
