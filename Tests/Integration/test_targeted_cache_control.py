"""RFC 9213 targeted cache control: in reverse mode Larder is the origin's own cache, and
`CDN-Cache-Control` (or the fields `cache.targeted_cache_control` lists) governs its freshness and
storability instead of `Cache-Control`; clients get every field unchanged."""

from helpers import RawClient, build_request, proxy_exchange
from test_cache import cache_status, methods, script


def reverse(larder_factory, origin, **config):
    return larder_factory(config=config, args=["--reverse-origin", f"http://127.0.0.1:{origin.port}"])


def get(lr, path, host="site.example"):
    with RawClient(lr.port) as c:
        c.send(build_request("GET", path, [("Host", host)]))
        return c.response()


def test_cdn_cache_control_governs_larder_in_reverse_mode(larder_factory, origin, workdir):
    script(workdir, "cdn", headers=[("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60")],
           body="for the edge")
    lr = reverse(larder_factory, origin)
    first = get(lr, "/res/cdn")
    assert first.status == 200 and "stored" in cache_status(first), cache_status(first)
    again = get(lr, "/res/cdn")
    assert again.body == b"for the edge" and cache_status(again).startswith("larder; hit"), cache_status(again)
    # Both fields reach the client unchanged: browsers still obey Cache-Control.
    assert again.header("Cache-Control") == "no-store"
    assert again.header("CDN-Cache-Control") == "max-age=60"
    assert methods(origin, "cdn") == ["GET"]


def test_cdn_cache_control_can_also_forbid_what_cache_control_allows(larder_factory, origin, workdir):
    script(workdir, "cdnno", headers=[("Cache-Control", "max-age=600"), ("CDN-Cache-Control", "no-store")], body="x")
    lr = reverse(larder_factory, origin)
    get(lr, "/res/cdnno")
    get(lr, "/res/cdnno")
    assert methods(origin, "cdnno") == ["GET", "GET"]


def test_the_target_list_is_configurable_and_ordered(larder_factory, origin, workdir):
    script(workdir, "ours", headers=[("Cache-Control", "no-store"), ("CDN-Cache-Control", "no-store"),
                                     ("Larder-Cache-Control", "max-age=60")], body="ours")
    lr = reverse(larder_factory, origin,
                 cache={"targeted_cache_control": ["Larder-Cache-Control", "CDN-Cache-Control"]})
    get(lr, "/res/ours")
    assert cache_status(get(lr, "/res/ours")).startswith("larder; hit")
    assert methods(origin, "ours") == ["GET"]


def test_an_empty_targeted_field_falls_back_to_cache_control(larder_factory, origin, workdir):
    script(workdir, "empty", headers=[("Cache-Control", "max-age=60"), ("CDN-Cache-Control", " ")], body="x")
    lr = reverse(larder_factory, origin)
    get(lr, "/res/empty")
    assert cache_status(get(lr, "/res/empty")).startswith("larder; hit")


def test_forward_mode_ignores_targeted_fields_by_default(larder, origin, workdir):
    script(workdir, "fwd", headers=[("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60")], body="x")
    url = origin.url("/res/fwd")
    proxy_exchange(larder.port, "GET", url)
    r = proxy_exchange(larder.port, "GET", url)
    assert "hit" not in cache_status(r)
    assert methods(origin, "fwd") == ["GET", "GET"]


def test_the_targeted_field_is_off_in_reverse_mode_when_listed_empty(larder_factory, origin, workdir):
    script(workdir, "off", headers=[("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60")], body="x")
    lr = reverse(larder_factory, origin, cache={"targeted_cache_control": []})
    get(lr, "/res/off")
    get(lr, "/res/off")
    assert methods(origin, "off") == ["GET", "GET"]


def test_a_field_the_targeted_field_keeps_private_stays_out_when_the_entry_is_freshened(larder_factory, origin,
                                                                                         workdir):
    # Kept out of the stored head by CDN-Cache-Control's private="X-Session" when stored; the
    # HEAD that revalidates it carries the field again, and freshening must keep it out too, or the
    # next client is served the session of whoever's request revalidated it.
    script(workdir, "sess", headers=[("Cache-Control", "no-store"), ("ETag", '"s1"'),
                                     ("CDN-Cache-Control", 'max-age=0, private="X-Session"'),
                                     ("X-Session", "first-client")], body="page")
    lr = reverse(larder_factory, origin)
    first = get(lr, "/res/sess")
    assert "stored" in cache_status(first) and first.header("X-Session") == "first-client", cache_status(first)
    script(workdir, "sess", headers=[("Cache-Control", "no-store"), ("ETag", '"s1"'),
                                     ("CDN-Cache-Control", 'max-age=60, private="X-Session"'),
                                     ("X-Session", "second-client")], body="page")
    second = get(lr, "/res/sess")
    assert "revalidated" in cache_status(second), cache_status(second)
    third = get(lr, "/res/sess")
    assert cache_status(third).startswith("larder; hit"), cache_status(third)
    assert third.header("X-Session") is None, third.header("X-Session")
    assert methods(origin, "sess") == ["GET", "HEAD"]


def test_a_field_cache_control_keeps_private_is_never_shared_when_a_targeted_field_governs(larder_factory, origin,
                                                                                           workdir):
    # CDN-Cache-Control decides freshness and storability, but Cache-Control's private="X-Session"
    # still says the field is the first client's: neither the first store, nor a collapsed
    # follower, nor a revalidation may hand it to anyone else (freshening already kept it out).
    script(workdir, "csess", headers=[("Cache-Control", 'max-age=60, private="X-Session"'), ("ETag", '"c1"'),
                                      ("CDN-Cache-Control", "max-age=60"), ("X-Session", "first-client")],
           body="page")
    lr = reverse(larder_factory, origin)
    first = get(lr, "/res/csess")
    assert "stored" in cache_status(first) and first.header("X-Session") == "first-client", cache_status(first)
    second = get(lr, "/res/csess")
    assert cache_status(second).startswith("larder; hit"), cache_status(second)
    assert second.header("X-Session") is None, second.header("X-Session")
    assert second.body == b"page"
    assert methods(origin, "csess") == ["GET"]


def test_an_invalid_targeted_field_is_ignored_as_a_whole(larder_factory, origin, workdir):
    # RFC 9213 §2.1: a value that is not a Structured Field Dictionary, or gives a known directive
    # the wrong type, is as if absent: Cache-Control decides, and no part of the field is honoured.
    script(workdir, "badsyntax", headers=[("Cache-Control", "max-age=600"), ("CDN-Cache-Control", "no-store, max-age =0")],
           body="x")
    script(workdir, "badtype", headers=[("Cache-Control", "no-store"), ("CDN-Cache-Control", 'max-age="600"')], body="y")
    script(workdir, "unknowntype", headers=[("Cache-Control", "max-age=600"), ("CDN-Cache-Control", "no-store, a=@x")],
           body="z")
    lr = reverse(larder_factory, origin)
    for name in ("badsyntax", "badtype", "unknowntype"):
        get(lr, f"/res/{name}")
        get(lr, f"/res/{name}")
    # Cache-Control's max-age=600 held despite the field's no-store; its no-store despite max-age.
    assert methods(origin, "badsyntax") == ["GET"]
    assert methods(origin, "badtype") == ["GET", "GET"]
    assert methods(origin, "unknowntype") == ["GET"]
