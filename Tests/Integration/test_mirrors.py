"""Registry mirror endpoints (`mirrors`): a path on Larder's own listener stands for an upstream
registry that Larder reaches over verified TLS, so clients need no CA and no proxy setting.

The upstreams here are scripted https origins on 127.0.0.1 with certificates from a test CA that
only Larder trusts (`tls.ca_file`); the clients talk plain http to Larder's listener."""

import json
import threading
import time
from email.utils import formatdate

import pytest

from h2client import H2Client
from helpers import RawClient, _ThreadedServer, curl, wait_until
from test_admin import stats
from test_tls import PKI

import ssl


class ScriptedTLSOrigin(_ThreadedServer):
    """An https origin answering each path from ``routes``: path -> (status, [(name, value)], body) or
    a function of the request's headers returning one. Every request is kept (method, path, headers)."""

    def __init__(self, certfile, keyfile, routes=None):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certfile, keyfile)
        self.routes = routes or {}
        self.requests = []
        self.lock = threading.Lock()
        super().__init__()

    @property
    def base(self):
        return f"https://127.0.0.1:{self.port}"

    def paths(self):
        with self.lock:
            return [r["path"] for r in self.requests]

    def handle(self, sock, peer):
        tls = self.ctx.wrap_socket(sock, server_side=True)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = tls.recv(65536)
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            with self.lock:
                self.requests.append({"method": method, "path": path, "headers": headers})
            answer = self.routes.get(path.split("?")[0], (404, [("Content-Type", "text/plain")], b"not here\n"))
            if callable(answer):
                answer = answer(headers)
            status, fields, body = answer
            out = f"HTTP/1.1 {status} X\r\n".encode()
            for name, value in fields:
                out += f"{name}: {value}\r\n".encode()
            out += f"Content-Length: {len(body)}\r\n\r\n".encode()
            tls.sendall(out + (b"" if method == "HEAD" else body))


@pytest.fixture
def pki(workdir):
    return PKI(workdir / "pki")


@pytest.fixture
def origins():
    started = []

    def start(pki, routes=None):
        o = ScriptedTLSOrigin(*pki.leaf(f"origin{len(started)}"), routes=routes)
        started.append(o)
        return o

    yield start
    for o in started:
        o.stop()


def get(port, path, headers=(), method="GET"):
    """A request to Larder's own listener, as a client of the mirror (no proxy) sends it."""
    named = any(name.lower() == "host" for name, _ in headers)
    with RawClient(port, timeout=20) as c:
        return c.request(method, path, headers=[*([] if named else [("Host", f"127.0.0.1:{port}")]), *headers])


SIMPLE_HTML = """<!DOCTYPE html><html><body>
<a href="{files}/packages/aa/six-1.0-py3-none-any.whl#sha256=00ff" data-requires-python="&gt;=3.8">six-1.0-py3-none-any.whl</a>
<a href="{files}.evil/packages/x.whl">not the files host</a>
<p>see {files}/about for more</p>
</body></html>
"""


def pypi_like(pki, origins, larder_factory, extra=None, intercept=False, **config):
    files = origins(pki, {"/packages/aa/six-1.0-py3-none-any.whl":
                          (200, [("Content-Type", "application/zip"), ("Cache-Control", "max-age=86400")], b"WHEEL" * 100)})
    index = origins(pki)
    index.routes["/simple/six/"] = (200, [("Content-Type", "text/html"), ("Cache-Control", "max-age=600"),
                                         ("ETag", '"upstream-1"'), ("Last-Modified", formatdate(usegmt=True))],
                                    SIMPLE_HTML.format(files=files.base).encode())
    mirror = {"name": "pypi", "upstream": index.base + "/", "also": {"files": files.base + "/"}}
    mirror.update(extra or {})
    log = config.pop("log", None)
    cfg = {"workers": 1, "tls": {"ca_file": str(pki.ca)}, "mirrors": [mirror], **config}
    if intercept:  # CONNECTs to the files host are decrypted and cached
        cfg.update({"connect_ports": [files.port], "tls": {"ca_file": str(pki.ca), "intercept": ["127.0.0.1"]}})
    if log:
        cfg["access_log"] = str(log)
    lr = larder_factory(config=cfg)
    return lr, index, files


def test_a_mirror_serves_its_upstream_over_tls_and_rewrites_file_urls_onto_itself(larder_factory, pki, origins, workdir):
    log = workdir / "access.log"
    lr, index, files = pypi_like(pki, origins, larder_factory, log=log, admin_listen="127.0.0.1:0")
    page = get(lr.port, "/pypi/simple/six/")
    assert page.status == 200, page.body
    mine = f"http://127.0.0.1:{lr.port}/pypi/files"
    text = page.body.decode()
    # The file's URL now names the mirror; a look-alike host and the page's text are left alone.
    assert f'href="{mine}/packages/aa/six-1.0-py3-none-any.whl#sha256=00ff"' in text
    assert f'href="{files.base}.evil/packages/x.whl"' in text
    assert page.header("content-length") == str(len(page.body))
    # The mirror's own validator, not the upstream's (which names other bytes).
    assert page.header("etag") and page.header("etag") != '"upstream-1"'
    assert page.header("last-modified") is None

    wheel = get(lr.port, "/pypi/files/packages/aa/six-1.0-py3-none-any.whl")
    assert wheel.status == 200 and wheel.body == b"WHEEL" * 100
    # Upstream saw the upstream URLs, and the Host of the upstream, never the client's.
    assert index.paths() == ["/simple/six/"] and files.paths() == ["/packages/aa/six-1.0-py3-none-any.whl"]
    assert index.requests[0]["headers"]["host"] == f"127.0.0.1:{index.port}"
    # The request for the document asked for it uncompressed (it is rewritten).
    assert "accept-encoding" not in index.requests[0]["headers"]

    # Twice: from the cache, the upstreams see nothing more.
    again = get(lr.port, "/pypi/simple/six/", headers=[("Accept-Encoding", "gzip")])
    assert again.status == 200 and again.body == page.body and again.header("etag") == page.header("etag")
    assert "hit" in (again.header("cache-status") or "")
    assert get(lr.port, "/pypi/files/packages/aa/six-1.0-py3-none-any.whl").body == b"WHEEL" * 100
    assert index.paths() == ["/simple/six/"] and files.paths() == ["/packages/aa/six-1.0-py3-none-any.whl"]

    # The client's validator is the mirror's: 304 without a body.
    cond = get(lr.port, "/pypi/simple/six/", headers=[("If-None-Match", page.header("etag"))])
    assert cond.status == 304 and cond.body == b"" and cond.header("etag") == page.header("etag")

    # The access log names the upstream URL fetched.
    wait_until(lambda: log.exists() and f"GET {index.base}/simple/six/" in log.read_text(), timeout=10)
    # The start log and /stats name the mirror, and the preset it turned on.
    lr.wait_for_text(f"cache presets in force: pypi; mirrors: pypi /pypi/ → {index.base}/ (files/ → {files.base}/)")
    listed = stats(lr)
    assert listed["presets"] == ["pypi"]
    assert listed["mirrors"] == [{"name": "pypi", "kind": "pypi", "path": "/pypi/", "upstream": index.base + "/",
                                  "also": {"files/": files.base + "/"}, "min_release_age": None}]


def test_each_client_gets_urls_for_the_host_it_named_and_no_other(larder_factory, pki, origins):
    """A client's Host only ever reaches that client: the stored document is the upstream's."""
    lr, index, files = pypi_like(pki, origins, larder_factory)
    evil = get(lr.port, "/pypi/simple/six/", headers=[("Host", "evil.example")])
    assert evil.status == 200 and "http://evil.example/pypi/files/" in evil.body.decode()
    honest = get(lr.port, "/pypi/simple/six/")
    assert honest.status == 200 and "evil.example" not in honest.body.decode()
    assert f"http://127.0.0.1:{lr.port}/pypi/files/" in honest.body.decode()
    assert index.paths() == ["/simple/six/"]
    # A Host that is not a host is refused, not written into a page.
    bad = get(lr.port, "/pypi/simple/six/", headers=[("Host", "a b")])
    assert bad.status == 400


def test_redirects_are_mapped_back_onto_the_mirror(larder_factory, pki, origins):
    lr, index, files = pypi_like(pki, origins, larder_factory)
    index.routes["/simple/six"] = (301, [("Location", "/simple/six/")], b"")
    index.routes["/simple/old/"] = (302, [("Location", index.base + "/simple/new/")], b"moved")
    index.routes["/simple/away/"] = (302, [("Location", "https://elsewhere.example/x")], b"")
    relative = get(lr.port, "/pypi/simple/six")
    assert relative.status == 301 and relative.header("location") == f"http://127.0.0.1:{lr.port}/pypi/simple/six/"
    absolute = get(lr.port, "/pypi/simple/old/")
    assert absolute.status == 302 and absolute.header("location") == f"http://127.0.0.1:{lr.port}/pypi/simple/new/"
    assert absolute.body == b"" and absolute.header("content-length") == "0"
    other = get(lr.port, "/pypi/simple/away/")
    assert other.status == 302 and other.header("location") == "https://elsewhere.example/x"


@pytest.mark.parametrize("path", ["/pypi/../etc/passwd", "/pypi/%2e%2e/x", "/pypi/files/..%2f..%2fx",
                                  "/pypi/a%5c..%5cb", "/pypi/./simple/", "/pypi/..;/admin/", "/pypi/files/.;/x",
                                  "/pypi/%252e%252e/x", "/pypi/x%00y"])
def test_a_mirror_path_cannot_climb_out_of_its_upstream(larder_factory, pki, origins, path):
    lr, index, files = pypi_like(pki, origins, larder_factory)
    resp = get(lr.port, path)
    assert resp.status == 400, resp.body
    assert index.paths() == [] and files.paths() == []
    lr.wait_for_text("in a mirror path (pypi)", timeout=10)


def test_a_mirror_reaches_only_its_upstream_and_only_reads(larder_factory, pki, origins):
    lr, index, files = pypi_like(pki, origins, larder_factory)
    # What looks like another authority in the path stays a path on the upstream, or is refused.
    resp = get(lr.port, "/pypi/@evil.example/x")
    assert resp.status == 404, resp.body
    assert index.paths() == ["/@evil.example/x"]
    assert get(lr.port, "/pypi//evil.example/x").status == 400
    assert files.paths() == []
    # Writing through a mirror is refused; so is anything not under a mirror's path.
    post = get(lr.port, "/pypi/simple/six/", method="POST", headers=[("Content-Length", "0")])
    assert post.status == 405 and post.header("allow") == "GET, HEAD"
    assert get(lr.port, "/elsewhere/").status == 400
    assert len(index.paths()) == 1
    # A WebSocket upgrade would make the mirror a tunnel to anything on the upstream: it goes as a
    # plain request, and nothing one client sends shapes what the registry answers everyone.
    index.routes["/ws"] = (200, [("Content-Type", "text/plain")], b"plain\n")
    resp = get(lr.port, "/pypi/ws", headers=[("Connection", "Upgrade"), ("Upgrade", "websocket"),
                                           ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                                           ("Sec-WebSocket-Version", "13"), ("X-Forwarded-Host", "attacker.example"),
                                           ("Forwarded", "host=attacker.example"), ("X-Forwarded-Proto", "http")])
    assert resp.status == 200 and resp.body == b"plain\n"
    seen = index.requests[-1]["headers"]
    assert not {"upgrade", "x-forwarded-host", "forwarded", "x-forwarded-proto"} & set(seen), seen


def test_a_host_too_long_to_be_a_name_is_refused_not_written_into_every_link(larder_factory, pki, origins):
    lr, index, files = pypi_like(pki, origins, larder_factory)
    long_host = ".".join(["b" * 60] * 5)  # 304 bytes: no DNS name is that long
    resp = get(lr.port, "/pypi/simple/six/", headers=[("Host", long_host)])
    assert resp.status == 400 and b"255 bytes" in resp.body
    assert index.paths() == []


def test_one_stored_entry_per_upstream_url_through_the_mirror_or_the_proxy(larder_factory, pki, origins):
    """The mirror keys on the upstream URL: a forward-proxy client asking for that https URL hits
    it, in absolute form or through interception."""
    lr, index, files = pypi_like(pki, origins, larder_factory, intercept=True)
    path = "/packages/aa/six-1.0-py3-none-any.whl"
    assert get(lr.port, "/pypi/files" + path).status == 200
    with RawClient(lr.port, timeout=20) as c:
        resp = c.request("GET", files.base + path)
    assert resp.status == 200 and resp.body == b"WHEEL" * 100
    assert "hit" in (resp.header("cache-status") or "")
    r = curl("--proxy", f"http://127.0.0.1:{lr.port}", "--cacert", lr.ca_dir / "larder-ca.pem", "--http1.1",
             files.base + path, "-D", "-")
    assert r.returncode == 0, r.stderr
    assert b"Cache-Status: larder; hit" in r.stdout, r.stdout
    assert files.paths() == [path]


def test_a_document_the_upstream_compressed_anyway_is_refused_not_passed_with_upstream_urls(larder_factory, pki, origins):
    lr, index, files = pypi_like(pki, origins, larder_factory)
    index.routes["/simple/gz/"] = (200, [("Content-Type", "text/html"), ("Content-Encoding", "gzip")], b"\x1f\x8b....")
    resp = get(lr.port, "/pypi/simple/gz/")
    assert resp.status == 502 and b"Content-Encoding gzip" in resp.body


def test_a_mirror_serves_http2_clients_by_the_port_their_authority_names(larder_factory, pki, origins):
    """Over HTTP/2 a request is the mirror's when its :authority names Larder's own port and its
    path a mirror's (written in origin form for it); the same path naming another port is an
    ordinary forward request to that port, and never reaches the mirror's upstream."""
    lr, index, files = pypi_like(pki, origins, larder_factory)
    with H2Client(lr.port) as c:
        r = c.wait(c.request("GET", f"127.0.0.1:{lr.port}", "/pypi/files/packages/aa/six-1.0-py3-none-any.whl"))
        assert r.status == 200 and bytes(r.body) == b"WHEEL" * 100, r
        assert files.paths() == ["/packages/aa/six-1.0-py3-none-any.whl"]
        other = c.wait(c.request("GET", "127.0.0.1:9", "/pypi/files/packages/aa/six-1.0-py3-none-any.whl"))
        assert other.status in (502, 504), other
    assert files.paths() == ["/packages/aa/six-1.0-py3-none-any.whl"] and index.paths() == []
