"""A real browser over HTTP/2: headless Chromium through Larder's HTTPS proxy listener (Chromium
negotiates h2 with an HTTPS proxy by ALPN and sends its http:// requests as streams), and in front
of a reverse-mode Larder over TLS. Each test loads a page with a stylesheet, two scripts (one of
300 KB, more than any initial flow-control window) and an image, checks in the rendered DOM that
every one of them arrived and was used, and loads it again as a second visitor (a new profile, so
nothing comes from Chromium's own cache): the origin sees each URL once, Larder's access log has
every request as HTTP/2.0, a miss on the first visit and a hit on the second, and its statistics
count the HTTP/2 connections and streams.

Chromium trusts the test CA for real, as a user's browser would: the CA is added to an NSS
database (certutil, from Debian's libnss3-tools) in a temporary HOME, where Chromium on Linux reads
the user's trusted roots; no switch that ignores certificate errors. A first load without that
database shows the trust is what makes it work: Chromium refuses Larder's certificate and the
origin sees nothing.

Only 127.0.0.1 is contacted. Chromium's own background requests (component updates, sign-in,
network time) are switched off where a switch exists; those that remain reach Larder as proxied
requests, and Larder resolves names with a fake DNS server on 127.0.0.1 that knows none, and may
reach no network but the loopback one. Without a proxy, Chromium's resolver maps every name but
localhost (mapped to 127.0.0.1) to "not found".

Every wait is for an event: Chromium's exit (--dump-dom prints the DOM once the page's load
event has fired, and the load event waits for every stylesheet, script and image), access-log
lines (inotify), the cache's committed entries (the statistics).
"""

import json
import os
import select
import shutil
import signal
import subprocess

import pytest

from helpers import child_env, spawn, wait_for_file, wait_process
from test_admin import wait_stats
from test_cache import script
from tls_pki import PKI

ADMIN = {"admin_listen": "127.0.0.1:0"}
# Every network but the loopback one (127.0.0.0/8), IPv4 and IPv6: nothing Larder is asked for by
# the browser's background requests may leave the machine.
NOT_LOOPBACK = ["0.0.0.0/2", "64.0.0.0/3", "96.0.0.0/4", "112.0.0.0/5", "120.0.0.0/6", "124.0.0.0/7",
                "126.0.0.0/8", "128.0.0.0/1", "::/0"]
CHROMIUM_LIMIT = 120  # seconds one Chromium run may take (a loaded 2-core machine needs a few)
BIG_SCRIPT = 300_000  # bytes of the large script: more than a stream's initial window (64 KiB)
BIG_STRING = BIG_SCRIPT - len("window.big = '';\n")  # the length of the string it defines
LOG_WAIT = 30  # seconds for access-log lines (workers hand them over about once a second)


def needed(command, missing):
    path = shutil.which(command)
    if not path:
        pytest.skip(missing)
    return path


@pytest.fixture
def tools():
    """Chromium and certutil, or the test is skipped saying which is missing."""
    return {"chromium": needed("chromium", "headless Chromium is not installed "
                                           "(Debian package chromium; scripts/install-deps.sh installs it)"),
            "certutil": needed("certutil", "certutil, which puts the test CA in Chromium's trust store, is missing "
                                           "(Debian package libnss3-tools; scripts/install-deps.sh installs it)")}


def run_until_exit(args, limit, **kw):
    """Runs ``args`` in a session of its own and waits up to ``limit`` s for it to exit; then
    kills what is left of its process group (helpers outliving it; everything, when it did not
    exit in time) while the exited leader still holds the group's number, and reaps it. Its exit
    code, or None when it had to be killed."""
    proc = spawn(args, start_new_session=True, **kw)
    exited = False
    try:
        try:
            fd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # no pidfd (an old kernel): a wait that reaps it
            exited = wait_process(proc, limit) is not None
        else:
            try:
                exited = bool(select.select([fd], [], [], limit)[0])
            finally:
                os.close(fd)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        rc = wait_process(proc, 10)
    return rc if exited else None


class Browser:
    """Headless Chromium with a HOME of its own whose NSS database trusts ``ca`` (none: trusts
    nothing but the system's roots); every ``load`` is a new visitor (a new --user-data-dir)."""

    def __init__(self, tools, directory, ca=None):
        self.binary = tools["chromium"]
        self.dir = directory
        self.home = directory / "home"
        self.home.mkdir(parents=True)
        self.loads = 0
        if ca is not None:
            nssdb = self.home / ".pki" / "nssdb"
            nssdb.mkdir(parents=True)
            for args in (["-N", "--empty-password"], ["-A", "-n", "Larder test CA", "-t", "C,,", "-i", str(ca)]):
                r = subprocess.run([tools["certutil"], "-d", f"sql:{nssdb}", *args], capture_output=True, timeout=60)
                assert r.returncode == 0, (args, r.stdout, r.stderr)

    def load(self, url, proxy=None):
        """The DOM of ``url`` once its load event has fired, and Chromium's standard error."""
        self.loads += 1
        profile = self.dir / f"profile-{self.loads}"
        args = [self.binary, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
                "--disable-breakpad", "--no-pings", "--disable-features=NetworkTimeServiceQuerying,MediaRouter"]
        if proxy:
            # <-loopback>: proxy 127.0.0.1 too (Chromium never proxies loopback addresses by default).
            args += [f"--proxy-server={proxy}", "--proxy-bypass-list=<-loopback>",
                     "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
        else:
            args += ["--no-proxy-server", "--host-resolver-rules=MAP localhost 127.0.0.1, MAP * ~NOTFOUND"]
        args += ["--dump-dom", url]
        env = {**child_env(), "HOME": str(self.home)}  # no proxy variables; the NSS database in HOME
        out, err = self.dir / f"load-{self.loads}.out", self.dir / f"load-{self.loads}.err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            rc = run_until_exit(args, CHROMIUM_LIMIT, env=env, stdout=stdout, stderr=stderr)
        assert rc is not None, f"Chromium did not finish {url} within {CHROMIUM_LIMIT} s"
        errors = err.read_text(errors="replace")
        assert rc == 0, f"Chromium exited with {rc}:\n{errors[-3000:]}"
        return out.read_text(errors="replace"), errors


@pytest.fixture
def pki(workdir):
    return PKI(workdir / "pki")


# ---------------------------------------------------------------------------
# The page: a stylesheet, a script in the head, an image, a large script; the DOM says what arrived


def make_page(workdir, name):
    """Scripted resources /res/NAME-{page,css,js,svg,big}, all cacheable; the page's relative URLs
    name the others. Returns their paths, the page's first."""
    cache = ("Cache-Control", "max-age=600")
    script(workdir, f"{name}-css", headers=[("Content-Type", "text/css"), cache],
           body="#box { color: rgb(1, 2, 3); }\n")
    script(workdir, f"{name}-js", headers=[("Content-Type", "text/javascript"), cache],
           body="window.headScript = 'head script ran';\n")
    script(workdir, f"{name}-svg", headers=[("Content-Type", "image/svg+xml"), cache],
           body='<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30">'
                '<rect width="40" height="30" fill="#4fb3ff"/></svg>')
    filler = ("0123456789abcdef" * (BIG_STRING // 16 + 1))[:BIG_STRING]
    big = f"window.big = '{filler}';\n"
    assert len(big) == BIG_SCRIPT
    script(workdir, f"{name}-big", headers=[("Content-Type", "text/javascript"), cache], body=big)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>larder h2 page</title>
<link rel="icon" href="data:,">
<script>
function mark(id, text) {{
  var p = document.createElement('p');
  p.id = id;
  p.textContent = text;
  document.body.appendChild(p);
}}
</script>
<link rel="stylesheet" href="/res/{name}-css">
<script src="/res/{name}-js"></script>
</head><body>
<div id="box">box</div>
<img id="logo" src="/res/{name}-svg" onload="mark('img', 'image ' + this.naturalWidth + 'x' + this.naturalHeight)">
<script src="/res/{name}-big"></script>
<script>
mark('js', window.headScript || 'head script missing');
mark('css', 'box color ' + getComputedStyle(document.getElementById('box')).color);
mark('big', 'big script ' + (window.big ? window.big.length + ' ' + window.big.slice(0, 4) : 'missing'));
</script>
</body></html>
"""
    script(workdir, f"{name}-page", headers=[("Content-Type", "text/html; charset=utf-8"), cache], body=page)
    return [f"/res/{name}-{part}" for part in ("page", "css", "js", "svg", "big")]


def check_rendered(dom):
    """Every subresource arrived and was used: the scripts ran, the style applies, the image
    decoded at its size."""
    assert '<p id="js">head script ran</p>' in dom, dom[-3000:]
    assert '<p id="css">box color rgb(1, 2, 3)</p>' in dom, dom[-3000:]
    assert '<p id="img">image 40x30</p>' in dom, dom[-3000:]
    assert f'<p id="big">big script {BIG_STRING} 0123</p>' in dom, dom[-3000:]


def page_records(log, paths, n):
    """The access log's records of ``paths`` (matched by the end of their url), once there are
    ``n`` of them."""
    def records():
        if not log.exists():
            return []
        out = []
        for line in log.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a line being written
            if any(r["url"].endswith(p) for p in paths):
                out.append(r)
        return out

    got = wait_for_file(log, lambda: len(records()) >= n and records(), timeout=LOG_WAIT) or records()
    assert len(got) == n, f"{len(got)} access-log records of the page, not {n}: {got}"
    return got


def check_visit(records, paths, cache, sizes):
    """One visit's access-log records: every path once, over HTTP/2, with ``cache`` and its size."""
    by_path = {}
    for r in records:
        path = next(p for p in paths if r["url"].endswith(p))
        assert path not in by_path, f"{path} asked for twice in one visit: {records}"
        by_path[path] = r
    assert sorted(by_path) == sorted(paths), records
    for path, r in by_path.items():
        assert r["version"] == "HTTP/2.0", r
        assert r["method"] == "GET" and r["status"] == 200, r
        assert r["cache"] == cache, r
        assert r["bytes"] == sizes[path], (r, sizes[path])
        assert "HeadlessChrome" in r["user_agent"], r


def resource_sizes(workdir, paths):
    return {p: len(json.loads((workdir / f"res-{p.rsplit('/', 1)[1]}.json").read_text())["body"].encode())
            for p in paths}


def visit_twice(lr, browser, origin, workdir, log, url, paths, proxy=None):
    """Loads ``url`` as two visitors; the first fills Larder's cache, the second is served from it."""
    sizes = resource_sizes(workdir, paths)
    dom, _ = browser.load(url, proxy)
    check_rendered(dom)
    assert sorted(q["path"] for q in origin.requests()) == sorted(paths), origin.requests()
    first = page_records(log, paths, len(paths))
    check_visit(first, paths, "miss", sizes)
    # Every entry committed before the second visitor comes.
    s = wait_stats(lr, lambda s: s["cache_entries"]["disk"] >= len(paths), timeout=30)
    assert s["cache_entries"]["disk"] >= len(paths), s["cache_entries"]

    dom, _ = browser.load(url, proxy)
    check_rendered(dom)
    # The origin saw nothing more: each URL once in all.
    assert sorted(q["path"] for q in origin.requests()) == sorted(paths), origin.requests()
    both = page_records(log, paths, 2 * len(paths))
    first_lines = {json.dumps(r, sort_keys=True) for r in first}
    check_visit([r for r in both if json.dumps(r, sort_keys=True) not in first_lines], paths, "hit", sizes)

    # At least a connection per visitor, a stream per request; none ended for an error.
    h2 = wait_stats(lr, lambda s: s["http2"]["connections"] >= 2 and s["http2"]["streams"] >= 2 * len(paths),
                    timeout=10)["http2"]
    assert h2["connections"] >= 2 and h2["streams"] >= 2 * len(paths), h2
    assert h2["connection_errors"] == 0, h2


# ---------------------------------------------------------------------------


@pytest.mark.timeout_s(400)
def test_chromium_through_the_https_proxy_speaks_h2_and_the_second_visit_is_served_from_the_cache(
        tools, larder_factory, origin, workdir, pki, fake_dns):
    cert, key = pki.leaf("proxy")  # for localhost and 127.0.0.1, signed by the test CA
    log = workdir / "access.jsonl"
    lr = larder_factory(config={**ADMIN, "access_log": str(log), "access_log_format": "json",
                                "deny_destinations": NOT_LOOPBACK,
                                "session": {"dns_servers": [f"127.0.0.1:{fake_dns.port}"]},
                                "tls": {"listen": ["127.0.0.1:0"], "certificate_file": cert, "key_file": key}},
                        listeners=2)
    proxy = f"https://127.0.0.1:{lr.ports[1]}"
    paths = make_page(workdir, "fwd")
    url = origin.url(paths[0])

    # Without the test CA in its trust store, Chromium refuses the proxy: nothing reaches the origin.
    untrusting = Browser(tools, workdir / "untrusting")
    dom, errors = untrusting.load(url, proxy)
    assert "larder h2 page" not in dom and "ERR_PROXY_CERTIFICATE_INVALID" in errors, (dom, errors[-2000:])
    assert origin.requests() == []

    browser = Browser(tools, workdir / "browser", ca=pki.ca)
    visit_twice(lr, browser, origin, workdir, log, url, paths, proxy)
    # Forward requests: each record names the origin's absolute URL.
    records = page_records(log, paths, 2 * len(paths))
    assert {r["url"] for r in records} == {origin.url(p) for p in paths}, records


@pytest.mark.timeout_s(400)
def test_chromium_in_front_of_a_reverse_mode_larder_over_tls_speaks_h2_and_revisits_hit_the_cache(
        tools, larder_factory, origin, workdir, pki):
    cert, key = pki.leaf("site")
    log = workdir / "access.jsonl"
    lr = larder_factory(config={**ADMIN, "reverse_origin": origin.base, "access_log": str(log),
                                "access_log_format": "json",
                                "tls": {"listen": ["127.0.0.1:0"], "certificate_file": cert, "key_file": key}},
                        listeners=2)
    paths = make_page(workdir, "rev")
    url = f"https://localhost:{lr.ports[1]}{paths[0]}"
    browser = Browser(tools, workdir / "browser", ca=pki.ca)
    visit_twice(lr, browser, origin, workdir, log, url, paths)
