"""A test certificate authority for the integration tests, made with the openssl command line: the
CA, leaf certificates it signs (good, expired, for another name), and self-signed ones outside it."""

import hashlib
import ssl
import subprocess
from pathlib import Path


def openssl(*args, cwd):
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, timeout=60)


class PKI:
    """A test CA in ``directory`` and leaf certificates signed by it."""

    def __init__(self, directory):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca = self.dir / "ca.pem"
        self.ca_key = self.dir / "ca.key"
        self.serial = 1000
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", self.ca_key, "-out", self.ca, "-days", "2", "-subj", "/CN=Larder test CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
                cwd=self.dir)

    def leaf(self, name, sans="DNS:localhost,IP:127.0.0.1", days=2):
        """A certificate for ``sans`` signed by the CA (``days`` < 0: already expired)."""
        self.serial += 1
        key, csr, cert, ext = (self.dir / f"{name}.{x}" for x in ("key", "csr", "pem", "ext"))
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", csr, "-subj", f"/CN={name}", cwd=self.dir)
        ext.write_text(f"subjectAltName={sans}\nbasicConstraints=CA:FALSE\n")
        openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key, "-set_serial", self.serial,
                "-days", days, "-extfile", ext, "-out", cert, cwd=self.dir)
        return str(cert), str(key)

    def self_signed(self, name):
        key, cert = self.dir / f"{name}.key", self.dir / f"{name}.pem"
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", cert, "-days", "2", "-subj", f"/CN={name}",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", cwd=self.dir)
        return str(cert), str(key)


def fingerprint(cert_path):
    der = ssl.PEM_cert_to_DER_cert(Path(cert_path).read_text())
    return hashlib.sha256(der).hexdigest()
