"""ftp:// through the proxy: the FTP gateway, against a real FTP server (pyftpdlib) and a scripted
hostile one, both on loopback, with curl, wget and raw requests as clients.

* Files become 200 answers with Content-Length (SIZE), Last-Modified (MDTM) and a type from the
  extension, cached under the same policy as HTTP: a second fetch is a hit the server never sees;
  a stale one is revalidated with SIZE and MDTM (the FTP analogue of HEAD), and a changed file is
  fetched again.
* Directories become an HTML listing whose links are absolute ftp:// URLs (asked through the proxy
  again); a file request answered "is a directory" is redirected to the directory.
* Ranges come from the cache, or from the server with REST.
* Replies map to statuses (550 → 404, 530 → 401 with a Basic challenge); logins other than the
  public one are neither cached nor logged.
* Hostile servers and clients: a PASV reply naming another host (the FTP bounce), CR/LF in paths
  and credentials, endless replies and listings, transfers that stop.
"""

import base64
import os
import shutil
import socket
import subprocess
import time

import pytest

from ftp_scripted import ScriptedFTPServer
from helpers import FTPOriginProcess, RSSSampler, RawClient, child_env, curl, proxy_exchange, std_request
from test_access_log import read_lines
from test_admin import stats, wait_stats
from test_cache import cache_status

ADMIN = {"admin_listen": "127.0.0.1:0"}


@pytest.fixture
def ftp_root(tmp_path):
    root = tmp_path / "ftproot"
    (root / "pub" / "sub").mkdir(parents=True)
    (root / "pub" / "a.txt").write_bytes(b"hello from ftp\n")
    (root / "pub" / "data.bin").write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    (root / "pub" / "<b>x&y z.txt").write_bytes(b"odd name\n")
    old = time.time() - 30 * 86400  # a month old: heuristically fresh for days
    for p in root.rglob("*"):
        os.utime(p, (old, old))
    return root


@pytest.fixture
def ftp_origin(tmp_path, ftp_root):
    servers = []

    def start(*options):
        s = FTPOriginProcess(tmp_path, ftp_root, name=f"ftp{len(servers) + 1}", options=options)
        servers.append(s)
        return s

    start.root = ftp_root
    yield start
    for s in servers:
        s.stop()


def get(lr, url, headers=(), method="GET", host=None):
    # Host without the URL's credentials.
    netloc = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    return proxy_exchange(lr.port, method, url, headers=[("Host", host or netloc), *headers], timeout=20)


def commands(server):
    return [c for _, c, _ in server.commands()]


# -- files ------------------------------------------------------------------------------------


def test_curl_fetches_a_file_and_the_second_fetch_is_a_hit_the_server_never_sees(larder, ftp_origin):
    server = ftp_origin()
    url = server.url("/pub/a.txt")
    first = curl("-i", "-x", f"http://127.0.0.1:{larder.port}", url)
    assert first.returncode == 0, first.stderr
    head, _, body = first.stdout.partition(b"\r\n\r\n")
    assert body == b"hello from ftp\n"
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"Content-Length: 15" in head and b"Content-Type: text/plain" in head and b"Last-Modified: " in head
    seen = server.wait_for(lambda c: any(x[1] == "RETR" for x in c))
    assert [c for _, c, a in seen if c == "RETR"] == ["RETR"]

    before = len(server.commands())
    again = get(larder, url)
    assert again.status == 200 and again.body == b"hello from ftp\n"
    assert cache_status(again).startswith("larder; hit"), cache_status(again)
    assert len(server.commands()) == before, "a hit must not reach the FTP server"


def test_statistics_and_the_dashboards_hosts_count_ftp_requests(larder_factory, ftp_origin):
    larder = larder_factory(config=ADMIN)
    server = ftp_origin()
    for _ in range(3):
        assert get(larder, server.url("/pub/a.txt")).status == 200
    name = f"127.0.0.1:{server.port}"
    s = wait_stats(larder, lambda st: any(h["host"] == name and h["requests"] == 3 for h in st["top_hosts"]))
    top = {h["host"]: h for h in s["top_hosts"]}
    assert top[name] == {"host": name, "requests": 3, "hits": 2, "misses": 1, "hit_ratio": 2 / 3}, top
    assert s["cache_lookups"]["hit"] == 2 and s["cache_lookups"]["miss"] == 1


def test_wget_fetches_a_file_through_ftp_proxy(larder, ftp_origin, tmp_path):
    if shutil.which("wget") is None:
        pytest.fail("wget is not installed (scripts/install-deps.sh test installs it)")
    server = ftp_origin()
    out = tmp_path / "a.txt"
    env = dict(child_env(), ftp_proxy=f"http://127.0.0.1:{larder.port}/")
    r = subprocess.run(["wget", "-q", "-O", str(out), server.url("/pub/a.txt")], env=env, timeout=60,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == b"hello from ftp\n"


def test_curl_and_wget_fetch_a_directory_and_a_range(larder, ftp_origin, tmp_path):
    server = ftp_origin()
    proxy = f"http://127.0.0.1:{larder.port}"
    listing = curl("-x", proxy, server.url("/pub/"))
    assert listing.returncode == 0 and b'a.txt</a>' in listing.stdout, listing.stdout[:300]
    part = curl("-x", proxy, "-r", "6-9", server.url("/pub/a.txt"))
    assert part.returncode == 0 and part.stdout == b"from", part.stdout
    env = dict(child_env(), ftp_proxy=f"{proxy}/")
    page = tmp_path / "index.html"
    r = subprocess.run(["wget", "-q", "-O", str(page), server.url("/pub/")], env=env, timeout=60,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and b"a.txt</a>" in page.read_bytes(), r.stderr
    tail = tmp_path / "tail.txt"
    r = subprocess.run(["wget", "-q", "--start-pos=6", "-O", str(tail), server.url("/pub/a.txt")], env=env,
                       timeout=60, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and tail.read_bytes() == b"from ftp\n", (r.stderr, tail.read_bytes())


def test_a_large_file_is_whole_and_a_head_costs_no_transfer(larder, ftp_origin, ftp_root):
    server = ftp_origin()
    url = server.url("/pub/data.bin")
    head = get(larder, url, method="HEAD")
    assert head.status == 200 and head.header("Content-Length") == str(1 << 20)
    assert head.header("Content-Type") == "application/octet-stream"
    assert "RETR" not in commands(server)
    r = get(larder, url)
    assert r.status == 200 and r.body == (ftp_root / "pub" / "data.bin").read_bytes()


def test_a_control_connection_is_reused_by_the_next_request_of_its_login(larder, ftp_origin):
    server = ftp_origin()
    netloc = f"127.0.0.1:{server.port}"
    with RawClient(larder.port, timeout=20) as c:  # one client connection: one worker, one pool
        for path in ("/pub/a.txt", "/pub/data.bin", "/pub/nothing"):
            r = c.request("HEAD", server.url(path), [("Host", netloc)])
            assert r.status in (200, 404)
    sessions = {n for n, _, _ in server.commands()}
    assert len(sessions) == 1, server.commands()
    assert [c for _, c, _ in server.commands()].count("USER") == 1


def test_a_kept_connection_the_server_closed_is_replaced_once(larder):
    with ScriptedFTPServer(files={"/a": b"first\n", "/b": b"second\n"}, close_on_reuse=True) as s:
        netloc = f"127.0.0.1:{s.port}"
        with RawClient(larder.port, timeout=20) as c:
            assert c.request("GET", s.url("/a"), [("Host", netloc)]).body == b"first\n"
            r = c.request("GET", s.url("/b"), [("Host", netloc)])
            assert r.status == 200 and r.body == b"second\n", (r.status, r.body)
        assert s.commands().count("USER") == 2


def test_a_range_is_served_with_rest_and_then_from_the_cache(larder_factory, ftp_origin):
    larder = larder_factory(config={"cache": {"range_misses": "pieces"}})
    server = ftp_origin()
    url = server.url("/pub/data.bin")
    r = get(larder, url, headers=[("Range", "bytes=1000-1009")])
    assert r.status == 206, (r.status, r.body[:200])
    assert r.header("Content-Range") == f"bytes 1000-1009/{1 << 20}"
    assert r.body == (bytes(range(256)) * 4096)[1000:1010]
    assert ("REST", "1000") in [(c, a) for _, c, a in server.commands()]
    whole = get(larder, url)
    assert whole.status == 200 and len(whole.body) == 1 << 20
    before = len(server.commands())
    again = get(larder, url, headers=[("Range", "bytes=5-7")])
    assert again.status == 206 and again.body == bytes([5, 6, 7])
    assert len(server.commands()) == before


def test_a_range_past_the_end_is_416(larder, ftp_origin):
    server = ftp_origin()
    r = get(larder, server.url("/pub/a.txt"), headers=[("Range", "bytes=100-")])
    assert r.status == 416 and r.header("Content-Range") == "bytes */15"


def test_a_missing_file_is_404_with_the_servers_text(larder, ftp_origin):
    server = ftp_origin()
    r = get(larder, server.url("/pub/nothing.txt"))
    assert r.status == 404
    assert b"550" in r.body


def test_a_changed_file_is_noticed_on_revalidation_and_an_unchanged_one_is_not_fetched_again(
        larder_factory, ftp_origin, ftp_root, proxy_clock):
    larder = larder_factory()
    server = ftp_origin()
    url = server.url("/pub/a.txt")
    assert get(larder, url).body == b"hello from ftp\n"
    # A month-old file is fresh for three days (10 % of its age): later, it is checked.
    proxy_clock.advance(4 * 86400)
    before = len(server.commands())
    same = get(larder, url)
    assert same.body == b"hello from ftp\n"
    assert "fwd=stale" in cache_status(same), cache_status(same)
    after = [c for _, c, _ in server.commands()[before:]]
    assert "RETR" not in after and "MDTM" in after, after

    (ftp_root / "pub" / "a.txt").write_bytes(b"changed content\n")
    proxy_clock.advance(4 * 86400)
    changed = get(larder, url)
    assert changed.body == b"changed content\n", changed.body
    assert cache_status(get(larder, url)).startswith("larder; hit")


def test_a_conditional_get_revalidation_is_a_304_without_a_transfer(larder_factory, ftp_origin, ftp_root, proxy_clock):
    # cache.revalidation: conditional-get sends the stored Last-Modified as If-Modified-Since: the
    # gateway answers 304 after MDTM, and a changed file in full.
    larder = larder_factory(config={"cache": {"revalidation": "conditional-get"}})
    server = ftp_origin()
    url = server.url("/pub/a.txt")
    assert get(larder, url).body == b"hello from ftp\n"
    proxy_clock.advance(4 * 86400)
    before = len(server.commands())
    same = get(larder, url)
    assert same.body == b"hello from ftp\n" and "fwd-status=304" in cache_status(same), cache_status(same)
    assert "RETR" not in [c for _, c, _ in server.commands()[before:]]
    (ftp_root / "pub" / "a.txt").write_bytes(b"changed content\n")
    proxy_clock.advance(4 * 86400)
    changed = get(larder, url)
    assert changed.body == b"changed content\n" and "fwd-status=200" in cache_status(changed), cache_status(changed)


# -- directories ------------------------------------------------------------------------------


def test_a_directory_is_an_html_listing_with_links_through_the_proxy(larder, ftp_origin):
    server = ftp_origin()
    r = get(larder, server.url("/pub/"))
    assert r.status == 200 and r.header("Content-Type").startswith("text/html"), (r.status, r.body[:300])
    page = r.body.decode()
    base = f"ftp://127.0.0.1:{server.port}/pub/"
    assert f'href="{base}a.txt"' in page and f'href="{base}sub/"' in page
    # A hostile name is escaped in the text and encoded in the link.
    assert "<b>x" not in page and "&lt;b&gt;x&amp;y z.txt" in page
    assert f'href="{base}%3Cb%3Ex&amp;y%20z.txt"' in page  # "&" may stay in a path; escaped in HTML
    assert "MLSD" in commands(server)


def test_a_listing_falls_back_to_list_where_the_server_has_no_mlsd(larder, ftp_origin):
    server = ftp_origin("--no-mlsd", "--no-epsv")
    r = get(larder, server.url("/pub/"))
    assert r.status == 200 and b"a.txt" in r.body
    cmds = commands(server)
    assert "LIST" in cmds and "PASV" in cmds


def test_a_file_request_for_a_directory_is_redirected_to_it(larder, ftp_origin):
    server = ftp_origin()
    r = get(larder, server.url("/pub/sub"))
    assert r.status == 301 and r.header("Location") == server.url("/pub/sub/")


def test_a_client_that_stops_reading_holds_a_bounded_window_of_a_large_file(larder_factory, ftp_origin, ftp_root,
                                                                             memory_bound, report_metric):
    # The gateway reads the data connection only as fast as the answer is taken: a client that
    # reads nothing of a 96 MiB file costs a window, not the file.
    big = ftp_root / "pub" / "huge.bin"
    with open(big, "wb") as f:
        f.truncate(96 << 20)
    larder = larder_factory(config=ADMIN)
    server = ftp_origin()
    before = larder.rss_kib("RssAnon")
    answered = stats(larder)["responses"]["2xx"]
    with RSSSampler(larder, field="RssAnon") as sampler:
        s = socket.create_connection(("127.0.0.1", larder.port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(std_request("GET", server.url("/pub/huge.bin"), [("Host", f"127.0.0.1:{server.port}")]))
        wait_stats(larder, lambda st: st["responses"]["2xx"] >= answered + 1, timeout=10)
        time.sleep(0.5)  # the transfer runs on: sampled meanwhile
        s.close()
    growth_mib = (sampler.peak_kib - before) / 1024
    report_metric(f"a stalled reader of a 96 MiB ftp:// file: RssAnon growth {growth_mib:.1f} MiB")
    assert growth_mib < 48, growth_mib


# -- logins -----------------------------------------------------------------------------------


def test_a_login_from_the_url_or_authorization_works_and_is_neither_cached_nor_logged(
        larder_factory, ftp_origin, tmp_path):
    log = tmp_path / "access.log"
    larder = larder_factory(config={"access_log": str(log)})
    server = ftp_origin("--user", "alice:s3cret")
    url = server.url("/pub/a.txt", userinfo="alice:s3cret")
    for _ in range(2):
        r = get(larder, url)
        assert r.status == 200 and r.body == b"hello from ftp\n"
        assert "hit" not in cache_status(r)
    basic = base64.b64encode(b"alice:s3cret").decode()
    r = get(larder, server.url("/pub/a.txt"), headers=[("Authorization", f"Basic {basic}")])
    assert r.status == 200
    # Each one fetched (a kept control connection may carry more than one).
    assert {a for _, c, a in server.commands() if c == "USER"} == {"alice"}
    assert [c for _, c, _ in server.commands()].count("RETR") == 3
    lines = read_lines(log, 3)
    assert all("s3cret" not in line for line in lines), lines
    assert any(f"ftp://127.0.0.1:{server.port}/pub/a.txt" in line for line in lines), lines


def test_the_ftp_user_with_a_password_is_a_login_of_its_own_never_cached(larder_factory, ftp_origin):
    # "ftp" is a real account on many servers: with a password, its files are not the public ones.
    larder = larder_factory()
    server = ftp_origin("--user", "ftp:s3cret")
    r = get(larder, server.url("/pub/a.txt", userinfo="ftp:s3cret"))
    assert r.status == 200 and "detail=ftp-login" in cache_status(r), cache_status(r)
    anonymous = get(larder, server.url("/pub/a.txt"))
    assert "hit" not in cache_status(anonymous)
    assert [c for _, c, _ in server.commands()].count("RETR") == 2


def test_a_range_with_if_range_is_answered_whole(larder_factory, ftp_origin):
    # The gateway has no validator to compare If-Range with: a resumed download gets the whole
    # file (200) rather than bytes of another version spliced onto its copy.
    larder = larder_factory(config={"cache": {"range_misses": "pieces"}})
    server = ftp_origin()
    r = get(larder, server.url("/pub/a.txt"),
            headers=[("Range", "bytes=6-"), ("If-Range", "Mon, 01 Jan 2001 00:00:00 GMT")])
    assert r.status == 200 and r.body == b"hello from ftp\n"
    assert "REST" not in commands(server)


def test_a_wrong_password_is_401_with_a_basic_challenge(larder, ftp_origin):
    server = ftp_origin("--user", "alice:s3cret")
    r = get(larder, server.url("/pub/a.txt", userinfo="alice:wrong"))
    assert r.status == 401
    assert (r.header("WWW-Authenticate") or "").startswith("Basic realm=")


def test_uploads_and_deletes_are_refused(larder, ftp_origin):
    server = ftp_origin()
    for method in ("PUT", "DELETE", "POST"):
        r = get(larder, server.url("/pub/a.txt"), method=method)
        assert r.status == 405 and r.header("Allow") == "GET, HEAD"
    assert commands(server) == []


# -- hostile servers and clients -------------------------------------------------------------


def test_a_pasv_reply_naming_another_host_is_not_followed(larder):
    # The FTP bounce: the data connection goes to the control connection's address, never to the
    # one the reply names.
    with ScriptedFTPServer(files={"/f.txt": b"bounced?\n"}, pasv_host="127.0.0.2", no_epsv=True) as s:
        r = get(larder, s.url("/f.txt"))
        assert r.status == 200 and r.body == b"bounced?\n"
        assert s.trap_connections == [] and len(s.data_connections) == 1
        assert "PASV" in s.commands()


@pytest.mark.parametrize("path", ["/a%0D%0ADELE%20b", "/a%0ADELE%20b", "/a%00b", "/a%0Db"])
def test_control_bytes_in_a_path_are_refused_before_the_server_hears_of_them(larder, path):
    with ScriptedFTPServer(files={"/a": b"x"}) as s:
        r = get(larder, s.url(path))
        assert r.status == 400, (r.status, r.body)
        assert "DELE" not in s.commands()
        assert not any("\r" in line or "\x00" in line for line in s.lines)


def test_control_bytes_in_credentials_are_refused(larder):
    with ScriptedFTPServer(files={"/a": b"x"}) as s:
        r = get(larder, f"ftp://u%0D%0ASITE%20x:pw@127.0.0.1:{s.port}/a", host=f"127.0.0.1:{s.port}")
        assert r.status == 400
        assert "SITE" not in s.commands()


def test_an_endless_greeting_is_a_502_not_a_hang(larder):
    with ScriptedFTPServer(greeting="endless") as s:
        began = time.monotonic()
        r = get(larder, s.url("/a"))
        assert r.status == 502
        assert time.monotonic() - began < 10


def test_an_endless_listing_is_cut_at_its_bound(larder):
    with ScriptedFTPServer(files={"/d/x": b"x"}, listing="endless") as s:
        r = get(larder, s.url("/d/"))
        assert r.status == 200 and b"cut short" in r.body
        assert r.body.count(b"<a href=") <= 10_001


def test_a_transfer_that_stops_is_cut_and_not_stored(larder_factory):
    # Half the file, then silence with the data connection open: the client's answer is cut
    # (its connection ends short of Content-Length) and nothing is stored.
    larder = larder_factory(config={"session": {"timeout_interval_for_request": "1s"}})
    with ScriptedFTPServer(files={"/big": b"z" * 100_000}, retr="stall") as s:
        with RawClient(larder.port, timeout=20) as c:
            c.sock.sendall(std_request("GET", s.url("/big"), [("Host", f"127.0.0.1:{s.port}")]))
            got = b""
            try:
                while True:
                    chunk = c.sock.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            except ConnectionResetError:
                pass
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"Content-Length: 100000" in head, head
        assert 0 < len(body) < 100_000
        # A stored entry would answer a HEAD itself.
        again = get(larder, s.url("/big"), method="HEAD")
        assert again.status == 200 and "hit" not in cache_status(again), cache_status(again)


def test_a_transfer_longer_than_the_request_timeout_is_whole_while_data_keeps_coming(larder_factory):
    # The control connection is silent for as long as the transfer lasts: only silence on the
    # data connection is timed.
    larder = larder_factory(config={"session": {"timeout_interval_for_request": "2s"}})
    body = bytes(range(256)) * 384  # 96 KiB: 12 pieces a quarter of a second apart, 3 s in all
    with ScriptedFTPServer(files={"/slow": body}, retr="slow", slow_interval=0.25) as s:
        r = get(larder, s.url("/slow"))
        assert r.status == 200 and r.body == body, (r.status, len(r.body))


def test_endless_preliminary_replies_are_a_502_at_once(larder):
    with ScriptedFTPServer(files={"/f": b"x"}, flood_size=True) as s:
        r = get(larder, s.url("/f"))
        assert r.status == 502, (r.status, r.body)


def test_a_passive_port_of_the_proxy_itself_or_below_1024_is_not_connected_to(larder_factory):
    larder = larder_factory(config=ADMIN)
    for port in (larder.port, 22):
        with ScriptedFTPServer(files={"/f": b"secret banner?"}, epsv_port=port) as s:
            r = get(larder, s.url("/f"))
            assert r.status == 502, (port, r.status, r.body)
            assert s.data_connections == []


def test_a_server_that_never_answers_retr_is_a_504(larder_factory):
    larder = larder_factory(config={"session": {"timeout_interval_for_request": "1s"}})
    with ScriptedFTPServer(files={"/f": b"x"}, retr="silent") as s:
        r = get(larder, s.url("/f"))
        assert r.status == 504


def test_a_clients_share_of_requests_at_origins_counts_ftp_requests(larder_factory):
    larder = larder_factory(config=dict(ADMIN, limits={"origin_fetches_per_client": 1}))
    with ScriptedFTPServer(files={"/slow": b"x", "/other": b"y"}, retr="silent") as s:
        netloc = f"127.0.0.1:{s.port}"
        held = RawClient(larder.port, timeout=20)
        held.sock.sendall(std_request("GET", s.url("/slow"), [("Host", netloc)]))
        assert s.wait_for(lambda srv: "RETR" in srv.commands())  # the first is at the server
        r = get(larder, s.url("/other"))
        assert r.status == 429
        held.close()


def test_deny_destinations_applies_to_ftp_hosts(larder_factory, ftp_origin):
    larder = larder_factory(config={"deny_destinations": ["127.0.0.0/8"]})
    server = ftp_origin()
    r = get(larder, server.url("/pub/a.txt"))
    assert r.status == 403
    assert commands(server) == []


def test_a_name_resolving_into_a_denied_network_is_refused_after_the_lookup(larder_factory, ftp_origin):
    larder = larder_factory(config={"deny_destinations": ["127.0.0.0/8"]})
    server = ftp_origin()
    r = get(larder, f"ftp://localhost:{server.port}/pub/a.txt")
    assert r.status == 403 and b"127.0.0.1 is in deny_destinations (127.0.0.0/8)" in r.body, (r.status, r.body)
    assert commands(server) == []


def test_ftp_requests_to_the_proxy_itself_are_refused(larder):
    for url in (f"ftp://127.0.0.1:{larder.port}/", f"ftp://localhost:{larder.port}/x"):
        r = get(larder, url)
        assert r.status == 403 and b"is this proxy itself" in r.body, (url, r.status, r.body)


def test_a_stored_ftp_file_is_purged(larder, ftp_origin):
    server = ftp_origin()
    url = server.url("/pub/a.txt")
    assert get(larder, url).status == 200
    only = [("Cache-Control", "only-if-cached")]
    assert get(larder, url, headers=only).status == 200
    r = get(larder, url, method="PURGE")
    assert r.status == 200 and b"purged" in r.body
    assert get(larder, url, headers=only).status == 504


def test_through_a_parent_proxy_ftp_goes_in_absolute_form_and_the_parent_speaks_ftp(larder_factory, ftp_origin):
    parent = larder_factory(config={"via_name": "parent"}, name="parent")
    child = larder_factory(config={"via_name": "child", "session": {"proxy": parent.proxy_url}}, name="child")
    server = ftp_origin("--user", "alice:s3cret")
    r = get(child, server.url("/pub/a.txt", userinfo="alice:s3cret"))
    assert r.status == 200 and r.body == b"hello from ftp\n"
    assert "parent" in (r.header("Via") or "") and "child" in (r.header("Via") or "")
    assert [a for _, c, a in server.commands() if c == "USER"] == ["alice"]


def test_offline_mode_serves_stored_ftp_files_and_reaches_no_server(larder_factory, ftp_origin, proxy_clock):
    # cache.offline: a stored file is served fresh or stale, a miss is a 504, and the FTP server
    # hears nothing.
    from test_offline import set_offline
    larder = larder_factory(config=ADMIN)
    server = ftp_origin()
    assert get(larder, server.url("/pub/a.txt")).status == 200
    proxy_clock.advance(10 * 86400)  # stale by now
    set_offline(larder, True)
    before = len(server.commands())
    stale = get(larder, server.url("/pub/a.txt"))
    assert stale.status == 200 and stale.body == b"hello from ftp\n" and "stale" in cache_status(stale)
    missing = get(larder, server.url("/pub/data.bin"))
    assert missing.status == 504, (missing.status, missing.body)
    assert len(server.commands()) == before


def test_offline_mode_serves_a_stored_ftp_file(larder_factory, ftp_origin):
    larder = larder_factory(config=ADMIN)
    server = ftp_origin()
    url = server.url("/pub/a.txt")
    assert get(larder, url).status == 200
    server.stop()
    r = get(larder, url, headers=[("Larder-Cache-Policy", "return-cache-data-dont-load")])
    assert r.status == 200 and r.body == b"hello from ftp\n"
    assert stats(larder)["cache_lookups"]["hit"] >= 1
