"""Fixtures for Larder's integration tests.

* ``larder_factory(config=None, args=(), listeners=1, name="larder", wait=True)``
  starts the real binary with a per-test YAML config (deep-merged over a base
  config) and returns a ``helpers.Larder``; every instance still running at
  teardown is stopped with SIGTERM and must exit 0 within 15 s without SIGKILL.
* ``larder``: one instance with the base config.
* ``origin`` / ``origin_factory``: origin.py as a separate process.
* ``echo_server``, ``tls_server``, ``fake_dns``: small in-process servers.
* ``proxy_clock``: the test clock; the Larders of a test that asks for it run on it, and
  ``proxy_clock.advance(seconds)`` moves their time (and the origin's ``Date``) without waiting.

Per-test time limit: ``larder_test_timeout`` in pytest.ini (or
``@pytest.mark.timeout_s(N)``).  When it passes, a watchdog thread SIGKILLs the
processes the test started (which unblocks its sockets, all of which have
their own timeouts too) and the test is reported as failed; 30 s later, as a
last resort, faulthandler dumps all tracebacks and ends the run.

``LARDER_SLEEP_REPORT=1``: the run ends with the seconds spent in fixed waits (``time.sleep``
anywhere in the test process, ``pace``, the origins' paced pauses, quiet windows, waits for an
event that ran out their limit; see ``helpers.note_sleep``), in all, per test and per place: as
the time during which at least one such wait was under way, and as their sum over every thread
(waits that run side by side, such as many slow peers at once, count once in the first, each in
the second). The 30 longest of each; ``LARDER_SLEEP_REPORT_ALL=1`` lists them all.
"""

import faulthandler
import os
import signal
import threading
import time

import pytest

import helpers
from helpers import (CHILDREN, CHILDREN_LOCK, EchoServer, FakeDNS, Larder, OriginProcess, TestClock, TLSServer,
                     make_self_signed_cert)


def pytest_addoption(parser):
    parser.addini("larder_test_timeout", "per-test time limit in seconds", default="60")


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout_s(seconds): per-test time limit for this test")
    # A copy of the real stderr for the last-resort traceback dump.
    try:
        config._larder_stderr_fd = os.dup(2)
    except OSError:
        config._larder_stderr_fd = None
    if helpers.SLEEP_REPORT and not getattr(time.sleep, "_larder_counted", False):
        real_sleep = time.sleep

        def counted_sleep(seconds):
            began = time.monotonic()
            real_sleep(seconds)
            helpers.note_sleep(time.monotonic() - began, f"sleep at {helpers.caller_place()}")

        counted_sleep._larder_counted = True
        time.sleep = counted_sleep


def _test_limit(item):
    m = item.get_closest_marker("timeout_s")
    if m is not None:
        return float(m.args[0])
    return float(item.config.getini("larder_test_timeout"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    limit = _test_limit(item)
    fired = threading.Event()
    done = threading.Event()

    def watchdog():
        if done.wait(limit):
            return
        fired.set()
        with CHILDREN_LOCK:
            procs = list(CHILDREN)
        for p in procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    item._larder_timeout_fired = fired
    helpers.CURRENT_TEST[0] = item.nodeid
    t = threading.Thread(target=watchdog, daemon=True)
    t.start()
    fd = getattr(item.config, "_larder_stderr_fd", None)
    if fd is not None:
        faulthandler.dump_traceback_later(limit + 30, exit=True, file=fd)
    try:
        yield
    finally:
        done.set()
        faulthandler.cancel_dump_traceback_later()
        t.join(2)
        with CHILDREN_LOCK:
            leftovers = list(CHILDREN)
            CHILDREN.clear()
        for p in leftovers:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                    helpers.wait_process(p, 5)
                except (ProcessLookupError, Exception):
                    pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    fired = getattr(item, "_larder_timeout_fired", None)
    if rep.failed:
        for inst in getattr(item, "_larders", []):
            rep.sections.append((f"{inst.name} stderr (pid {inst.pid})", inst.log_text()[-6000:]))
    if fired is not None and fired.is_set() and call.when == "call":
        rep.outcome = "failed"
        msg = f"test exceeded its time limit of {_test_limit(item)} s (watchdog killed its processes)"
        rep.longrepr = msg + ("\n" + str(rep.longrepr) if rep.longrepr else "")


@pytest.fixture
def memory_bound():
    """For tests that bound Larder's resident memory: skipped against a sanitizer build
    (scripts/sanitize.sh sets SANITIZER_BUILD), whose shadow memory those bounds do not allow for."""
    sanitizer = os.environ.get("SANITIZER_BUILD")
    if sanitizer:
        pytest.skip(f"resident-memory bounds do not hold under the {sanitizer} sanitizer's shadow memory")


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


@pytest.fixture
def proxy_clock(tmp_path):
    """The test clock (``TestClock``): every Larder a test that asks for it starts runs on
    it (``LARDER_TEST_CLOCK_FILE``), and so does the origin's ``Date``; ``proxy_clock.advance(s)``
    lets ``s`` seconds pass for them at once, instead of sleeping."""
    return TestClock(tmp_path)


@pytest.fixture
def larder_factory(tmp_path, request):
    started = []
    request.node._larders = started
    clock = request.getfixturevalue("proxy_clock") if "proxy_clock" in request.fixturenames else None

    def start(config=None, args=(), listeners=1, name=None, wait=True, listen_flag=True, **more):
        if clock is not None:
            more.setdefault("clock", clock)
        nm = name or f"larder{len(started) + 1}"
        inst = Larder(tmp_path, config=config, args=args, listeners=listeners, name=nm,
                      wait=wait, listen_flag=listen_flag, **more)
        started.append(inst)
        return inst

    yield start

    problems = []
    for inst in reversed(started):  # clients of a parent proxy first
        if inst.stopped:
            continue
        if inst.proc.poll() is not None:
            problems.append(f"{inst.name} (pid {inst.pid}) had already exited with code "
                            f"{inst.proc.returncode} before teardown\n{inst.log_text()[-3000:]}")
            inst.stop()
            continue
        rc = inst.stop()
        if inst.killed:
            problems.append(f"{inst.name} (pid {inst.pid}) did not exit within 15 s of SIGTERM "
                            f"and was SIGKILLed\n{inst.log_text()[-3000:]}")
        elif rc != 0:
            problems.append(f"{inst.name} (pid {inst.pid}) exited with code {rc} after SIGTERM\n"
                            f"{inst.log_text()[-3000:]}")
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def larder(larder_factory):
    return larder_factory()


@pytest.fixture
def origin_factory(tmp_path):
    started = []

    def start(name=None):
        o = OriginProcess(tmp_path, name or f"origin{len(started) + 1}")
        started.append(o)
        return o

    yield start
    for o in started:
        o.stop()


@pytest.fixture
def origin(origin_factory):
    return origin_factory()


@pytest.fixture
def echo_server():
    s = EchoServer()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory):
    return make_self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_server(tls_cert):
    s = TLSServer(*tls_cert)
    s.cafile = tls_cert[0]
    yield s
    s.stop()


@pytest.fixture
def fake_dns():
    d = FakeDNS()
    yield d
    d.stop()


# ---------------------------------------------------------------------------
# Metrics printed at the end of the run (e.g. the streaming tests' peak RSS).

_METRICS = []


@pytest.fixture
def report_metric(request):
    def add(text):
        _METRICS.append(f"{request.node.nodeid}: {text}")
        print(text)
    return add


def pytest_terminal_summary(terminalreporter):
    if _METRICS:
        terminalreporter.write_sep("-", "larder metrics")
        for line in _METRICS:
            terminalreporter.write_line(line)
    if helpers.SLEEP_REPORT:
        _sleep_report(terminalreporter)


def _sleep_report(tr):
    top = None if os.environ.get("LARDER_SLEEP_REPORT_ALL") == "1" else 30
    with helpers._SLEEPS_LOCK:
        per_test = {t: {p: list(v) for p, v in places.items()} for t, places in helpers.SLEEPS.items()}
        spans = {t: list(s) for t, s in helpers.SLEEP_SPANS.items()}
    totals = sorted(((helpers.span_union(spans[t]), sum(v[0] for v in places.values()), t)
                     for t, places in per_test.items()), reverse=True)
    places = sorted(((v[0], v[1], p, t) for t, ps in per_test.items() for p, v in ps.items()), reverse=True)
    tr.write_sep("-", "fixed waits (LARDER_SLEEP_REPORT)")
    tr.write_line(f"in all: {sum(u for u, _, _ in totals):.2f} s with a fixed wait under way, "
                  f"{sum(s for _, s, _ in totals):.2f} s summed over threads; {len(totals)} tests, "
                  f"{sum(n for _, n, _, _ in places)} waits")
    tr.write_line("tests waiting longest (under way, summed):")
    for union, summed, t in totals[:top]:
        tr.write_line(f"  {union:7.2f} s {summed:7.2f} s  {t}")
    tr.write_line("places waiting longest (summed):")
    for seconds, n, place, t in places[:top]:
        tr.write_line(f"  {seconds:7.2f} s  {n:5d}x  {place}  ({t.split('::')[-1]})")
