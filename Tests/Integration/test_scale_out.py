"""Scale-out: HAProxy from Debian, configured by Docker/haproxy.cfg (the file compose uses), in
front of three Larders on loopback. Each URL has one home instance, the origin sees each URL
once, and stopping an instance moves only that instance's URLs."""

import collections
import http.client
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from helpers import REPO_ROOT, free_port, spawn, stop_process, wait_for_file
from test_admin import stats
from test_cache import script

HAPROXY_CFG = REPO_ROOT / "Docker" / "haproxy.cfg"
NAMES = ("larder1", "larder2", "larder3")


class HAProxy:
    """Debian's haproxy in the foreground with the committed configuration; addresses by environment."""

    def __init__(self, workdir, larders):
        binary = shutil.which("haproxy")
        assert binary, "haproxy is needed (Debian package haproxy; scripts/install-deps.sh installs it)"
        self.port = free_port()
        self.socket_path = str(workdir / "haproxy.sock")
        env = dict(os.environ, HAPROXY_BIND=f"127.0.0.1:{self.port}", HAPROXY_STATS_SOCKET=self.socket_path)
        for i, lr in enumerate(larders, 1):
            env[f"LARDER{i}_ADDR"] = f"127.0.0.1:{lr.port}"
            env[f"LARDER{i}_ADMIN_PORT"] = str(lr.admin_port)
        self.log_path = workdir / "haproxy.log"
        self.log = open(self.log_path, "wb")
        self.proc = spawn([binary, "-db", "-f", HAPROXY_CFG], env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def command(self, line):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(self.socket_path)
            s.sendall(line.encode() + b"\n")
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        return out.decode()

    def server_states(self):
        """{server name: status} of the larders backend, e.g. {"larder1": "UP", ...}."""
        try:
            lines = self.command("show stat").splitlines()
        except OSError:
            return {}
        if not lines or not lines[0].startswith("# "):
            return {}
        columns = lines[0][2:].split(",")
        out = {}
        for line in lines[1:]:
            row = dict(zip(columns, line.split(",")))
            if row.get("pxname") == "larders" and row.get("svname") in NAMES:
                out[row["svname"]] = row["status"]
        return out

    def wait_states(self, expected, timeout=20.0):
        """Waits until the servers' states are as ``expected``: once HAProxy's stats socket answers
        (polled, for the moment HAProxy takes to start), asked again each time HAProxy logs (it
        says when a server goes up or down)."""
        def reached():
            states = self.server_states()
            return self.proc.poll() is not None or all(states.get(name, "").startswith(want)
                                                       for name, want in expected.items())

        deadline = time.monotonic() + timeout
        while not self.server_states() and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        left = max(0.0, deadline - time.monotonic())
        if not wait_for_file(self.log_path, reached, left) or self.proc.poll() is not None:
            self.log.flush()
            raise AssertionError(f"HAProxy servers {self.server_states()}, wanted {expected}")

    def stop(self):
        rc, _ = stop_process(self.proc, signal.SIGTERM, 10)
        self.log.close()
        return rc


def fetch_all(port, urls, threads=8):
    """GETs every URL through HAProxy on `threads` keep-alive connections; [(url, status, via)]."""
    results = []
    lock = threading.Lock()
    errors = []

    def run(part):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        try:
            for url in part:
                conn.request("GET", url)
                resp = conn.getresponse()
                resp.read()
                with lock:
                    results.append((url, resp.status, resp.getheader("Via", "")))
        except Exception as e:  # reported below
            errors.append(repr(e))
        finally:
            conn.close()

    workers = [threading.Thread(target=run, args=(urls[i::threads],)) for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(120)
    assert not errors, errors[:3]
    assert len(results) == len(urls)
    return results


def instance_of(via):
    """The Larder that answered: the name in the last Via entry (`1.1 larder2`)."""
    return via.split(",")[-1].split()[-1]


def origin_counts(origin):
    return collections.Counter(r["query"] for r in origin.requests() if r["path"] == "/res/item")


@pytest.mark.timeout_s(180)
def test_three_larders_behind_haproxy_share_urls_by_consistent_hashing(larder_factory, origin, workdir):
    script(workdir, "item", headers=[("Cache-Control", "max-age=3600")], body="y" * 2048)
    # HAProxy sends a PROXY protocol v2 header first (send-proxy-v2 in haproxy.cfg).
    listen = [{"address": "127.0.0.1:0", "proxy_protocol": True}]
    larders = {name: larder_factory(name=name, listen_flag=False,
                                    config={"listen": listen, "admin_listen": "127.0.0.1:0", "via_name": name,
                                            "workers": 1, "access_log": "off"})
               for name in NAMES}
    haproxy = HAProxy(workdir, list(larders.values()))
    try:
        haproxy.wait_states({name: "UP" for name in NAMES})

        # 3,000 requests: each of 300 URLs ten times, in a shuffled order.
        urls = [origin.url(f"/res/item?n={i}") for i in range(300)]
        requests = urls * 10
        random.Random(7).shuffle(requests)
        results = fetch_all(haproxy.port, requests)
        assert all(status == 200 for _, status, _ in results)

        homes = collections.defaultdict(set)
        for url, _, via in results:
            homes[url].add(instance_of(via))
        assert all(len(h) == 1 for h in homes.values()), "a URL was answered by two instances"
        home = {url: next(iter(h)) for url, h in homes.items()}
        share = collections.Counter(home.values())

        # Each URL came from the origin once, whichever instance it lives on.
        counts = origin_counts(origin)
        assert len(counts) == 300 and set(counts.values()) == {1}, counts.most_common(3)

        report = ["instance  urls  requests  hits  misses  collapsed  hit_ratio"]
        for name, lr in larders.items():
            s = stats(lr)
            lookups = s["cache_lookups"]
            assert share[name] >= 30, f"{name} holds {share[name]} of 300 URLs: hashing is lopsided"
            # Misses: one per URL, plus requests that arrived while that URL's fetch was running
            # and joined it (collapsed).
            assert lookups["miss"] - s["collapsed_requests"] == share[name], (name, lookups, s["collapsed_requests"])
            assert lookups["hit"] + lookups["miss"] == 10 * share[name], (name, lookups)
            report.append(f"{name:9} {share[name]:4} {10 * share[name]:9} {lookups['hit']:5} "
                          f"{lookups['miss']:7} {s['collapsed_requests']:9} {s['hit_ratio']['requests']:10.3f}")
            assert s["hit_ratio"]["requests"] >= 0.85
        print("\n" + "\n".join(report))

        # Stop one instance: only its URLs move, each fetched from the origin once more.
        gone = "larder2"
        assert larders[gone].stop() == 0
        haproxy.wait_states({gone: "DOWN", "larder1": "UP", "larder3": "UP"})
        again = fetch_all(haproxy.port, urls)
        moved = {url for url, _, via in again if instance_of(via) != home[url]}
        assert all(status == 200 for _, status, _ in again)
        assert moved == {url for url, h in home.items() if h == gone}
        counts = origin_counts(origin)
        for url in urls:
            query = url.split("?", 1)[1]
            assert counts[query] == (2 if home[url] == gone else 1), url
        print(f"after stopping {gone}: {len(moved)} URLs moved (its {share[gone]}), "
              f"{300 - len(moved)} stayed home and were hits")

        # PURGE is hashed like the GET, so it reaches the URL's home.
        target = next(url for url in urls if home[url] != gone)
        conn = http.client.HTTPConnection("127.0.0.1", haproxy.port, timeout=10)
        conn.request("PURGE", target)
        assert conn.getresponse().status == 200
        conn.close()
        assert fetch_all(haproxy.port, [target])[0][1] == 200
        assert origin_counts(origin)[target.split("?", 1)[1]] == 2
    finally:
        haproxy.stop()


def test_compose_file_matches_the_haproxy_configuration():
    import yaml
    compose = yaml.safe_load((REPO_ROOT / "Docker" / "compose.scale.yaml").read_text())
    services = compose["services"]
    cfg = HAPROXY_CFG.read_text()
    servers = [line.split()[1] for line in cfg.splitlines() if line.strip().startswith("server ")]
    larders = sorted(name for name in services if name != "haproxy")
    assert servers == larders
    for name in larders:
        # The default address in haproxy.cfg is the compose service's name and ports.
        assert f'"${{{name.upper()}_ADDR-{name}:3128}}"' in cfg
        assert f'"${{{name.upper()}_ADMIN_PORT-9090}}"' in cfg
        env = services[name]["environment"]
        assert env["LARDER_VIA_NAME"] == name and "LARDER_ADMIN_TOKEN" in env
        # HAProxy sends PROXY protocol headers, so each Larder's listener must expect them.
        assert yaml.safe_load(env["LARDER_LISTEN"]) == [{"address": "0.0.0.0:3128", "proxy_protocol": True}]
        assert env["LARDER_PROXY_PROTOCOL_FROM"]
    volumes = [services[name]["volumes"][0].split(":")[0] for name in larders]
    assert len(set(volumes)) == len(larders), "each instance needs its own cache volume"
    assert "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in services["haproxy"]["volumes"]
