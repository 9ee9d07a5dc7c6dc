"""Variants chosen by language: a response that varies on Accept-Language alone and names the
language the request ranked highest serves every request that ranks that language highest
(RFC 9110 §12.5.4), whatever else it lists; a request that prefers another language, or names
none, is asked of the origin."""

from test_cache import cache_status, get, methods, script


def lang(lr, url, value=None):
    return get(lr, url, headers=[("Accept-Language", value)] if value is not None else [])


def test_a_variant_serves_requests_that_rank_its_language_highest(larder, origin, workdir):
    script(workdir, "doc", headers=[("Cache-Control", "max-age=600"), ("Vary", "Accept-Language"),
                                    ("Content-Language", "de")], body="Guten Tag")
    url = origin.url("/res/doc")
    assert "stored" in cache_status(lang(larder, url, "en, de"))
    for value in ("fr;q=0.5, de;q=1.0", "en, de", "DE", "de, it"):
        r = lang(larder, url, value)
        assert r.body == b"Guten Tag" and "hit" in cache_status(r), (value, cache_status(r))
    assert methods(origin, "doc") == ["GET"]
    # Ranked below another, a prefix of the tag, any, or no field: the origin's to choose.
    for value in ("fr, de;q=0.9", "de-CH", "*", None):
        r = lang(larder, url, value)
        assert "hit" not in cache_status(r), (value, cache_status(r))
    assert len(methods(origin, "doc")) == 5


def test_a_language_the_request_did_not_rank_highest_keeps_the_request_s_own_key(larder, origin, workdir):
    # Asked for French, the origin had only German: that answer is for requests like this one.
    script(workdir, "fallback", headers=[("Cache-Control", "max-age=600"), ("Vary", "Accept-Language"),
                                         ("Content-Language", "de")], body="Guten Tag")
    url = origin.url("/res/fallback")
    lang(larder, url, "fr")
    assert "hit" in cache_status(lang(larder, url, "fr"))
    assert "hit" not in cache_status(lang(larder, url, "de"))
    assert methods(origin, "fallback") == ["GET", "GET"]


def test_a_field_a_client_crafted_never_fills_a_shared_language_key(larder, origin, workdir):
    """Only fields made entirely of language ranges and weights (at most 32) take part: with bytes
    of a client's choosing in its field, the answer stays under that field's own key."""
    script(workdir, "crafted", headers=[("Cache-Control", "max-age=600"), ("Vary", "Accept-Language"),
                                        ("Content-Language", "en")], body="Hello")
    crafted = ("en, <script>alert(1)</script>", "en, *;q=0.1", "fr;q=1.0001, en;q=0.2",
               "en, " + ", ".join(f"x{i};q=0.1" for i in range(40)))
    for i, value in enumerate(crafted):
        url = origin.url(f"/res/crafted?case={i}")
        assert "stored" in cache_status(lang(larder, url, value))
        assert "hit" in cache_status(lang(larder, url, value)), value  # its own key
        r = lang(larder, url, "en")
        assert "hit" not in cache_status(r), (value, cache_status(r))
