"""A POST's answer reused for its target (RFC 9110 §9.3.3, RFC 9111 §4): stored when it has explicit
freshness and a `Content-Location` naming the POST's own target, in place of what was stored for
that URL; any other POST answer only invalidates the URL (RFC 9111 §4.4)."""

from helpers import proxy_exchange
from test_cache import cache_status, get, methods, script


def post(lr, url, body=b"form=1", headers=()):
    return proxy_exchange(lr.port, "POST", url, headers=[("Content-Type", "text/plain"), *headers], body=body,
                          timeout=15)


def test_a_post_answer_naming_its_target_is_reused_for_a_get(larder, origin, workdir):
    script(workdir, "p", headers=[("Cache-Control", "max-age=600"), ("Content-Location", "/res/p")], body="posted")
    url = origin.url("/res/p")
    first = post(larder, url)
    assert first.status == 200 and first.body == b"posted"
    assert "stored" in cache_status(first), cache_status(first)
    again = get(larder, url)
    assert again.body == b"posted" and "hit" in cache_status(again), cache_status(again)
    head = proxy_exchange(larder.port, "HEAD", url)
    assert head.status == 200 and "hit" in cache_status(head), cache_status(head)
    assert methods(origin, "p") == ["POST"]


def test_an_absolute_content_location_naming_the_target_counts(larder, origin, workdir):
    url = origin.url("/res/abs?q=1")
    script(workdir, "abs", headers=[("Cache-Control", "max-age=600"), ("Content-Location", url)], body="posted")
    post(larder, url)
    assert "hit" in cache_status(get(larder, url))
    assert methods(origin, "abs") == ["POST"]


def test_a_post_answer_replaces_what_was_stored_for_its_target(larder, origin, workdir):
    script(workdir, "swap", headers=[("Cache-Control", "max-age=600")], body="old")
    url = origin.url("/res/swap")
    assert get(larder, url).body == b"old" and "hit" in cache_status(get(larder, url))
    script(workdir, "swap", headers=[("Cache-Control", "max-age=600"), ("Content-Location", "")], body="new")
    post(larder, url)
    again = get(larder, url)
    assert again.body == b"new" and "hit" in cache_status(again), cache_status(again)
    assert methods(origin, "swap") == ["GET", "POST"]


def test_post_answers_that_do_not_name_their_target_only_invalidate(larder, origin, workdir):
    """Another URI (same origin or another: an answer stored for a URI the body was not sent to
    would let one client's POST choose what everyone gets there), no explicit freshness, several
    Content-Location fields, an error, credentials: nothing stored, the URL invalidated."""
    victim = origin.url("/res/victim")
    script(workdir, "victim", headers=[("Cache-Control", "max-age=600")], body="victim")
    cases = {
        "other": [("Cache-Control", "max-age=600"), ("Content-Location", "/res/victim")],
        "elsewhere": [("Cache-Control", "max-age=600"), ("Content-Location", "http://127.0.0.2/res/elsewhere")],
        "nofresh": [("Content-Location", "/res/nofresh"), ("ETag", '"a"')],
        "twice": [("Cache-Control", "max-age=600"), ("Content-Location", "/res/twice"), ("Content-Location", "/res/twice")],
        "nostore": [("Cache-Control", "max-age=600, no-store"), ("Content-Location", "/res/nostore")],
    }
    for name, fields in cases.items():
        script(workdir, name, headers=fields, body="posted")
        url = origin.url(f"/res/{name}")
        post(larder, url)
        r = get(larder, url)
        assert "hit" not in cache_status(r), (name, cache_status(r))
        assert methods(origin, name) == ["POST", "GET"], name
    script(workdir, "created", status=201, headers=[("Cache-Control", "max-age=600"), ("Content-Location", "/res/created")],
           body="made")
    post(larder, origin.url("/res/created"))
    assert methods(origin, "created") == ["POST"]
    assert get(larder, origin.url("/res/created")).status == 201 and methods(origin, "created") == ["POST", "GET"]
    script(workdir, "auth", headers=[("Cache-Control", "max-age=600"), ("Content-Location", "/res/auth")], body="mine")
    post(larder, origin.url("/res/auth"), headers=[("Authorization", "Basic dTpw")])
    assert "hit" not in cache_status(get(larder, origin.url("/res/auth")))
    # The victim's URL was never given the posted answers.
    assert get(larder, victim).body == b"victim"
