"""How the cache reads what it is sent: `Age` lists, spellings of Vary-selected fields, and the
`Cache-Status` Larder puts on every response, its own answers included, under its `via_name`.

Each test runs the real binary against a scripted origin (``/res/NAME`` answers from
``res-NAME.json`` in the test's directory).
"""

import pytest

from helpers import RawClient, free_port
from test_admin import ADMIN, wait_stats
from test_cache import cache_status, get, methods, script


# --- Age -------------------------------------------------------------------------------------


def test_age_list_is_read_by_its_first_member_stale_on_arrival(larder, origin, workdir):
    # Age: 7200 (the first member) is over max-age=3600: stale at once, so the next use revalidates.
    script(workdir, "agelist", headers=[("Cache-Control", "max-age=3600"), ("Age", "7200, 0"), ("ETag", '"a"')],
           body="aged", conditional=True)
    url = origin.url("/res/agelist")
    assert get(larder, url).body == b"aged"
    second = get(larder, url)
    assert second.body == b"aged"
    assert "fwd=stale" in cache_status(second), cache_status(second)
    assert methods(origin, "agelist") == ["GET", "HEAD"]


def test_age_list_with_a_small_first_member_is_fresh(larder, origin, workdir):
    script(workdir, "agelow", headers=[("Cache-Control", "max-age=3600"), ("Age", "0, 7200")], body="young")
    url = origin.url("/res/agelow")
    get(larder, url)
    second = get(larder, url)
    assert second.body == b"young" and "; hit" in cache_status(second), cache_status(second)
    assert int(second.header("Age")) < 60
    assert methods(origin, "agelow") == ["GET"]


def test_first_of_two_age_lines_wins(larder, origin, workdir):
    script(workdir, "agetwo", headers=[("Cache-Control", "max-age=3600"), ("Age", "7200"), ("Age", "0")],
           body="two", conditional=True)
    url = origin.url("/res/agetwo")
    get(larder, url)
    assert "fwd=stale" in cache_status(get(larder, url))


def test_invalid_first_age_member_is_ignored(larder, origin, workdir):
    # RFC 9111 §5.1: an invalid Age is ignored, not replaced by a later member.
    script(workdir, "agebad", headers=[("Cache-Control", "max-age=3600"), ("Age", "soon, 7200")], body="bad")
    url = origin.url("/res/agebad")
    get(larder, url)
    second = get(larder, url)
    assert "; hit" in cache_status(second), cache_status(second)
    assert int(second.header("Age")) < 60


# --- Vary ------------------------------------------------------------------------------------


@pytest.mark.parametrize("second_spelling", ["br,gzip", " BR , GZIP", "gzip,br"])
def test_vary_accept_encoding_spellings_share_a_variant(larder, origin, workdir, second_spelling):
    script(workdir, "vae", headers=[("Cache-Control", "max-age=60"), ("Vary", "Accept-Encoding")], body="coded")
    url = origin.url("/res/vae")
    first = get(larder, url, headers=[("Accept-Encoding", "gzip, br")])
    assert "fwd=uri-miss" in cache_status(first)
    second = get(larder, url, headers=[("Accept-Encoding", second_spelling)])
    assert second.body == b"coded" and "; hit" in cache_status(second), cache_status(second)
    assert methods(origin, "vae") == ["GET"]


def test_vary_accept_language_order_and_case_share_a_variant(larder, origin, workdir):
    script(workdir, "val", headers=[("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")], body="lang")
    url = origin.url("/res/val")
    get(larder, url, headers=[("Accept-Language", "en-GB, fr;q=0.5")])
    second = get(larder, url, headers=[("Accept-Language", "FR ; q=0.5,en-gb")])
    assert "; hit" in cache_status(second), cache_status(second)
    different = get(larder, url, headers=[("Accept-Language", "en-GB, fr;q=0.9")])
    assert "; hit" not in cache_status(different), cache_status(different)
    assert methods(origin, "val") == ["GET", "GET"]


def test_vary_on_an_unknown_field_keeps_order_and_case_significant(larder, origin, workdir):
    script(workdir, "vxo", headers=[("Cache-Control", "max-age=60"), ("Vary", "X-Flavour")], body="flavour")
    url = origin.url("/res/vxo")
    get(larder, url, headers=[("X-Flavour", "a, b")])
    assert "; hit" in cache_status(get(larder, url, headers=[("X-Flavour", "a,b")]))
    assert "; hit" not in cache_status(get(larder, url, headers=[("X-Flavour", "b, a")]))
    assert "; hit" not in cache_status(get(larder, url, headers=[("X-Flavour", "A, B")]))
    assert methods(origin, "vxo") == ["GET", "GET", "GET"]


def test_collapsed_follower_with_another_spelling_shares_the_fetch(larder_factory, origin, workdir):
    larder = larder_factory(config=ADMIN)
    script(workdir, "vcol", headers=[("Cache-Control", "max-age=60"), ("Vary", "Accept-Encoding")], body="slow",
           pause_after=1, pause_until="vcol")
    url = origin.url("/res/vcol")
    with RawClient(larder.port, 15) as a, RawClient(larder.port, 15) as b:
        a.send(f"GET {url} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip, br\r\n\r\n".encode())
        # The leader's head is out once the first body byte is: the follower then joins, and the
        # origin sends the rest.
        a.reader._fill()
        b.send(f"GET {url} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: BR,gzip\r\n\r\n".encode())
        wait_stats(larder, lambda s: s["collapsed_requests"] >= 1)
        origin.open_gate("vcol")
        ra, rb = a.response(), b.response()
    assert ra.body == b"slow" and rb.body == b"slow"
    assert methods(origin, "vcol") == ["GET"], cache_status(rb)


# --- Cache-Status on every response, under via_name ------------------------------------------

NAMED = {"via_name": "edge-7"}


def test_hits_and_misses_name_the_cache_by_via_name(larder_factory, origin, workdir):
    lr = larder_factory(config=NAMED)
    script(workdir, "named", headers=[("Cache-Control", "max-age=60")], body="n")
    url = origin.url("/res/named")
    assert cache_status(get(lr, url)).startswith("edge-7; fwd=uri-miss; fwd-status=200; stored")
    assert cache_status(get(lr, url)).startswith("edge-7; hit; ttl=")
    assert cache_status(get(lr, url, method="POST")).startswith("edge-7; fwd=method; fwd-status=200")


def test_chained_larders_are_told_apart(larder_factory, origin, workdir):
    parent = larder_factory(config={"via_name": "parent"}, name="parent")
    child = larder_factory(config={"via_name": "child", "session": {"proxy": parent.proxy_url}}, name="child")
    script(workdir, "chain", headers=[("Cache-Control", "max-age=60")], body="c")
    url = origin.url("/res/chain")
    miss = get(child, url)
    assert [v.split(";")[0] for v in miss.all("Cache-Status")] == ["parent", "child"], miss.all("Cache-Status")
    hit = get(child, url)
    assert hit.all("Cache-Status")[-1].startswith("child; hit"), hit.all("Cache-Status")


def test_denied_destination_403_carries_cache_status(larder_factory):
    lr = larder_factory(config=dict(NAMED, deny_destinations=["*.blocked.test"]))
    r = get(lr, "http://www.blocked.test/x")
    assert r.status == 403
    assert cache_status(r) == "edge-7; detail=denied", r.headers


def test_bad_request_400_carries_cache_status(larder_factory):
    lr = larder_factory(config=NAMED)
    with RawClient(lr.port, 10) as c:
        c.send(b"GET /not-absolute HTTP/1.1\r\nHost: example.com\r\n\r\n")
        r = c.response()
    assert r.status == 400
    assert cache_status(r) == "edge-7; detail=bad-request", r.headers


def test_malformed_head_400_carries_cache_status(larder_factory):
    lr = larder_factory(config=NAMED)
    with RawClient(lr.port, 10) as c:
        c.send(b"GET http://example.com/ HTTP/1.1\r\nHost example.com\r\n\r\n")
        r = c.response()
    assert r.status == 400
    assert cache_status(r) == "edge-7; detail=bad-request", r.headers


def test_refused_origin_502_carries_cache_status_with_the_lookup(larder_factory):
    lr = larder_factory(config=NAMED)
    r = get(lr, f"http://127.0.0.1:{free_port()}/gone")
    assert r.status == 502
    assert cache_status(r) == "edge-7; fwd=uri-miss; detail=origin-error", r.headers


def test_refused_origin_502_for_an_unsafe_method(larder_factory):
    lr = larder_factory(config=NAMED)
    r = get(lr, f"http://127.0.0.1:{free_port()}/gone", method="DELETE")
    assert r.status == 502
    assert cache_status(r) == "edge-7; fwd=method; detail=origin-error", r.headers


def test_only_if_cached_miss_504_carries_cache_status(larder_factory, origin, workdir):
    lr = larder_factory(config=NAMED)
    script(workdir, "oic", headers=[("Cache-Control", "max-age=60")])
    r = get(lr, origin.url("/res/oic"), headers=[("Cache-Control", "only-if-cached")])
    assert r.status == 504
    assert cache_status(r) == "edge-7; detail=only-if-cached", r.headers
    assert methods(origin, "oic") == []


def test_bad_cache_policy_header_400_carries_cache_status(larder_factory, origin):
    lr = larder_factory(config=NAMED)
    r = get(lr, origin.url("/bytes/1"), headers=[("Larder-Cache-Policy", "sometimes")])
    assert r.status == 400 and cache_status(r) == "edge-7; detail=bad-request", r.headers


def test_connect_port_403_and_tunnel_200_carry_cache_status(larder_factory, echo_server):
    lr = larder_factory(config=dict(NAMED, connect_ports=[echo_server.port]))
    with RawClient(lr.port, 10) as c:
        c.send(b"CONNECT 127.0.0.1:25 HTTP/1.1\r\nHost: 127.0.0.1:25\r\n\r\n")
        denied = c.response(method="CONNECT")
    assert denied.status == 403 and cache_status(denied) == "edge-7; detail=denied", denied.headers
    with RawClient(lr.port, 10) as c:
        c.send(f"CONNECT 127.0.0.1:{echo_server.port} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        r = c.response(method="CONNECT")
    assert r.status == 200 and cache_status(r) == "edge-7; fwd=method; detail=tunnel", r.headers


def test_local_options_and_trace_carry_cache_status(larder_factory, origin):
    lr = larder_factory(config=NAMED)
    opts = get(lr, origin.url("/"), method="OPTIONS", headers=[("Max-Forwards", "0")])
    assert opts.status == 200 and cache_status(opts) == "edge-7; detail=local", opts.headers
    trace = get(lr, origin.url("/"), method="TRACE", headers=[("Max-Forwards", "0")])
    assert trace.status == 200 and cache_status(trace) == "edge-7; detail=local", trace.headers
    forwarded = get(lr, origin.url("/status/200"), method="OPTIONS")
    assert cache_status(forwarded) == "edge-7; fwd=method; fwd-status=200", forwarded.headers


def test_too_many_connections_429_carries_cache_status(larder_factory):
    lr = larder_factory(config=dict(NAMED, workers=1, limits={"max_connections_per_client": 1}))
    with RawClient(lr.port, 10) as held, RawClient(lr.port, 10) as refused:
        r = refused.response()
        assert r.status == 429 and cache_status(r) == "edge-7; detail=too-many-connections", r.headers
        held.close()


# --- Framing the origin chooses (RFC 9112 §6.3) --------------------------------------------------


@pytest.mark.parametrize("coding", ["x-test-coding", "identity", "identity, x-other"])
def test_a_transfer_coding_that_does_not_end_in_chunked_is_read_until_close_and_stored_without_it(
        larder, origin, workdir, coding):
    # §6.3 item 4: the body ends with the connection, which is not reused; the coding (one Larder
    # cannot name, so one that changes no bytes it could undo) is hop-by-hop: never stored.
    script(workdir, "tecoding", headers=[("Cache-Control", "max-age=3600"), ("Transfer-Encoding", coding)],
           body="whole body, ended by the close", close_delimited=True)
    url = origin.url("/res/tecoding")
    first = get(larder, url)
    assert first.status == 200 and first.body == b"whole body, ended by the close"
    assert first.header("Transfer-Encoding") in (None, "chunked"), first.header("Transfer-Encoding")
    assert "stored" in cache_status(first), cache_status(first)
    hit = get(larder, url)
    assert cache_status(hit).startswith("larder; hit"), cache_status(hit)
    assert hit.body == b"whole body, ended by the close" and hit.header("Transfer-Encoding") is None
    assert methods(origin, "tecoding") == ["GET"]


@pytest.mark.parametrize("coding", ["gzip", "x-gzip", "br, chunked", "xz", "chunked, x-other", "chunked;x=1, chunked",
                                    '"gzip", chunked'])
def test_a_transfer_coding_larder_cannot_undo_or_read_is_refused(larder, origin, workdir, coding):
    # Relaying compressed bytes without the coding that says so would hand clients garbage as plain;
    # a coding after chunked leaves no framing to read; a quoted coding is no coding.
    script(workdir, "tegzip", headers=[("Cache-Control", "max-age=3600"), ("Transfer-Encoding", coding)],
           body="\x1f\x8b not really", close_delimited=True)
    resp = get(larder, origin.url("/res/tegzip"))
    assert resp.status == 502, resp.status


def test_a_200_with_content_range_is_stored_like_any_200(larder, origin, workdir):
    # RFC 9110 §14.4 gives Content-Range no meaning in a 200: the field is kept, the answer stored.
    script(workdir, "crange", headers=[("Cache-Control", "max-age=3600"), ("Content-Range", "bytes 0-4/10")],
           body="0123456789")
    url = origin.url("/res/crange")
    assert "stored" in cache_status(get(larder, url))
    hit = get(larder, url)
    assert cache_status(hit).startswith("larder; hit"), cache_status(hit)
    assert hit.status == 200 and hit.body == b"0123456789" and hit.header("Content-Range") == "bytes 0-4/10"
    # A range of it is cut from the stored 200 with a Content-Range of its own.
    part = get(larder, url, headers=[("Range", "bytes=2-3")])
    assert part.status == 206 and part.body == b"23" and part.header("Content-Range") == "bytes 2-3/10"
    assert methods(origin, "crange") == ["GET"]


def test_a_200_with_content_range_answering_a_range_is_not_stored(larder, origin, workdir):
    # A broken origin labelling the piece it sent as a 200: stored, it would be served as the whole.
    script(workdir, "crpiece", headers=[("Cache-Control", "max-age=3600"), ("ETag", '"v"'),
                                        ("Content-Range", "bytes 90-99/100")], body="0123456789")
    url = origin.url("/res/crpiece")
    first = get(larder, url, headers=[("Range", "bytes=90-99"), ("If-Range", '"v"')])
    assert first.status == 200 and "stored" not in cache_status(first), cache_status(first)
    again = get(larder, url)
    assert not cache_status(again).startswith("larder; hit"), cache_status(again)
