#!/usr/bin/env python3
"""The package registries' server for Larder's integration tests (registries.py builds what it serves).

Run as ``python3 registry_origin.py --manifest FILE --log FILE --cert PEM --key KEY [--plain-http]``.

The manifest (JSON) names sites ("pypi", "files", "npm", ...); each site gets its own https listener
on 127.0.0.1 (and a plain http one with --plain-http), like the separate hosts of a real registry
(pypi.org and files.pythonhosted.org). Once all are listening it prints one JSON line on stdout:
``{"sites": {"pypi": {"https": PORT, "http": PORT}, ...}}``.

For each site the manifest maps a path (percent-decoded, without the query) to a resource:
    {"variants": [{"file": PATH, "type": CONTENT-TYPE, "template": BOOL}, ...],
     "last_modified": EPOCH or null, "headers": {NAME: VALUE}, "vary": BOOL}
or {"redirect": PATH, "status": 301}. With several variants the request's Accept chooses (q-values,
then the manifest's order; no Accept: the first). A template variant has ``@@base:SITE@@`` replaced
by the base URL of SITE over the same scheme the request came in on, so the documents of a plain
http listener point at plain http files, and those of an https one at https files.

The manifest's "rules" ([{"site", "glob", "headers", "status"}], in order) change answers at run time:
"headers" adds or replaces fields (null removes one), "status" answers that status instead.

Every answer carries an ETag (of its body) and Date; Last-Modified when the resource has a time.
If-None-Match and If-Modified-Since answer 304; a single byte range answers 206 (or 416).
The manifest is read again whenever it changes (the tests replace it with a rename), so a test can
publish new documents or rules between two requests.

One JSON line per request is appended to the log before its answer is sent: site, scheme, method,
path (as sent), headers, status. Exits on SIGTERM and when its parent goes.
"""

import argparse
import email.utils
import fnmatch
import hashlib
import json
import os
import signal
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Manifest:
    """The manifest file, read again when it has been replaced."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.identity = None
        self.data = None

    def current(self):
        with self.lock:
            st = os.stat(self.path)
            identity = (st.st_ino, st.st_mtime_ns, st.st_size)
            if identity != self.identity:
                with open(self.path, encoding="utf-8") as f:
                    self.data = json.load(f)
                self.identity = identity
            return self.data


# ---------------------------------------------------------------------------
# Content negotiation


def parse_accept(value):
    """[(media range, q)] of an Accept field."""
    ranges = []
    for part in value.split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        q = 1.0
        for param in pieces[1:]:
            key, _, v = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        ranges.append((pieces[0].lower(), q))
    return ranges


def quality(media_type, ranges):
    """The q of the most specific range that matches ``media_type`` (0 if none does)."""
    kind = media_type.split(";")[0].strip().lower()
    best, best_specificity = 0.0, -1
    for media_range, q in ranges:
        if media_range == kind:
            specificity = 2
        elif media_range.endswith("/*") and kind.startswith(media_range[:-1]):
            specificity = 1
        elif media_range == "*/*":
            specificity = 0
        else:
            continue
        if specificity > best_specificity:
            best, best_specificity = q, specificity
    return best


def choose_variant(variants, accept):
    """The variant the Accept field prefers (the first on a tie), or None if it accepts none."""
    if not accept or len(variants) == 1:
        return variants[0]
    ranges = parse_accept(accept)
    scored = [(quality(v["type"], ranges), -i, v) for i, v in enumerate(variants)]
    q, _, variant = max(scored, key=lambda s: (s[0], s[1]))
    return variant if q > 0 else None


# ---------------------------------------------------------------------------
# Conditions and ranges


def etag_of(body):
    return '"' + hashlib.sha256(body).hexdigest()[:40] + '"'


def http_date(epoch):
    return email.utils.formatdate(epoch, usegmt=True)


def parse_http_date(value):
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def etag_matches(if_none_match, etag):
    if if_none_match.strip() == "*":
        return True
    tags = [t.strip().removeprefix("W/") for t in if_none_match.split(",")]
    return etag in tags


def not_modified(headers, etag, last_modified):
    """Whether the request's conditions say the client's copy is current (RFC 9110's order)."""
    inm = headers.get("If-None-Match")
    if inm is not None:
        return etag_matches(inm, etag)
    ims = headers.get("If-Modified-Since")
    if ims is not None and last_modified is not None:
        since = parse_http_date(ims)
        return since is not None and int(last_modified) <= since
    return False


def byte_range(header, size):
    """(first, last) of a single ``bytes=`` range, "unsatisfiable", or None (answer it all)."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, sep, last = header[6:].strip().partition("-")
    if not sep:
        return None
    try:
        if first == "":
            n = int(last)
            return (max(0, size - n), size - 1) if n > 0 and size > 0 else "unsatisfiable"
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return "unsatisfiable"
    return start, min(end, size - 1)


def range_applies(headers, etag, last_modified):
    """If-Range: the range is honoured only while the representation is the one it names."""
    if_range = headers.get("If-Range")
    if if_range is None:
        return True
    if if_range.startswith('"') or if_range.startswith("W/"):
        return if_range == etag
    since = parse_http_date(if_range)
    return since is not None and last_modified is not None and int(last_modified) == int(since)


# ---------------------------------------------------------------------------
# The handler


class Answer:
    def __init__(self, status, headers=None, body=b"", send_body=True):
        self.status = status
        self.headers = headers or {}
        self.body = body
        self.send_body = send_body


def make_handler(manifest, log_path, ports):
    log_lock = threading.Lock()

    def base_url(site, scheme):
        listeners = ports[site]
        if scheme == "http" and "http" in listeners:
            return f"http://127.0.0.1:{listeners['http']}"
        return f"https://127.0.0.1:{listeners['https']}"

    def render(variant, scheme):
        with open(variant["file"], "rb") as f:
            body = f.read()
        if variant.get("template"):
            for site in ports:
                body = body.replace(f"@@base:{site}@@".encode(), base_url(site, scheme).encode())
        return body

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def log_message(self, *args):
            pass

        def version_string(self):
            return "registry-origin"

        @property
        def site(self):
            return self.server.site

        @property
        def scheme(self):
            return self.server.scheme

        def _resource_answer(self, resource, data):
            if "redirect" in resource:
                location = base_url(self.site, self.scheme) + resource["redirect"]
                return Answer(resource.get("status", 301), {"Location": location, "Content-Type": "text/plain"},
                              b"moved\n")
            variant = choose_variant(resource["variants"], self.headers.get("Accept"))
            if variant is None:
                return Answer(406, {"Content-Type": "text/plain"}, b"not acceptable\n")
            body = render(variant, self.scheme)
            last_modified = resource.get("last_modified")
            headers = {"Content-Type": variant["type"], "ETag": etag_of(body), "Accept-Ranges": "bytes"}
            if last_modified is not None:
                headers["Last-Modified"] = http_date(last_modified)
            if resource.get("vary") or len(resource["variants"]) > 1:
                headers["Vary"] = "Accept"
            headers.update(resource.get("headers") or {})
            if not_modified(self.headers, headers["ETag"], last_modified):
                return Answer(304, {k: v for k, v in headers.items() if k != "Content-Type"}, b"")
            wanted = byte_range(self.headers.get("Range"), len(body))
            if wanted is not None and range_applies(self.headers, headers["ETag"], last_modified):
                if wanted == "unsatisfiable":
                    return Answer(416, {"Content-Range": f"bytes */{len(body)}"}, b"")
                first, last = wanted
                headers["Content-Range"] = f"bytes {first}-{last}/{len(body)}"
                return Answer(206, headers, body[first:last + 1])
            return Answer(200, headers, body)

        def _answer_for(self, path, data):
            routes = data["sites"].get(self.site, {}).get("routes", {})
            resource = routes.get(path)
            if resource is None:
                answer = Answer(404, {"Content-Type": "text/plain"}, b"not found\n")
            else:
                answer = self._resource_answer(resource, data)
            return self._apply_rules(answer, path, data.get("rules") or [])

        def _apply_rules(self, answer, path, rules):
            for rule in rules:
                if rule.get("site", "*") not in ("*", self.site) or not fnmatch.fnmatchcase(path, rule["glob"]):
                    continue
                if rule.get("status"):
                    answer = Answer(rule["status"], {"Content-Type": "text/plain"},
                                    f"status {rule['status']} set by the test\n".encode())
                for name, value in (rule.get("headers") or {}).items():
                    answer.headers = {k: v for k, v in answer.headers.items() if k.lower() != name.lower()}
                    if value is not None:
                        answer.headers[name] = value
            return answer

        def _log(self, status):
            line = json.dumps({"time": time.time(), "site": self.site, "scheme": self.scheme,
                               "method": self.command, "path": self.path, "status": status,
                               "headers": [[k, v] for k, v in self.headers.items()]})
            with log_lock, open(log_path, "a", encoding="utf-8") as log:
                log.write(line + "\n")

        def _serve(self, send_body):
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            answer = self._answer_for(path, manifest.current())
            self._log(answer.status)
            self.send_response_only(answer.status)
            self.send_header("Date", self.date_time_string())
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            if send_body and answer.status != 304:
                self.wfile.write(answer.body)

        def do_GET(self):
            self._serve(True)

        def do_HEAD(self):
            self._serve(False)

    return Handler


# ---------------------------------------------------------------------------
# Listeners


class SiteServer(ThreadingHTTPServer):
    """One listener of one site; the TLS handshake is made in the connection's own thread."""

    daemon_threads = True

    def __init__(self, site, scheme, handler, tls_context=None):
        self.site = site
        self.scheme = scheme
        self.tls_context = tls_context
        super().__init__(("127.0.0.1", 0), handler)

    def finish_request(self, request, client_address):
        if self.tls_context is not None:
            request.settimeout(30)
            try:
                request = self.tls_context.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                return
        super().finish_request(request, client_address)


def tls_context(cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def watch_parent():
    parent = os.getppid()
    while True:
        threading.Event().wait(1)
        if os.getppid() != parent:
            os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--plain-http", action="store_true")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    threading.Thread(target=watch_parent, daemon=True).start()

    manifest = Manifest(args.manifest)
    ctx = tls_context(args.cert, args.key)
    ports = {}
    handler = make_handler(manifest, args.log, ports)
    servers = []
    for site in manifest.current()["sites"]:
        servers.append(SiteServer(site, "https", handler, ctx))
        ports[site] = {"https": servers[-1].server_address[1]}
        if args.plain_http:
            servers.append(SiteServer(site, "http", handler))
            ports[site]["http"] = servers[-1].server_address[1]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"sites": ports}), flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
