"""Web cache deception through the presets: a preset gives package paths a lifetime, and a site
answers a path that merely looks like a package (`/account.php/pool/main/x.deb`) with the asking
user's own page. A preset's lifetime must never make such an answer shareable: the next client,
without the cookie, must get its own answer from the origin, never the first user's page."""

import pytest

from helpers import proxy_exchange
from test_security import answer, scripted  # noqa: F401  (fixture)

PRESETS = {"cache": {"presets": ["debian", "npm", "go", "pypi"]}}
PAGE = [("Content-Type", "text/html; charset=utf-8")]


def personal_origin(scripted, response_fields):
    """An origin that answers every path with the page of whoever the cookie names."""
    def handler(req):
        who = (req.header("cookie") or "sid=nobody").split("=", 1)[1]
        return answer(200, f"<h1>account of {who}</h1>".encode(), response_fields(who))
    return scripted(handler)


def victim_then_attacker(lr, origin, path, victim_headers):
    first = proxy_exchange(lr.port, "GET", origin.url(path), victim_headers)
    assert first.status == 200 and b"alice" in first.body, first.body
    second = proxy_exchange(lr.port, "GET", origin.url(path))
    return first, second


@pytest.mark.parametrize("path", [
    "/account.php/pool/main/x.deb",        # debian, a year
    "/profile/-/x.tgz",                    # npm, a year
    "/me/@v/v1.zip",                       # go, a year
    "/settings/dists/x",                   # debian index, five minutes
    "/account/simple/x/",                  # pypi index, five minutes
])
def test_a_personal_page_with_set_cookie_behind_a_package_path_is_never_served_to_another(
        larder_factory, scripted, path):  # noqa: F811
    lr = larder_factory(config=PRESETS)
    origin = personal_origin(scripted, lambda who: PAGE + [("Set-Cookie", f"sid={who}; HttpOnly")])
    _, second = victim_then_attacker(lr, origin, path, [("Cookie", "sid=alice")])
    assert b"alice" not in second.body and b"nobody" in second.body, second.body
    assert "hit" not in (second.header("Cache-Status") or "")
    assert origin.targets().count(path) == 2


@pytest.mark.parametrize("response_fields", [
    [("Cache-Control", "max-age=0, must-revalidate")] + PAGE,
    [("Cache-Control", "no-cache")] + PAGE,
    PAGE,                                   # nothing said at all, but a cookie asked for it
], ids=["max-age=0 must-revalidate", "no-cache", "silent"])
def test_a_page_asked_for_with_a_cookie_is_never_given_a_preset_lifetime(larder_factory, scripted, response_fields):  # noqa: F811
    lr = larder_factory(config=PRESETS)
    origin = personal_origin(scripted, lambda who: response_fields)
    path = "/account.php/pool/main/x.deb"
    _, second = victim_then_attacker(lr, origin, path, [("Cookie", "sid=alice")])
    assert b"alice" not in second.body, second.body
    assert origin.targets().count(path) == 2


def test_a_page_with_authorization_is_never_given_a_preset_lifetime(larder_factory, scripted):  # noqa: F811
    lr = larder_factory(config=PRESETS)

    def handler(req):
        who = "alice" if req.header("authorization") else "nobody"
        return answer(200, f"<h1>account of {who}</h1>".encode(), PAGE + [("Cache-Control", "must-revalidate")])

    origin = scripted(handler)
    path = "/me/@v/v1.zip"
    _, second = victim_then_attacker(lr, origin, path, [("Authorization", "Basic YWxpY2U6cHc=")])
    assert b"alice" not in second.body, second.body


@pytest.mark.parametrize("directives", ["max-age=0, must-revalidate", "no-cache", "max-age=0"])
def test_an_origin_that_asks_for_revalidation_is_not_overruled_by_a_preset(larder_factory, scripted, directives):  # noqa: F811
    """Even a real package file: the origin said so, and a preset's year would undo it."""
    lr = larder_factory(config=PRESETS)
    bodies = iter([b"deb v1", b"deb v2"])
    origin = scripted(lambda req: answer(200, next(bodies), [("Cache-Control", directives),
                                                             ("Content-Type", "application/octet-stream")]))
    path = "/debian/pool/main/h/hello/hello_1.0_all.deb"
    assert proxy_exchange(lr.port, "GET", origin.url(path)).body == b"deb v1"
    assert proxy_exchange(lr.port, "GET", origin.url(path)).body == b"deb v2"


def test_an_html_page_at_a_package_path_is_not_kept_even_without_cookies(larder_factory, scripted):  # noqa: F811
    """A site answers paths it does not have with a page (a login form, a soft 404): never an artifact."""
    lr = larder_factory(config=PRESETS)
    count = iter(range(1, 100))
    origin = scripted(lambda req: answer(200, f"<p>page {next(count)}</p>".encode(), PAGE))
    path = "/account.php/pool/main/x.deb"
    assert proxy_exchange(lr.port, "GET", origin.url(path)).body == b"<p>page 1</p>"
    assert proxy_exchange(lr.port, "GET", origin.url(path)).body == b"<p>page 2</p>"


def test_a_real_package_file_is_still_kept_a_year(larder_factory, scripted):  # noqa: F811
    lr = larder_factory(config=PRESETS)
    origin = scripted(lambda req: answer(200, b"deb bytes", [("Content-Type", "application/vnd.debian.binary-package")]))
    path = "/debian/pool/main/h/hello/hello_1.0_all.deb"
    assert proxy_exchange(lr.port, "GET", origin.url(path)).body == b"deb bytes"
    again = proxy_exchange(lr.port, "GET", origin.url(path))
    assert again.body == b"deb bytes" and again.header("Cache-Status").startswith("larder; hit"), again.header("Cache-Status")
    assert origin.targets() == [path]


def test_a_revalidation_never_gives_a_users_own_file_the_preset_lifetime(larder_factory, scripted):  # noqa: F811
    """Stored for the user who asked with a cookie (kept only to revalidate, no lifetime), then
    revalidated for that user again: the preset's year must not come with the revalidation, or the
    next client without the cookie is served the file as a fresh hit."""
    lr = larder_factory(config=PRESETS)
    body = b"VICTIM-SECRET-ARTIFACT"

    def handler(req):
        if req.header("cookie") != "session=victim":
            return answer(403, b"forbidden")
        fields = [("ETag", '"v1"'), ("Content-Type", "application/octet-stream")]
        if req.header("if-none-match") == '"v1"':
            return b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n'
        if req.method == "HEAD":
            return answer(200, b"", fields, length=len(body))
        return answer(200, body, fields)

    origin = scripted(handler)
    url = origin.url("/private/pool/main/y.deb")
    victim = [("Cookie", "session=victim")]
    assert proxy_exchange(lr.port, "GET", url, victim).body == body
    assert proxy_exchange(lr.port, "GET", url, victim).body == body   # revalidated for the victim
    other = proxy_exchange(lr.port, "GET", url)
    assert other.status == 403 and body not in other.body, (other.status, other.header("Cache-Status"))
