"""A real FTP server for the gateway's tests: pyftpdlib serving a directory on 127.0.0.1, on a port
picked at start, logging each command it receives.

    python3 ftp_origin.py --root DIR --log FILE [--user NAME:PASSWORD] [--masquerade ADDRESS]
                          [--no-epsv] [--no-mlsd] [--no-mdtm]

Prints ``ftp origin listening on 127.0.0.1:PORT`` once listening, then a line ``logged`` after each
command it logs (waits wake on it). The log holds one JSON object per command:
``{"session": N, "command": "RETR", "argument": "pub/a.txt"}``.

* Anonymous users read ``--root``; ``--user`` adds a user who reads it too.
* ``--masquerade ADDRESS``: passive replies (PASV) name ADDRESS instead of the server's address,
  as a misconfigured or hostile server would (the FTP bounce: a client must not connect there).
* ``--no-epsv``, ``--no-mlsd``, ``--no-mdtm``: the command is answered ``502 not implemented``, as
  older servers do.
"""

import argparse
import itertools
import json
import logging
import sys
import threading

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--user", action="append", default=[])
    parser.add_argument("--masquerade")
    parser.add_argument("--no-epsv", action="store_true")
    parser.add_argument("--no-mlsd", action="store_true")
    parser.add_argument("--no-mdtm", action="store_true")
    args = parser.parse_args()

    logging.getLogger("pyftpdlib").setLevel(logging.CRITICAL)
    authorizer = DummyAuthorizer()
    authorizer.add_anonymous(args.root, perm="elr")
    for spec in args.user:
        name, password = spec.split(":", 1)
        authorizer.add_user(name, password, args.root, perm="elr")

    refused = {c for c, on in (("EPSV", args.no_epsv), ("MLSD", args.no_mlsd), ("MDTM", args.no_mdtm)) if on}
    sessions = itertools.count(1)
    log_lock = threading.Lock()
    log = open(args.log, "a", buffering=1)

    class LoggingHandler(FTPHandler):
        def on_connect(self):
            self.session_number = next(sessions)

        def pre_process_command(self, line, cmd, arg):
            with log_lock:
                log.write(json.dumps({"session": self.session_number, "command": cmd, "argument": arg}) + "\n")
                sys.stdout.write("logged\n")
                sys.stdout.flush()
            if cmd in refused:
                self.respond("502 Command not implemented.")
                return
            return super().pre_process_command(line, cmd, arg)

    LoggingHandler.authorizer = authorizer
    LoggingHandler.banner = "larder test ftp origin ready"
    LoggingHandler.permit_foreign_addresses = False
    LoggingHandler.auth_failed_timeout = 0  # a wrong password is answered at once, not after 3 s
    if args.masquerade:
        LoggingHandler.masquerade_address = args.masquerade
    server = FTPServer(("127.0.0.1", 0), LoggingHandler)
    port = server.socket.getsockname()[1]
    sys.stdout.write(f"ftp origin listening on 127.0.0.1:{port}\n")
    sys.stdout.flush()
    server.serve_forever(handle_exit=False)


if __name__ == "__main__":
    main()
