"""Attacks on the admin endpoint, against the real binary over real sockets.

* Configuration that opens the endpoint without a token: an off-loopback ``--admin-listen`` on the
  command line (the one source that skipped the checks), a name that merely starts with ``127.``
  (``127.evil.example`` passed as loopback), and reloads (SIGHUP, POST /config/reload) that drop
  the token while the endpoint keeps listening off loopback.
* DNS rebinding: a page whose name resolves to 127.0.0.1 reads the endpoint as its own origin;
  its requests name the attacker's host in ``Host`` and must be refused (421), token or not.
* Cross-site requests: any web page can make a browser POST a form to 127.0.0.1 without a CORS
  preflight; state-changing requests with a foreign ``Origin``, a form content type or
  ``Sec-Fetch-Site: cross-site`` must be refused (403) and change nothing. One test drives a real
  headless Chromium through such an attack page.
* Secrets in logs: ``?token=`` (how the dashboard is opened in a browser) must never reach the log.
"""

import http.server
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest

from helpers import build_request, proxy_exchange, read_response, SockReader
from test_cache import script
from test_dashboard import chromium
from test_reload import rewrite, wait_log

ADMIN = {"admin_listen": "127.0.0.1:0"}
TOKEN = "adm1n-s3cret-t0ken"  # 18 characters: off loopback a token needs 16
NO_TOKEN_MESSAGE = "reachable from other machines: set admin_token"


def ask(port, method, path, headers=(), body=b"", host="default", address="127.0.0.1", version="HTTP/1.1"):
    """One request on its own connection; ``host`` None sends no Host, "default" the endpoint's."""
    headers = list(headers)
    if host == "default":
        host = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    if host is not None:
        headers.insert(0, ("Host", host))
    if body:
        headers.append(("Content-Length", str(len(body))))
    headers.append(("Connection", "close"))
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect((address, port))
        s.sendall(build_request(method, path, headers, body, version))
        return read_response(SockReader(s), method)


def bearer(token=TOKEN):
    return [("Authorization", f"Bearer {token}")]


def wait_started_or_exited(lr, timeout=15.0):
    """The exit code if Larder exits, None once it reports its admin endpoint listening."""
    # The log reader wakes this on every line, and when the process ends (its stderr closes).
    if lr.wait_for_log("admin endpoint listening", timeout):
        return None
    rc = lr.wait_exit(5)
    if rc is not None:
        return rc
    raise AssertionError(f"neither started nor exited\n{lr.log_text()[-2000:]}")


def admin_port_in_log(lr, timeout=15.0):
    """The admin port whatever address it listens on (helpers' pattern knows only 127.0.0.1)."""
    m = lr.wait_for_log(r"admin endpoint listening on \S+:(\d+)", timeout)
    if m:
        return int(m.group(1))
    raise AssertionError(f"no admin endpoint in the log\n{lr.log_text()[-2000:]}")




# ---------------------------------------------------------------------------
# Item: every source of configuration passes the same checks


def test_command_line_cannot_open_the_endpoint_without_a_token(larder_factory):
    lr = larder_factory(args=["--admin-listen", "0.0.0.0:0"], wait=False)
    assert wait_started_or_exited(lr) == 2, "started an off-loopback admin endpoint without a token"
    log = lr.log_text()
    assert "--admin-listen" in log and NO_TOKEN_MESSAGE in log, log[-2000:]


def test_command_line_wildcard_ipv6_needs_a_token_too(larder_factory):
    lr = larder_factory(args=["--admin-listen", "[::]:0"], wait=False)
    assert wait_started_or_exited(lr) == 2
    assert NO_TOKEN_MESSAGE in lr.log_text()


def test_a_name_starting_with_127_is_not_loopback(larder_factory):
    # Anyone can own 127.evil.example; a prefix match once took it for 127.0.0.0/8.
    lr = larder_factory(config={"admin_listen": "127.evil.example:0"}, wait=False)
    assert wait_started_or_exited(lr) == 2
    assert NO_TOKEN_MESSAGE in lr.log_text(), lr.log_text()[-2000:]


def test_environment_name_starting_with_127_is_not_loopback(larder_factory):
    lr = larder_factory(env={"LARDER_ADMIN_LISTEN": "127.evil.example:0"}, wait=False)
    assert wait_started_or_exited(lr) == 2
    log = lr.log_text()
    assert "LARDER_ADMIN_LISTEN" in log and NO_TOKEN_MESSAGE in log, log[-2000:]


def test_loopback_addresses_in_every_spelling_need_no_token(larder_factory):
    for listen in ("[::1]:0", "localhost:0", "127.0.0.2:0"):
        lr = larder_factory(args=["--admin-listen", listen])
        port = admin_port_in_log(lr)
        address = "::1" if "::1" in listen else "127.0.0.2" if "127.0.0.2" in listen else "127.0.0.1"
        assert ask(port, "GET", "/stats", address=address).status == 200, listen
        lr.stop()


def test_a_token_from_the_environment_satisfies_the_files_check(larder_factory):
    # The documented way: admin_listen in the file, the secret in LARDER_ADMIN_TOKEN. The checks
    # run on the merged configuration, not on the file alone.
    lr = larder_factory(config={"admin_listen": "0.0.0.0:0"}, env={"LARDER_ADMIN_TOKEN": TOKEN}, wait=False)
    assert wait_started_or_exited(lr) is None, lr.log_text()[-2000:]
    port = admin_port_in_log(lr)
    assert ask(port, "GET", "/stats").status == 401
    assert ask(port, "GET", "/stats", bearer()).status == 200


def test_reload_cannot_drop_the_token_a_flag_made_necessary(larder_factory):
    lr = larder_factory(config={"admin_token": TOKEN}, args=["--admin-listen", "0.0.0.0:0"])
    port = admin_port_in_log(lr)
    assert ask(port, "GET", "/stats").status == 401
    rewrite(lr, {"admin_token": None})
    r = ask(port, "POST", "/config/reload", bearer())
    assert r.status == 422 and json.loads(r.body)["status"] == "rejected", r.body
    assert "--admin-listen" in json.loads(r.body)["error"]
    assert ask(port, "GET", "/stats").status == 401
    # SIGHUP goes the same way.
    os.kill(lr.pid, signal.SIGHUP)
    wait_log(lr, "configuration reload rejected")  # logged once the reload is over
    assert ask(port, "GET", "/stats").status == 401


def test_reload_cannot_drop_the_token_while_the_endpoint_stays_off_loopback(larder_factory):
    # The new file is valid on its own (loopback, no token), but admin_listen changes only on a
    # restart: applied now, it would leave the running 0.0.0.0 endpoint without a token.
    lr = larder_factory(config={"admin_listen": "0.0.0.0:0", "admin_token": TOKEN})
    port = admin_port_in_log(lr)
    rewrite(lr, {"admin_listen": "127.0.0.1:0", "admin_token": None})
    r = ask(port, "POST", "/config/reload", bearer())
    assert r.status == 422, r.body
    assert NO_TOKEN_MESSAGE in json.loads(r.body)["error"]
    assert ask(port, "GET", "/stats").status == 401
    assert ask(port, "GET", "/stats", bearer()).status == 200


# ---------------------------------------------------------------------------
# Item: Host (DNS rebinding), Origin and form posts (cross-site requests), tokens in logs


@pytest.mark.parametrize("token", [None, TOKEN])
def test_rebinding_host_is_refused_token_or_not(larder_factory, token):
    lr = larder_factory(config={**ADMIN, "admin_token": token} if token else ADMIN)
    port = lr.admin_port
    auth = bearer() if token else []
    for host in (f"evil.example:{port}", "evil.example", f"127.evil.example:{port}", f"localhost.evil.example:{port}",
                 f"127.0.0.1.nip.io:{port}"):
        r = ask(port, "GET", "/stats", auth, host=host)
        assert r.status == 421, (host, r.status, r.body)
        assert "admin_hosts" in json.loads(r.body)["error"]
    assert ask(port, "GET", "/stats", auth, host=f"127.0.0.1:{port + 1 if port < 65535 else 1}").status == 421
    assert ask(port, "DELETE", "/cache", auth, host="evil.example").status == 421
    assert ask(port, "POST", "/config/reload", auth, host="evil.example").status == 421
    assert lr.wait_for_log(r"refused: Host evil\.example:\d+ is not this admin endpoint")


def test_the_endpoints_own_names_are_accepted(larder_factory):
    lr = larder_factory(config=ADMIN)
    port = lr.admin_port
    for host in (f"127.0.0.1:{port}", "127.0.0.1", f"localhost:{port}", "LocalHost", f"LOCALHOST:{port}"):
        assert ask(port, "GET", "/stats", host=host).status == 200, host
    # HTTP/1.0 without Host: no browser sends that.
    assert ask(port, "GET", "/stats", host=None, version="HTTP/1.0").status == 200


def test_ipv6_listener_accepts_its_bracketed_address(larder_factory):
    lr = larder_factory(args=["--admin-listen", "[::1]:0"])
    port = admin_port_in_log(lr)
    assert ask(port, "GET", "/stats", address="::1", host=f"[::1]:{port}").status == 200
    assert ask(port, "GET", "/stats", address="::1", host=f"localhost:{port}").status == 200
    assert ask(port, "GET", "/stats", address="::1", host=f"127.0.0.1:{port}").status == 421
    assert ask(port, "GET", "/stats", address="::1", host="evil.example").status == 421


def test_healthz_answers_any_host(larder_factory):
    # Liveness probes use the pod address or a service name as Host.
    lr = larder_factory(config={**ADMIN, "admin_token": TOKEN})
    assert ask(lr.admin_port, "GET", "/healthz", host="10.1.2.3:9090").status == 200
    assert ask(lr.admin_port, "GET", "/healthz", host="larder").status == 200
    assert subprocess.run([lr.cmd[0], "healthcheck", "--admin", f"127.0.0.1:{lr.admin_port}"],
                          capture_output=True, timeout=10).returncode == 0


def test_admin_hosts_adds_names_and_reloads(larder_factory):
    lr = larder_factory(config={**ADMIN, "admin_hosts": ["larder.internal", "[fd00::5]"]})
    port = lr.admin_port
    assert ask(port, "GET", "/stats", host="larder.internal").status == 200
    assert ask(port, "GET", "/stats", host="LARDER.internal:8443").status == 200  # any port behind a name
    assert ask(port, "GET", "/stats", host="[fd00::5]:9090").status == 200
    assert ask(port, "GET", "/stats", host="other.internal").status == 421
    r = ask(port, "POST", "/config/reload", [("Origin", "https://larder.internal")], host="larder.internal")
    assert r.status == 200, r.body
    rewrite(lr, {"admin_hosts": ["other.internal"]})
    r = ask(port, "POST", "/config/reload")
    assert r.status == 200 and "admin_hosts" in json.loads(r.body)["applied"], r.body
    assert ask(port, "GET", "/stats", host="other.internal").status == 200
    assert ask(port, "GET", "/stats", host="larder.internal").status == 421


def test_cross_site_state_changes_are_refused_and_change_nothing(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    port = lr.admin_port
    script(workdir, "kept", headers=[("Cache-Control", "max-age=600")], body="kept")
    url = origin.url("/res/kept")
    proxy_exchange(lr.port, "GET", url)
    purge = "/cache?url=" + urllib.parse.quote(url, safe="")
    form = b"x=1"
    attacks = [
        [("Origin", "http://evil.example")],
        [("Origin", "null")],  # sandboxed frames, data: URLs
        [("Origin", f"http://127.0.0.1:{port + 1 if port < 65535 else 1}")],  # another local service
        [("Origin", f"https://127.0.0.1:{port}")],  # another scheme is another origin
        [("Content-Type", "application/x-www-form-urlencoded")],
        [("Content-Type", "multipart/form-data; boundary=x")],
        [("Content-Type", "Text/Plain;charset=UTF-8")],
        [("Sec-Fetch-Site", "cross-site")],
        [("Sec-Fetch-Site", "same-site")],
    ]
    for headers in attacks:
        body = form if any(n == "Content-Type" for n, _ in headers) else b""
        for method, path in (("POST", "/config/reload"), ("DELETE", purge), ("PUT", "/cache"), ("PATCH", "/cache")):
            r = ask(port, method, path, headers, body)
            assert r.status == 403, (method, path, headers, r.status, r.body)
            assert json.loads(r.body)["error"], r.body
    assert "configuration reload" not in lr.log_text()
    assert proxy_exchange(lr.port, "GET", url, headers=[("Cache-Control", "only-if-cached")]).status == 200
    # Reads stay open to the endpoint's own pages and to tools.
    assert ask(port, "GET", "/stats", [("Origin", "http://evil.example"), ("Sec-Fetch-Site", "cross-site")]).status == 200


def test_same_origin_and_tool_state_changes_pass(larder_factory):
    lr = larder_factory(config=ADMIN)
    port = lr.admin_port
    for headers in ([], [("Origin", f"http://127.0.0.1:{port}"), ("Sec-Fetch-Site", "same-origin")],
                    [("Origin", f"http://localhost:{port}")], [("Sec-Fetch-Site", "none")],
                    [("Content-Type", "application/json")]):
        r = ask(port, "POST", "/config/reload", headers)
        assert r.status == 200, (headers, r.body)


def test_tokens_never_reach_the_log(larder_factory):
    # At debug, where answered reads are logged too.
    lr = larder_factory(config={**ADMIN, "admin_token": TOKEN, "log_level": "debug"})
    port = lr.admin_port
    assert ask(port, "GET", f"/stats?token={TOKEN}").status == 200
    assert ask(port, "GET", f"/?x=1&token={TOKEN}&y=2").status == 200
    assert ask(port, "GET", f"/stats/history?%74oken={TOKEN}").status == 200  # percent-encoded name
    assert ask(port, "GET", f"/stats?TOKEN={TOKEN}x").status == 401
    assert ask(port, "GET", "/stats?token=wrong-guess").status == 401
    assert ask(port, "GET", f"/stats?token={TOKEN}", host="evil.example").status == 421
    assert ask(port, "GET", "/stats", bearer()).status == 200
    wait_log(lr, "/stats/history?%74oken=REDACTED")
    log = lr.log_text()
    assert TOKEN not in log and "wrong-guess" not in log, log[-3000:]
    assert "/stats?token=REDACTED 200" in log and "/?x=1&token=REDACTED&y=2 200" in log
    assert "/stats?TOKEN=REDACTED 401" in log


def test_the_configuration_needs_the_token_and_keeps_its_secrets(larder_factory):
    lr = larder_factory(config={**ADMIN, "admin_token": TOKEN,
                                "session": {"http_additional_headers": {"X-Api-Key": "k3y-upstream"}}})
    port = lr.admin_port
    assert ask(port, "GET", "/config").status == 401
    assert ask(port, "GET", "/config?token=wrong-guess").status == 401
    # A rebound page cannot read it either, token or not.
    assert ask(port, "GET", "/config", bearer(), host="evil.example").status == 421
    for path in ("/config", f"/config?token={TOKEN}", "/config?" + "x=1&" * 1500):
        r = ask(port, "GET", path, [] if "token=" in path else bearer())
        assert r.status == 200, (path[:40], r.status, r.body[:200])
        assert TOKEN.encode() not in r.body and b"k3y-upstream" not in r.body
    assert ask(port, "GET", "/config/", bearer()).status == 404
    assert ask(port, "DELETE", "/config", bearer()).status == 405
    log = lr.log_text()
    assert TOKEN not in log and "k3y-upstream" not in log and "wrong-guess" not in log


def test_odd_urls_to_inspect_get_a_clear_answer(larder_factory, origin, workdir):
    # At debug, where the endpoint logs every request it answers.
    lr = larder_factory(config={**ADMIN, "log_level": "debug"})
    script(workdir, "odd", headers=[("Cache-Control", "max-age=600")], body="o")
    stored = origin.url("/res/odd")
    assert proxy_exchange(lr.port, "GET", stored).status == 200
    port = lr.admin_port
    refused = ["", "not-a-url", "/res/odd", "*", "//example.com/x", "gopher://example.com/x", "http://user:pw@example.com/",
               "http://[::1/x", "http://example.com:99999/", "http://exa mple.com/", "http://example.com/\r\nX: y",
               "http://\x00/", "http://%ff%fe/", "http://\u00e9.example/", "http:///x", "https://:443/"]
    for url in refused:
        r = ask(port, "GET", "/cache?url=" + urllib.parse.quote(url, safe=""))
        assert r.status == 400 and "error" in json.loads(r.body), (url, r.status, r.body)
    # Parameters given twice, empty, or without a value: the first url= counts.
    assert ask(port, "GET", "/cache?url").status == 400
    assert ask(port, "GET", "/cache?url=&url=" + urllib.parse.quote(stored, safe="")).status == 400
    assert ask(port, "GET", "/cache?url=" + urllib.parse.quote(stored, safe="") + "&url=junk").status == 200
    # A fragment is never part of the key; a URL not stored is a 404.
    assert ask(port, "GET", "/cache?url=" + urllib.parse.quote(stored + "#frag", safe="")).status == 200
    assert ask(port, "GET", "/cache?url=" + urllib.parse.quote(origin.url("/res/none"), safe="")).status == 404
    # A request line longer than the endpoint reads: refused whole, the connection closed.
    r = ask(port, "GET", "/cache?url=" + urllib.parse.quote("http://example.com/" + "a" * 20_000, safe=""))
    assert r.status in (414, 431), r.status
    assert ask(port, "GET", "/healthz").status == 200
    assert ask(port, "GET", "/cache?url=" + urllib.parse.quote(stored, safe="")).status == 200
    assert lr.wait_for_log(r"admin 127\.0\.0\.1:\d+ GET /cache\?url=http%3A%2F%2Fexample\.com%3A99999%2F 400")


# ---------------------------------------------------------------------------
# In a real browser


class AttackSite:
    """Serves one HTML page on 127.0.0.1, reached by the browser as http://evil.example:PORT."""

    def __init__(self, html):
        page = html.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def headless(args):
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=4000",
           "--host-resolver-rules=MAP evil.example 127.0.0.1", "--proxy-server=direct://", *args]
    return subprocess.run(cmd, capture_output=True, timeout=90)


@pytest.mark.timeout_s(120)
def test_browser_form_post_from_another_site_is_refused(larder_factory):
    lr = larder_factory(config=ADMIN)
    port = lr.admin_port
    # A page on another site that reloads the configuration as soon as it opens: two forms and a
    # fetch, the requests a page may send without a CORS preflight.
    site = AttackSite(f"""<!doctype html><html><body>
<form id="f" method="POST" action="http://127.0.0.1:{port}/config/reload" target="a"><input name="x" value="1"></form>
<form id="g" method="POST" enctype="text/plain" action="http://localhost:{port}/config/reload" target="b"><input name="y" value="2"></form>
<iframe name="a"></iframe><iframe name="b"></iframe>
<script>document.getElementById("f").submit(); document.getElementById("g").submit();
fetch("http://127.0.0.1:{port}/config/reload", {{method: "POST", mode: "no-cors", body: "z"}});</script>
</body></html>""")
    try:
        headless(["--dump-dom", f"http://evil.example:{site.port}/"])
    finally:
        site.close()
    log = lr.log_text()
    refused = re.findall(r"admin \S+ POST /config/reload 403 refused", log)
    assert len(refused) == 3, log[-3000:]
    assert "configuration reload" not in log


@pytest.mark.timeout_s(120)
def test_browser_dashboard_with_a_token_and_rebinding_refused(larder_factory):
    lr = larder_factory(config={**ADMIN, "admin_token": TOKEN})
    port = lr.admin_port
    dom = headless(["--dump-dom", f"http://127.0.0.1:{port}/?token={TOKEN}"]).stdout.decode()
    assert 'class="live ok"' in dom, dom[-2000:]  # its fetches of /stats carried the token
    # The same endpoint under a rebound name: the browser gets the refusal, not the page.
    dom = headless(["--dump-dom", f"http://evil.example:{port}/?token={TOKEN}"]).stdout.decode()
    assert "not this admin endpoint" in dom and 'id="live"' not in dom, dom[-2000:]
    assert TOKEN not in lr.log_text()
