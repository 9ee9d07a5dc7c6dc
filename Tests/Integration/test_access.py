"""Who may use the proxy and where it may go: allow_clients (IPv4 and IPv6), deny_destinations
(host names, networks checked after DNS), never the proxy itself, proxy authentication with a
users file (missing, wrong and right credentials, per-destination rules, reload)."""

import os
import re
import signal
import subprocess
import threading

from helpers import REPO_ROOT, Larder, RawClient, child_env, build_request, curl, larder_bin, proxy_exchange
from test_admin import ADMIN, stats
from test_cache import script
from test_reload import rewrite, wait_log

AUTH_REALM = re.compile(r'^Basic realm="([^"]+)"')


def origin_paths(origin):
    return [r["path"] for r in origin.requests()]


def connect(port, target, headers=()):
    c = RawClient(port, 10)
    c.send(build_request("CONNECT", target, [("Host", target)] + list(headers)))
    return c, c.response("CONNECT")


def users_file(workdir, *entries, scheme="sha512"):
    """A users file made with `larder passwd` (what operators run)."""
    lines = []
    for user, password in entries:
        r = subprocess.run([larder_bin(), "passwd", user, "--scheme", scheme, "--cost", "5" if scheme == "bcrypt" else "1000"],
                           input=password.encode() + b"\n", capture_output=True, timeout=30, env=child_env())
        assert r.returncode == 0, r.stderr
        lines.append(r.stdout.decode().strip())
    path = workdir / "users"
    path.write_text("# proxy users\n" + "\n".join(lines) + "\n")
    return path


def basic(user, password):
    import base64
    return ("Proxy-Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())


# --- allow_clients -----------------------------------------------------------------------------


def test_clients_outside_allow_clients_get_403_and_a_log_line(larder_factory, origin):
    lr = larder_factory(config=dict(ADMIN, allow_clients=["10.0.0.0/8", "192.168.0.0/16"]))
    r = proxy_exchange(lr.port, "GET", origin.url("/echo"))
    assert r.status == 403
    assert b"client 127.0.0.1 is not allowed to use this proxy" in r.body
    assert r.header("Connection") == "close"
    assert origin_paths(origin) == []
    # The log reader thread may not have caught up with the line yet.
    assert lr.wait_for_log(r"403 to 127\.0\.0\.1"), lr.log_text()
    assert "allow_clients" in lr.log_text()
    assert stats(lr)["requests_denied"]["client"] == 1


def test_ipv6_clients_are_matched_by_ipv6_networks(larder_factory, origin):
    # Two listeners: 127.0.0.1 and ::1; only the IPv6 loopback is allowed.
    lr = larder_factory(config={"allow_clients": ["::1/128"]}, args=("--listen", "[::1]:0"))
    m = lr.wait_for_log(r"proxy listening on \[::1\]:(\d+)")
    assert m, lr.log_text()
    v6 = int(m.group(1))
    r = curl("-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", f"http://[::1]:{v6}", origin.url("/echo"))
    assert r.stdout == b"200", r
    assert proxy_exchange(lr.port, "GET", origin.url("/echo")).status == 403


def test_the_shipped_configuration_listens_and_admits_only_loopback():
    shipped = REPO_ROOT / "Config" / "larder.yaml"
    r = subprocess.run([larder_bin(), "check-config", "--config", shipped], capture_output=True, timeout=30,
                       env=child_env())
    assert r.returncode == 0, r.stderr
    text = shipped.read_text()
    assert re.search(r'^allow_clients: \[127\.0\.0\.0/8, "::1/128"\]$', text, re.M)
    assert re.search(r"^listen:\n  - 127\.0\.0\.1:3128$", text, re.M)
    assert re.search(r"^admin_listen: 127\.0\.0\.1:9090$", text, re.M)


# --- deny_destinations and the proxy itself --------------------------------------------------


def test_denied_host_names_and_networks_are_refused_before_contact(larder_factory, origin):
    lr = larder_factory(config=dict(ADMIN, deny_destinations=["*.blocked.test", "127.0.0.0/8"]))
    r = proxy_exchange(lr.port, "GET", "http://api.blocked.test/x")
    assert r.status == 403 and b"deny_destinations (*.blocked.test)" in r.body
    # An address literal, and a name that resolves into the denied network (checked after DNS).
    for url in (origin.url("/echo"), f"http://localhost:{origin.port}/echo"):
        r = proxy_exchange(lr.port, "GET", url)
        assert r.status == 403, (url, r.status, r.body)
        assert b"127.0.0.1 is in deny_destinations (127.0.0.0/8)" in r.body
    c, resp = connect(lr.port, f"localhost:{443}")
    assert resp.status == 403
    c.close()
    assert origin_paths(origin) == []
    assert stats(lr)["requests_denied"]["destination"] == 4


def test_link_local_metadata_is_denied_by_default(larder):
    r = proxy_exchange(larder.port, "GET", "http://169.254.169.254/latest/meta-data/")
    assert r.status == 403 and b"169.254.169.254 is in deny_destinations (169.254.0.0/16)" in r.body


def test_requests_and_tunnels_to_the_proxy_itself_are_refused(larder_factory):
    lr = larder_factory(config=ADMIN)
    for url in (f"http://127.0.0.1:{lr.port}/", f"http://localhost:{lr.port}/x", f"http://0.0.0.0:{lr.port}/",
                f"http://127.0.0.1:{lr.admin_port}/stats"):
        r = proxy_exchange(lr.port, "GET", url)
        assert r.status == 403 and b"is this proxy itself" in r.body, (url, r.status, r.body)
    # Through CONNECT too, when its port is allowed.
    rewrite(lr, {"connect_ports": [443, lr.port]})
    os.kill(lr.pid, signal.SIGHUP)
    wait_log(lr, "applied connect_ports")
    c, resp = connect(lr.port, f"127.0.0.1:{lr.port}")
    assert resp.status == 403 and b"is this proxy itself" in resp.body
    c.close()


# --- proxy authentication ----------------------------------------------------------------------


def test_proxy_authentication(larder_factory, origin, workdir):
    path = users_file(workdir, ("alice", "correct horse"), ("bob", "s3cret:with colon"))
    lr = larder_factory(config=dict(ADMIN, auth={"users_file": str(path), "realm": "Test Realm"}))
    url = origin.url("/echo")

    r = proxy_exchange(lr.port, "GET", url)
    assert r.status == 407
    assert AUTH_REALM.match(r.header("Proxy-Authenticate")).group(1) == "Test Realm"
    assert r.header("Connection") != "close"  # the client may retry on the same connection

    assert proxy_exchange(lr.port, "GET", url, headers=[basic("alice", "wrong")]).status == 407
    assert proxy_exchange(lr.port, "GET", url, headers=[basic("mallory", "correct horse")]).status == 407
    assert proxy_exchange(lr.port, "GET", url, headers=[("Proxy-Authorization", "Basic !!!")]).status == 407
    assert proxy_exchange(lr.port, "GET", url, headers=[("Proxy-Authorization", "Bearer abc")]).status == 407
    assert origin_paths(origin) == []

    r = proxy_exchange(lr.port, "GET", url, headers=[basic("alice", "correct horse")])
    assert r.status == 200
    r = proxy_exchange(lr.port, "GET", url, headers=[basic("bob", "s3cret:with colon")])
    assert r.status == 200
    # The credentials are the proxy's: never forwarded.
    for req in origin.requests():
        assert not any(k.lower() == "proxy-authorization" for k, _ in req["headers"])

    # A real client: curl --proxy-user, and a 407 first with curl's --proxy-anyauth dance.
    r = curl("-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", lr.proxy_url, "--proxy-user", "alice:correct horse",
             url)
    assert r.stdout == b"200", r
    r = curl("-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", lr.proxy_url, url)
    assert r.stdout == b"407", r

    s = stats(lr)
    assert s["requests_denied"]["auth_missing"] == 2
    assert s["requests_denied"]["auth_failed"] == 4


def test_one_connection_keeps_working_across_407_and_concurrent_checks(larder_factory, origin, workdir):
    path = users_file(workdir, ("carol", "pw"), scheme="bcrypt")
    lr = larder_factory(config={"auth": {"users_file": str(path)}})
    url = origin.url("/echo")
    with RawClient(lr.port) as c:
        assert c.request("GET", url).status == 407
        assert c.request("GET", url, [basic("carol", "pw")]).status == 200
        assert c.request("GET", url, [basic("carol", "nope")]).status == 407
        assert c.request("GET", url, [basic("carol", "pw")]).status == 200

    # Twenty clients at once with credentials never seen before: all get through.
    results = []
    creds = basic("carol", "pw")

    def one():
        results.append(proxy_exchange(lr.port, "GET", url, headers=[creds]).status)

    threads = [threading.Thread(target=one) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [200] * 20


def test_authentication_only_for_configured_destinations_and_connect(larder_factory, origin, echo_server, workdir):
    path = users_file(workdir, ("dave", "pw"))
    lr = larder_factory(config={"auth": {"users_file": str(path), "destinations": ["127.0.0.1"]},
                                "connect_ports": [echo_server.port]})
    assert proxy_exchange(lr.port, "GET", origin.url("/echo")).status == 407
    assert proxy_exchange(lr.port, "GET", f"http://localhost:{origin.port}/echo").status == 200
    c, resp = connect(lr.port, f"127.0.0.1:{echo_server.port}")
    assert resp.status == 407 and resp.header("Proxy-Authenticate")
    c.close()
    c, resp = connect(lr.port, f"127.0.0.1:{echo_server.port}", [basic("dave", "pw")])
    assert resp.status == 200
    c.sock.sendall(b"ping")
    assert c.sock.recv(4) == b"ping"
    c.close()


def test_users_file_is_reread_on_reload_and_a_bad_one_is_rejected(larder_factory, origin, workdir):
    path = users_file(workdir, ("erin", "old"))
    lr = larder_factory(config=dict(ADMIN, auth={"users_file": str(path)}))
    url = origin.url("/echo")
    assert proxy_exchange(lr.port, "GET", url, headers=[basic("erin", "old")]).status == 200

    users_file(workdir, ("erin", "new"))
    # The file's name is unchanged: a reload still reads it again.
    rewrite(lr, {"auth": {"users_file": str(path), "realm": "Renewed"}})
    os.kill(lr.pid, signal.SIGHUP)
    wait_log(lr, "applied auth.realm")
    r = proxy_exchange(lr.port, "GET", url, headers=[basic("erin", "old")])
    assert r.status == 407 and 'realm="Renewed"' in r.header("Proxy-Authenticate")
    assert proxy_exchange(lr.port, "GET", url, headers=[basic("erin", "new")]).status == 200

    path.write_text("erin:$apr1$abc$def\n")
    rewrite(lr, {"auth": {"users_file": str(path), "realm": "Broken"}})
    os.kill(lr.pid, signal.SIGHUP)
    wait_log(lr, "reload rejected")
    assert "Apache MD5" in lr.log_text()
    assert proxy_exchange(lr.port, "GET", url, headers=[basic("erin", "new")]).status == 200


def test_unreadable_or_weak_users_file_stops_start_up(tmp_path):
    lr = Larder(tmp_path, config={"auth": {"users_file": str(tmp_path / "missing")}}, wait=False, name="nousers")
    rc = lr.wait_exit(15)
    if rc is None:
        lr.stop()
    assert rc not in (0, None) and "auth.users_file: cannot read" in lr.log_text(), lr.log_text()
    weak = tmp_path / "weak"
    weak.write_text("frank:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n")
    lr = Larder(tmp_path, config={"auth": {"users_file": str(weak)}}, wait=False, name="weak")
    rc = lr.wait_exit(15)
    if rc is None:
        lr.stop()
    assert rc not in (0, None) and "line 1: user frank: unsalted SHA-1" in lr.log_text(), lr.log_text()
