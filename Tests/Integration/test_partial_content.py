"""Partial content in the cache (RFC 9111 §3.3, §3.4): a 206 is stored as a piece of its
representation, later ranges inside it are hits, and a stored prefix is completed with a request
for the rest (`Range: bytes=N-`, with `If-Range` naming the stored version) — joined only when
both carry the same strong entity tag. The scripted origin answers ranges (`"ranges": true`) and
records what it was asked."""

import pytest

from helpers import RawClient, _read_head as read_head, pattern, proxy_exchange, std_request
from test_admin import stats, wait_stats
from test_cache import cache_status, get, script, seen

SIZE = 40_000
# The admin endpoint tells when the disk writer has committed a piece.
PIECES = {"cache": {"range_misses": "pieces"}, "admin_listen": "127.0.0.1:0"}


def ranged(lr, url, spec, extra=()):
    return get(lr, url, headers=[("Range", f"bytes={spec}"), *extra])


def stored_piece(lr, url, spec, extra=()):
    """A ranged request whose 206 the cache stores, once the disk writer has committed it: with a
    disk, a piece is found only there, and the writer commits after the client has its answer."""
    before = stats(lr)["cache_entries"]["disk"]
    r = ranged(lr, url, spec, extra)
    s = wait_stats(lr, lambda s: s["cache_entries"]["disk"] > before, timeout=10.0)
    assert s["cache_entries"]["disk"] > before, ("piece not stored", r.status, cache_status(r))
    return r


def asked(origin, name):
    """(Range, If-Range) of each request the origin received for /res/NAME."""
    return [(h.get("range"), h.get("if-range")) for _, h in seen(origin, name)]


def ranges_script(workdir, name, etag='"v1"', size=SIZE, **extra):
    headers = [("Cache-Control", "max-age=600")] + ([("ETag", etag)] if etag else [])
    script(workdir, name, headers=headers, body_bytes=size, ranges=True, **extra)


@pytest.fixture
def pieces_larder(larder_factory):
    return larder_factory(config=PIECES)


@pytest.fixture
def fill_larder(larder_factory):
    """The default `range_misses: fill`, with the admin endpoint."""
    return larder_factory(config={"admin_listen": "127.0.0.1:0"})


def test_a_piece_is_stored_and_ranges_inside_it_are_hits(pieces_larder, origin, workdir):
    ranges_script(workdir, "p")
    url = origin.url("/res/p")
    body = pattern(SIZE)
    first = stored_piece(pieces_larder, url, "1000-2999")
    assert first.status == 206 and first.body == body[1000:3000]
    assert first.header("Content-Range") == f"bytes 1000-2999/{SIZE}"
    assert "stored" in cache_status(first), cache_status(first)
    inside = ranged(pieces_larder, url, "1500-1599")
    assert inside.status == 206 and inside.body == body[1500:1600], cache_status(inside)
    assert inside.header("Content-Range") == f"bytes 1500-1599/{SIZE}"
    assert "hit" in cache_status(inside), cache_status(inside)
    # A range past the end is known to be unsatisfiable from the piece's complete length.
    past = ranged(pieces_larder, url, f"{SIZE + 5}-")
    assert past.status == 416 and past.header("Content-Range") == f"bytes */{SIZE}", past.status
    assert asked(origin, "p") == [("bytes=1000-2999", None)]
    # Outside the piece: asked of the origin as sent.
    outside = ranged(pieces_larder, url, "100-199")
    assert outside.status == 206 and outside.body == body[100:200]
    assert asked(origin, "p")[-1] == ("bytes=100-199", None)


def test_a_stored_prefix_is_completed_with_the_rest_and_becomes_a_whole_hit(pieces_larder, origin, workdir):
    ranges_script(workdir, "c")
    url = origin.url("/res/c")
    body = pattern(SIZE)
    assert stored_piece(pieces_larder, url, "0-9999").body == body[:10000]
    whole = get(pieces_larder, url)
    assert whole.status == 200 and whole.body == body, (whole.status, cache_status(whole))
    assert whole.header("Content-Length") == str(SIZE) and whole.header("Content-Range") is None
    assert "fwd=partial" in cache_status(whole) and "detail=completed" in cache_status(whole), cache_status(whole)
    assert asked(origin, "c") == [("bytes=0-9999", None), ("bytes=10000-", '"v1"')]
    again = get(pieces_larder, url)
    assert again.status == 200 and again.body == body and "hit" in cache_status(again), cache_status(again)
    tail = ranged(pieces_larder, url, "-100")
    assert tail.body == body[-100:] and "hit" in cache_status(tail)
    assert len(asked(origin, "c")) == 2


def test_a_completion_of_a_changed_object_gets_the_whole_new_one(pieces_larder, origin, workdir):
    ranges_script(workdir, "chg")
    url = origin.url("/res/chg")
    assert stored_piece(pieces_larder, url, "0-99").body == pattern(SIZE)[:100]
    # A new version: If-Range names the old one, so the origin sends the whole new object.
    ranges_script(workdir, "chg", etag='"v2"', size=SIZE + 1)
    whole = get(pieces_larder, url)
    assert whole.status == 200 and whole.body == pattern(SIZE + 1), (whole.status, cache_status(whole))
    assert asked(origin, "chg") == [("bytes=0-99", None), ("bytes=100-", '"v1"')]
    again = get(pieces_larder, url)
    assert again.body == pattern(SIZE + 1) and "hit" in cache_status(again), cache_status(again)
    assert again.header("ETag") == '"v2"'


def test_the_rest_of_another_version_is_never_joined(pieces_larder, origin, workdir):
    """An origin that ignores If-Range sends the rest of its new version: joined to the stored
    prefix it would make a body of two versions. The prefix is dropped and the whole asked for."""
    ranges_script(workdir, "mix")
    url = origin.url("/res/mix")
    assert stored_piece(pieces_larder, url, "0-99").status == 206
    script(workdir, "mix", headers=[("Cache-Control", "max-age=600"), ("ETag", '"v2"')], body="N" * SIZE,
           ranges=True, ignore_if_range=True)
    whole = get(pieces_larder, url)
    assert whole.status == 200 and whole.body == b"N" * SIZE, (whole.status, whole.body[:120])
    assert "piece-replaced" in cache_status(whole), cache_status(whole)
    assert asked(origin, "mix") == [("bytes=0-99", None), ("bytes=100-", '"v1"'), (None, None)]
    again = get(pieces_larder, url)
    assert again.body == b"N" * SIZE and "hit" in cache_status(again), cache_status(again)


def test_a_prefix_without_a_strong_validator_is_not_completed(pieces_larder, origin, workdir):
    """Joining needs the same strong tag on both parts (RFC 9110 §15.3.7.3): without one the rest
    could never be used, so the whole is asked for at once, as on a miss."""
    for name, etag in (("none", None), ("weak", 'W/"v1"')):
        ranges_script(workdir, name, etag=etag)
        url = origin.url(f"/res/{name}")
        assert ranged(pieces_larder, url, "0-99").status == 206
        whole = get(pieces_larder, url)
        assert whole.status == 200 and whole.body == pattern(SIZE), (name, whole.status, cache_status(whole))
        assert asked(origin, name) == [("bytes=0-99", None), (None, None)], name
        assert "hit" in cache_status(get(pieces_larder, url)), name


def test_a_rest_that_is_not_joined_is_not_read_to_its_end(pieces_larder, origin, workdir):
    """A 206 of another version is dropped at its head: the whole is asked for without waiting for
    the unusable rest (here 32 MiB the origin sends slowly) to arrive."""
    big = 32 << 20
    ranges_script(workdir, "slow", size=big)
    url = origin.url("/res/slow")
    assert stored_piece(pieces_larder, url, "0-1023").status == 206
    ranges_script(workdir, "slow", etag='"v2"', size=big, ignore_if_range=True, rate=1 << 20)
    # Paced at 1 MiB/s the rest would take half a minute; the whole is asked for with Range dropped,
    # so the origin script answers it whole (at the same pace, but only its first bytes are needed).
    client = RawClient(pieces_larder.port, timeout=20)
    client.send(std_request("GET", url))
    head = read_head(client.reader)
    assert head.status == 200 and "piece-replaced" in (head.header("Cache-Status") or ""), head.status
    client.close()
    assert asked(origin, "slow")[:3] == [("bytes=0-1023", None), ("bytes=1024-", '"v1"'), (None, None)]


def test_a_completion_answered_with_a_labelled_fragment_is_not_stored_as_the_whole(pieces_larder, origin, workdir):
    """A 200 that carries Content-Range in answer to the rest: perhaps a piece labelled whole. It is
    not relayed as the whole nor stored; the whole is asked for again."""
    ranges_script(workdir, "label")
    url = origin.url("/res/label")
    assert stored_piece(pieces_larder, url, "0-99").status == 206
    script(workdir, "label", headers=[("Cache-Control", "max-age=600"), ("ETag", '"v1"'),
                                      ("Content-Range", f"bytes 100-{SIZE - 1}/{SIZE}")], body="F" * (SIZE - 100))
    r = get(pieces_larder, url)
    assert r.status == 200 and "piece-replaced" in cache_status(r), cache_status(r)
    # Asked for again without Range: what the origin answers to that is its whole.
    assert asked(origin, "label") == [("bytes=0-99", None), ("bytes=100-", '"v1"'), (None, None)]


def test_the_client_gets_its_own_cookie_and_no_store_keeps_the_piece(pieces_larder, origin, workdir):
    script(workdir, "own", headers=[("Cache-Control", "max-age=600"), ("ETag", '"v1"'), ("Set-Cookie", "sid=abc")],
           body_bytes=SIZE, ranges=True)
    url = origin.url("/res/own")
    assert stored_piece(pieces_larder, url, "0-99").status == 206
    # A request that may not be stored still gets the joined whole, and the piece stays.
    whole = get(pieces_larder, url, headers=[("Cache-Control", "no-store")])
    assert whole.status == 200 and whole.body == pattern(SIZE) and "detail=completed" in cache_status(whole)
    assert whole.header("Set-Cookie") == "sid=abc"
    inside = ranged(pieces_larder, url, "10-19")
    assert inside.body == pattern(SIZE)[10:20] and "hit" in cache_status(inside), cache_status(inside)
    assert inside.header("Set-Cookie") is None
    stored = get(pieces_larder, url)
    assert stored.header("Set-Cookie") == "sid=abc" and "detail=completed" in cache_status(stored)
    assert get(pieces_larder, url).header("Set-Cookie") is None  # the hit: the cookie was never stored


def test_a_reload_never_uses_the_stored_prefix(pieces_larder, origin, workdir):
    ranges_script(workdir, "reload")
    url = origin.url("/res/reload")
    ranged(pieces_larder, url, "0-99")
    r = get(pieces_larder, url, headers=[("Larder-Cache-Policy", "reload-ignoring-local-cache-data")])
    assert r.status == 200 and r.body == pattern(SIZE)
    assert asked(origin, "reload") == [("bytes=0-99", None), (None, None)]


def test_a_piece_the_client_did_not_ask_for_is_never_stored(larder, origin, workdir, proxy_clock):
    """A stale whole entry is revalidated without Range; an origin answering that with a 206 has its
    piece relayed but never stored in place of the whole."""
    script(workdir, "unasked2", headers=[("Cache-Control", "max-age=1")], body="0123456789")
    url = origin.url("/res/unasked2")
    assert get(larder, url).body == b"0123456789"
    proxy_clock.advance(5)
    script(workdir, "unasked2", status=206, headers=[("Cache-Control", "max-age=600"),
                                                     ("Content-Range", "bytes 0-4/10")], body="01234")
    ranged(larder, url, "1-3")
    r = ranged(larder, url, "1-3")
    assert "hit" not in cache_status(r), cache_status(r)


def test_a_whole_answer_to_a_range_is_stored_as_the_whole(pieces_larder, origin, workdir):
    ranges_script(workdir, "all", size=5000)
    url = origin.url("/res/all")
    first = ranged(pieces_larder, url, "0-")
    assert first.status == 206 and first.header("Content-Range") == "bytes 0-4999/5000"
    whole = get(pieces_larder, url)
    assert whole.status == 200 and whole.body == pattern(5000) and "hit" in cache_status(whole), cache_status(whole)
    assert whole.header("Content-Range") is None
    assert len(asked(origin, "all")) == 1


def test_offline_or_only_if_cached_never_completes_a_prefix(pieces_larder, origin, workdir):
    ranges_script(workdir, "off")
    url = origin.url("/res/off")
    stored_piece(pieces_larder, url, "0-99")
    r = get(pieces_larder, url, headers=[("Cache-Control", "only-if-cached")])
    assert r.status == 504, r.status
    inside = ranged(pieces_larder, url, "10-19", extra=[("Cache-Control", "only-if-cached")])
    assert inside.status == 206 and inside.body == pattern(SIZE)[10:20]
    assert len(asked(origin, "off")) == 1


def test_hostile_pieces_are_never_stored(pieces_larder, origin, workdir):
    """A 206 is stored only as exactly the bytes one `Content-Range` names of a known length."""
    cases = {
        "short": [("Content-Range", "bytes 0-9/100")],             # 5 bytes said to be 10
        "unknown": [("Content-Range", "bytes 0-4/*")],
        "two": [("Content-Range", "bytes 0-4/100"), ("Content-Range", "bytes 5-9/100")],
        "inverted": [("Content-Range", "bytes 4-0/100")],
        "beyond": [("Content-Range", "bytes 0-4/3")],
        "spaced": [("Content-Range", "bytes 0 - 4/100")],
        "unit": [("Content-Range", "items 0-4/100")],
        "huge": [("Content-Range", "bytes 0-4/99999999999999999999999")],
        "multipart": [("Content-Type", "multipart/byteranges; boundary=x")],
    }
    for name, fields in cases.items():
        script(workdir, name, status=206, headers=[("Cache-Control", "max-age=600"), ("ETag", '"v1"')] + fields,
               body="01234")
        url = origin.url(f"/res/{name}")
        for _ in range(2):
            r = ranged(pieces_larder, url, "0-4")
            assert "hit" not in cache_status(r), (name, cache_status(r))
        assert len(seen(origin, name)) == 2, name
        # Nor does a request for the whole use it.
        get(pieces_larder, url)
        assert len(seen(origin, name)) == 3, name


def test_a_piece_never_takes_the_place_of_a_whole_entry(pieces_larder, origin, workdir):
    ranges_script(workdir, "keep")
    url = origin.url("/res/keep")
    assert get(pieces_larder, url).body == pattern(SIZE)
    # A reload with a range goes to the origin, whose 206 must not replace the whole stored object.
    r = ranged(pieces_larder, url, "0-99", extra=[("Larder-Cache-Policy", "reload-ignoring-local-cache-data")])
    assert r.status == 206 and "hit" not in cache_status(r), cache_status(r)
    whole = get(pieces_larder, url)
    assert whole.status == 200 and whole.body == pattern(SIZE) and "hit" in cache_status(whole), cache_status(whole)


def test_range_fill_stores_no_piece_an_origin_sends_unasked(larder, origin, workdir):
    """With `range_misses: fill` Larder asks for the whole object; a 206 in answer (a broken origin
    that answers a range nobody sent) is relayed but never stored."""
    script(workdir, "unasked", status=206, headers=[("Cache-Control", "max-age=600"), ("Content-Range", "bytes 0-4/10")],
           body="01234")
    url = origin.url("/res/unasked")
    assert ranged(larder, url, "0-4").status == 206
    assert "hit" not in cache_status(ranged(larder, url, "0-4"))
    assert [h.get("range") for _, h in seen(origin, "unasked")] == [None, None]


def test_a_resumed_download_stores_its_piece_with_range_fill(fill_larder, origin, workdir):
    """With the default `fill`, a range with `If-Range` (a resumed download) is asked as sent; its
    206 is stored, and a later range inside it is a hit."""
    ranges_script(workdir, "resume")
    url = origin.url("/res/resume")
    first = stored_piece(fill_larder, url, "30000-", extra=[("If-Range", '"v1"')])
    assert first.status == 206 and first.body == pattern(SIZE)[30000:]
    inside = ranged(fill_larder, url, "35000-35999")
    assert inside.body == pattern(SIZE)[35000:36000] and "hit" in cache_status(inside), cache_status(inside)
    assert asked(origin, "resume") == [("bytes=30000-", '"v1"')]
    proxy_exchange(fill_larder.port, "GET", url)  # not a prefix: fetched whole
    assert asked(origin, "resume")[-1] == (None, None)
