#!/usr/bin/env python3
"""A static-file origin for Larder's integration tests, answering the way many internal package
mirrors do: Content-Type and Content-Length, and no Cache-Control, Expires, Last-Modified or ETag.

Run as ``python3 static_origin.py --root DIR --log FILE``. Once listening on 127.0.0.1 (a free
port) it prints ``static origin listening on 127.0.0.1:PORT`` on stdout and appends one JSON line
per request (method, path, headers) to FILE. GET and HEAD only; a directory answers with its index.html;
a path that leaves the root, or names nothing, is 404. Exits on SIGTERM and when its parent goes.
"""

import argparse
import json
import os
import signal
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TYPES = {".html": "text/html", ".deb": "application/vnd.debian.binary-package", ".gz": "application/gzip",
         ".whl": "application/zip"}


def make_handler(root, log_path):
    root = os.path.realpath(root)
    log_lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def log_message(self, *args):
            pass

        def version_string(self):
            return "static-origin"

        def _file(self):
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            if "\0" in path:
                return None
            full = os.path.realpath(os.path.join(root, path.lstrip("/")))
            if full != root and not full.startswith(root + os.sep):
                return None
            if os.path.isdir(full):
                full = os.path.join(full, "index.html")
            return full if os.path.isfile(full) else None

        def _answer(self, with_body):
            with log_lock, open(log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps({"method": self.command, "path": self.path,
                                     "headers": [[k, v] for k, v in self.headers.items()]}) + "\n")
            full = self._file()
            if full is None:
                body = b"not found\n"
                self.send_response(404)
                self.send_header("Content-Type", "text/plain")
            else:
                with open(full, "rb") as f:
                    body = f.read()
                self.send_response(200)
                self.send_header("Content-Type", TYPES.get(os.path.splitext(full)[1], "application/octet-stream"))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def do_GET(self):
            self._answer(True)

        def do_HEAD(self):
            self._answer(False)

        # The Date field stays (every origin sends one); nothing else about time or validity.
        def send_response(self, code, message=None):
            self.send_response_only(code, message)
            self.send_header("Date", self.date_time_string())

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    parent = os.getppid()

    def watch_parent():
        while True:
            threading.Event().wait(1)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch_parent, daemon=True).start()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args.root, args.log))
    server.daemon_threads = True
    print(f"static origin listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
