"""Package registries for the tests, built here at test time and served over TLS, and the real
clients that use them, each with state of its own and nothing to reach but the URL it is given.

Nothing here reaches beyond 127.0.0.1: the registries (PyPI, npm, crates.io's sparse index, a Go
module proxy, Maven, a Debian archive, RubyGems' compact index) are directories and manifests
written by the builders below and served by registry_origin.py, with a test CA (make_registry_tls)
that only the clients given its file trust.

    from registries import registry_artifacts, registry_server_factory, registry_tls  # fixtures

    def test_pip(workdir, registry_artifacts, registry_server_factory):
        pypi = PyPIRegistry(workdir / "pypi", registry_artifacts)   # sites "pypi" and "files"
        server = registry_server_factory([pypi])                      # https://127.0.0.1:PORT per site
        pip_install(workdir, server.url("pypi") + "/simple/", "larder-hello==1.1", ca=server.ca)
        server.requests("files")                                      # what the files host was asked

Built artifacts (wheels, tarballs, .deb, ...) are the same bytes for the same name and version; the
session's ArtifactCache builds each once. Each builder's documents are written under its own root.
"""

import base64
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import tomllib
import zipfile
from pathlib import Path

import pytest

import wheel_backend
from helpers import HERE, START_TIMEOUT, child_env, stop_process, spawn
from tls_pki import PKI

CLIENT_TIMEOUT = 120
DAY = 86400
# Every archive member's time (seconds since the epoch): the same inputs make the same bytes.
FIXED_MTIME = 1704067200  # 2024-01-01T00:00:00Z


# ---------------------------------------------------------------------------
# Time


def days_ago(days, now=None):
    """The time ``days`` days before ``now`` (default: the present), in seconds since the epoch."""
    return (time.time() if now is None else now) - days * DAY


def iso_utc(epoch, digits=6):
    """2024-01-01T00:00:00.000000Z (``digits`` of fractions: 6 for PyPI, 3 for npm, 0 for Go)."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))
    if digits:
        whole += "." + str(int((epoch % 1) * 10 ** digits)).zfill(digits)
    return whole + "Z"


def version_key(version):
    """Sorts 1.2 < 1.10 (the numeric parts of a dotted version, a leading v ignored)."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.-]", version.lstrip("v")))


def hashes(data):
    return {"md5": hashlib.md5(data).hexdigest(), "sha1": hashlib.sha1(data).hexdigest(),
            "sha256": hashlib.sha256(data).hexdigest(), "sha512": hashlib.sha512(data).hexdigest(),
            "blake2b_256": hashlib.blake2b(data, digest_size=32).hexdigest()}


# ---------------------------------------------------------------------------
# TLS: a test CA that only the clients given its file trust


class RegistryTLS:
    """The test CA (``ca``, a PEM file) and a certificate for 127.0.0.1 and localhost it signed."""

    def __init__(self, directory):
        self.pki = PKI(directory)
        self.ca = str(self.pki.ca)
        self.cert, self.key = self.pki.leaf("registry")
        self._truststore = None

    def java_truststore(self):
        """A PKCS12 trust store holding only the test CA (for Maven), made once."""
        if self._truststore is None:
            store = self.pki.dir / "truststore.p12"
            subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "larder-test-ca", "-file", self.ca,
                            "-keystore", store, "-storetype", "PKCS12", "-storepass", "changeit"],
                           check=True, capture_output=True, timeout=CLIENT_TIMEOUT)
            self._truststore = str(store)
        return self._truststore


def make_registry_tls(directory):
    return RegistryTLS(directory)


# ---------------------------------------------------------------------------
# Artifacts, built once per session


class ArtifactCache:
    """Built artifacts by (kind, name, version): ``get`` builds one the first time it is asked for."""

    def __init__(self, directory):
        self.dir = Path(directory)
        self.lock = threading.Lock()

    def get(self, kind, name, version, build):
        """The path of the artifact; ``build(directory)`` makes it in an empty directory and returns its path."""
        slot = self.dir / kind / f"{name.replace('/', '+')}@{version}"
        with self.lock:
            done = slot / ".built"
            if done.exists():
                return Path(done.read_text())
            if slot.exists():
                shutil.rmtree(slot)  # a build that failed half-way
            slot.mkdir(parents=True)
            path = Path(build(slot))
            done.write_text(str(path))
            return path


def tar_member(name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = FIXED_MTIME
    info.mode = mode
    info.uname = info.gname = ""
    return info, io.BytesIO(data)


def write_tar(path, members, compress=True):
    """A tar (gzip-compressed unless ``compress`` is false) of {name: bytes}, the same bytes every time."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members.items():
            tar.addfile(*tar_member(name, data))
    data = gzip.compress(raw.getvalue(), mtime=0) if compress else raw.getvalue()
    Path(path).write_bytes(data)
    return Path(path)


def write_zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, wheel_backend.FIXED_DATE), data)
    return Path(path)


# ---------------------------------------------------------------------------
# Registries: what each serves, per site and path


class Registry:
    """The routes of one registry's sites ({site: {path: resource}}, as registry_origin.py reads them),
    its documents written under ``root``. ``changed()`` tells the server to publish the routes again."""

    def __init__(self, root, artifacts, sites):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.artifacts = artifacts
        self.sites = tuple(sites)
        self.routes = {site: {} for site in self.sites}
        self._listeners = []

    def on_change(self, listener):
        self._listeners.append(listener)

    def changed(self):
        for listener in self._listeners:
            listener()

    def document(self, relative, data):
        """Writes a document (str or bytes) under the root; its path."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def serve(self, site, path, file, content_type, last_modified=None, template=False, headers=None):
        self.serve_variants(site, path, [(file, content_type, template)], last_modified, headers)

    def serve_variants(self, site, path, variants, last_modified=None, headers=None):
        """``variants``: [(file, content type, template)], the one the client's Accept prefers is sent."""
        self.routes[site][path] = {
            "variants": [{"file": str(f), "type": t, "template": tpl} for f, t, tpl in variants],
            "last_modified": last_modified, "headers": headers or {}}

    def redirect(self, site, path, to, status=301):
        self.routes[site][path] = {"redirect": to, "status": status}


def base(site):
    """The placeholder registry_origin.py replaces with ``site``'s URL (scheme of the request)."""
    return f"@@base:{site}@@"


# ---------------------------------------------------------------------------
# PyPI


def normalize_project(name):
    """PEP 503's normalized name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def module_source(name, version):
    return f'"""{name}, a package built by the tests."""\nVERSION = "{version}"\n'.encode()


def build_wheel(directory, name, version):
    members = {f"{name.replace('-', '_')}/__init__.py": module_source(name, version)}
    return wheel_backend.write_wheel(directory, name, version, members)


def build_sdist(directory, name, version):
    """An sdist whose in-tree backend (wheel_backend.py) pip runs with nothing to install first."""
    module = name.replace("-", "_")
    top = f"{module}-{version}"
    pkg_info = wheel_backend.metadata_text(name, version, "an sdist built by the tests")
    pyproject = ('[build-system]\nrequires = []\nbuild-backend = "larder_test_backend"\nbackend-path = ["."]\n\n'
                 f'[project]\nname = "{name}"\nversion = "{version}"\n')
    members = {f"{top}/PKG-INFO": pkg_info.encode(), f"{top}/pyproject.toml": pyproject.encode(),
               f"{top}/larder_test_backend.py": Path(wheel_backend.__file__).read_bytes(),
               f"{top}/{module}/__init__.py": module_source(name, version)}
    return write_tar(Path(directory) / f"{top}.tar.gz", members)


def wheel_metadata(wheel):
    with zipfile.ZipFile(wheel) as z:
        return z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA")))


class PyPIRegistry(Registry):
    """A PyPI: the simple index (PEP 503 HTML and PEP 691 JSON, chosen by Accept, with PEP 700's
    versions and upload-time), the JSON API (/pypi/NAME/json) on ``site``, and on ``files_site``
    the wheels, sdists and wheels' core metadata (PEP 658) at /packages/xx/yy/HASH/FILE, each with
    Last-Modified = its upload time. The index points at the files host with absolute URLs.

    ``projects``: {name: {version: upload time}}; by default larder-hello 1.0, 1.1 and 1.2, uploaded
    30, 10 and 1 day(s) before ``now``. ``forms``: the index forms served ("html", "json")."""

    def __init__(self, root, artifacts, projects=None, now=None, forms=("html", "json"), site="pypi",
                 files_site="files"):
        super().__init__(root, artifacts, (site, files_site))
        self.site, self.files_site = site, files_site
        self.forms = tuple(forms)
        self.projects = projects or {"larder-hello": {"1.0": days_ago(30, now), "1.1": days_ago(10, now),
                                                      "1.2": days_ago(1, now)}}
        self.files = {}  # project -> [file record]
        for name, versions in self.projects.items():
            self.files[name] = [f for version, uploaded in sorted(versions.items(), key=lambda v: version_key(v[0]))
                                for f in self._release_files(name, version, uploaded)]
        self._index_documents()

    def wheel(self, name, version):
        return self.artifacts.get("wheel", name, version, lambda d: build_wheel(d, name, version))

    def sdist(self, name, version):
        return self.artifacts.get("sdist", name, version, lambda d: build_sdist(d, name, version))

    def _release_files(self, name, version, uploaded):
        records = []
        for kind, path in (("bdist_wheel", self.wheel(name, version)), ("sdist", self.sdist(name, version))):
            data = path.read_bytes()
            digests = hashes(data)
            h = digests["blake2b_256"]
            url_path = f"/packages/{h[:2]}/{h[2:4]}/{h[4:]}/{path.name}"
            record = {"name": name, "version": version, "filename": path.name, "path": path, "url_path": url_path,
                      "digests": digests, "size": len(data), "uploaded": uploaded, "packagetype": kind,
                      "metadata_sha256": None}
            self.serve(self.files_site, url_path, path, "application/octet-stream", last_modified=uploaded)
            if kind == "bdist_wheel":
                metadata = self.document(f"metadata/{path.name}.metadata", wheel_metadata(path))
                record["metadata_sha256"] = hashlib.sha256(metadata.read_bytes()).hexdigest()
                self.serve(self.files_site, url_path + ".metadata", metadata, "application/octet-stream",
                           last_modified=uploaded)
            records.append(record)
        return records

    def file_url(self, record):
        return base(self.files_site) + record["url_path"]

    # The index, in each form

    def _index_documents(self):
        names = sorted(self.projects, key=normalize_project)
        self._negotiated("/simple/", "simple/index", self._root_html(names), self._root_json(names))
        for name in names:
            project = normalize_project(name)
            self._negotiated(f"/simple/{project}/", f"simple/{project}",
                             self._project_html(name), self._project_json(name))
            self.redirect(self.site, f"/simple/{project}", f"/simple/{project}/")
            self.serve(self.site, f"/pypi/{project}/json", self.document(f"pypi/{project}.json", self._api_json(name)),
                       "application/json", template=True)
            for version in self.projects[name]:
                doc = self.document(f"pypi/{project}-{version}.json", self._api_json(name, version))
                self.serve(self.site, f"/pypi/{project}/{version}/json", doc, "application/json", template=True)

    def _negotiated(self, path, stem, html, as_json):
        variants = []
        if "html" in self.forms:
            page = self.document(stem + ".html", html)
            variants += [(page, "text/html; charset=utf-8", True),
                         (page, "application/vnd.pypi.simple.v1+html", True)]
        if "json" in self.forms:
            variants.append((self.document(stem + ".json", json.dumps(as_json, indent=1)),
                             "application/vnd.pypi.simple.v1+json", True))
        self.serve_variants(self.site, path, variants)

    @staticmethod
    def _root_html(names):
        links = "".join(f'    <a href="/simple/{normalize_project(n)}/">{n}</a>\n' for n in names)
        return ('<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.1">\n'
                f'    <title>Simple index</title>\n  </head>\n  <body>\n{links}  </body>\n</html>\n')

    @staticmethod
    def _root_json(names):
        return {"meta": {"api-version": "1.1"}, "projects": [{"name": n} for n in names]}

    def _project_html(self, name):
        links = []
        for f in self.files[name]:
            extra = ""
            if f["metadata_sha256"]:
                extra = (f' data-dist-info-metadata="sha256={f["metadata_sha256"]}"'
                         f' data-core-metadata="sha256={f["metadata_sha256"]}"')
            links.append(f'    <a href="{self.file_url(f)}#sha256={f["digests"]["sha256"]}"{extra}>'
                         f'{f["filename"]}</a><br />\n')
        return ('<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.1">\n'
                f'    <title>Links for {name}</title>\n  </head>\n  <body>\n    <h1>Links for {name}</h1>\n'
                + "".join(links) + '  </body>\n</html>\n')

    def _project_json(self, name):
        files = []
        for f in self.files[name]:
            metadata = {"sha256": f["metadata_sha256"]} if f["metadata_sha256"] else False
            files.append({"filename": f["filename"], "url": self.file_url(f),
                          "hashes": {"sha256": f["digests"]["sha256"]}, "requires-python": None,
                          "core-metadata": metadata, "data-dist-info-metadata": metadata, "gpg-sig": False,
                          "yanked": False, "size": f["size"], "upload-time": iso_utc(f["uploaded"])})
        versions = sorted(self.projects[name], key=version_key)
        return {"meta": {"api-version": "1.1"}, "name": normalize_project(name), "versions": versions,
                "files": files}

    def _api_file(self, f):
        return {"filename": f["filename"], "url": self.file_url(f), "packagetype": f["packagetype"],
                "python_version": "py3" if f["packagetype"] == "bdist_wheel" else "source",
                "size": f["size"], "digests": {k: f["digests"][k] for k in ("md5", "sha256", "blake2b_256")},
                "md5_digest": f["digests"]["md5"], "upload_time": iso_utc(f["uploaded"], 0)[:-1],
                "upload_time_iso_8601": iso_utc(f["uploaded"]), "yanked": False, "yanked_reason": None,
                "requires_python": None, "has_sig": False, "comment_text": ""}

    def _api_json(self, name, version=None):
        versions = sorted(self.projects[name], key=version_key)
        shown = version or versions[-1]
        releases = {v: [self._api_file(f) for f in self.files[name] if f["version"] == v] for v in versions}
        info = {"name": name, "version": shown, "summary": "a package built by the tests", "requires_python": None,
                "yanked": False, "yanked_reason": None, "home_page": "", "license": "", "project_urls": None}
        doc = {"info": info, "last_serial": len(self.files[name]), "urls": releases[shown], "vulnerabilities": []}
        if version is None:
            doc["releases"] = releases
        return json.dumps(doc, indent=1)


# ---------------------------------------------------------------------------
# npm


def npm_tarball_name(name, version):
    return f"{name.rsplit('/', 1)[-1]}-{version}.tgz"


def npm_manifest(name, version):
    return {"name": name, "version": version, "description": "a package built by the tests", "main": "index.js",
            "license": "MIT"}


def build_npm_tarball(directory, name, version):
    """What ``npm pack`` makes: package/package.json and the code, gzipped."""
    members = {"package/package.json": json.dumps(npm_manifest(name, version), indent=2).encode() + b"\n",
               "package/index.js": f'module.exports = {{ version: "{version}" }};\n'.encode()}
    return write_tar(Path(directory) / npm_tarball_name(name, version), members)


def npm_integrity(data):
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


class NpmRegistry(Registry):
    """An npm registry: each package's document at /NAME (a scoped one at /@scope/name, which
    clients ask for as /@scope%2fname), full (application/json, with time and dist-tags) or
    abbreviated (application/vnd.npm.install-v1+json) as Accept asks, and its tarballs at
    /NAME/-/NAME-VERSION.tgz, absolute URLs on the registry's own site, with dist.integrity
    (sha512) and dist.shasum (sha1).

    ``packages``: {name: {version: publish time}}; by default larder-hello 1.0.0, 1.1.0, 2.0.0
    (30, 10, 1 day(s) before ``now``) and @larder-test/scoped-hello 1.0.0 (20 days)."""

    def __init__(self, root, artifacts, packages=None, now=None, site="npm"):
        super().__init__(root, artifacts, (site,))
        self.site = site
        self.packages = packages or {
            "larder-hello": {"1.0.0": days_ago(30, now), "1.1.0": days_ago(10, now), "2.0.0": days_ago(1, now)},
            "@larder-test/scoped-hello": {"1.0.0": days_ago(20, now)}}
        for name, versions in self.packages.items():
            self._package(name, versions)

    def tarball(self, name, version):
        return self.artifacts.get("npm", name, version, lambda d: build_npm_tarball(d, name, version))

    def tarball_path(self, name, version):
        return f"/{name}/-/{npm_tarball_name(name, version)}"

    def _package(self, name, versions):
        ordered = sorted(versions, key=version_key)
        full_versions, short_versions = {}, {}
        for version in ordered:
            data = self.tarball(name, version).read_bytes()
            self.serve(self.site, self.tarball_path(name, version), self.tarball(name, version),
                       "application/octet-stream", last_modified=versions[version])
            dist = {"tarball": base(self.site) + self.tarball_path(name, version),
                    "shasum": hashlib.sha1(data).hexdigest(), "integrity": npm_integrity(data)}
            full_versions[version] = {**npm_manifest(name, version), "_id": f"{name}@{version}", "dist": dist}
            short_versions[version] = {"name": name, "version": version, "dist": dist}
        modified = max(versions.values())
        tags = {"latest": ordered[-1]}
        times = {"created": iso_utc(min(versions.values()), 3), "modified": iso_utc(modified, 3),
                 **{v: iso_utc(t, 3) for v, t in versions.items()}}
        full = {"_id": name, "_rev": f"{len(ordered)}-{hashlib.md5(name.encode()).hexdigest()}", "name": name,
                "description": "a package built by the tests", "dist-tags": tags, "versions": full_versions,
                "time": times, "license": "MIT", "readme": ""}
        short = {"name": name, "modified": iso_utc(modified, 3), "dist-tags": tags, "versions": short_versions}
        stem = "docs/" + name.replace("/", "+")
        self.serve_variants(self.site, f"/{name}", [
            (self.document(stem + ".json", json.dumps(full, indent=1)), "application/json", True),
            (self.document(stem + ".install-v1.json", json.dumps(short)), "application/vnd.npm.install-v1+json",
             True)], last_modified=modified)


# ---------------------------------------------------------------------------
# crates.io (sparse index)


def crate_index_path(name):
    """Where cargo's sparse protocol looks for a crate: /1/a, /2/ab, /3/a/abc, /ab/cd/abcd..."""
    name = name.lower()
    if len(name) <= 2:
        return f"/{len(name)}/{name}"
    if len(name) == 3:
        return f"/3/{name[0]}/{name}"
    return f"/{name[:2]}/{name[2:4]}/{name}"


def build_crate(directory, name, version):
    """What ``cargo package`` makes: NAME-VERSION/ with Cargo.toml and src/lib.rs, gzipped."""
    top = f"{name}-{version}"
    cargo_toml = (f'[package]\nedition = "2021"\nname = "{name}"\nversion = "{version}"\n'
                  'description = "a crate built by the tests"\nlicense = "MIT"\n\n[lib]\npath = "src/lib.rs"\n')
    members = {f"{top}/Cargo.toml": cargo_toml.encode(), f"{top}/Cargo.toml.orig": cargo_toml.encode(),
               f"{top}/src/lib.rs": f'pub const VERSION: &str = "{version}";\n'.encode()}
    return write_tar(Path(directory) / f"{top}.crate", members)


class CratesRegistry(Registry):
    """crates.io's sparse index on ``site`` (config.json, one index file per crate, its versions a
    JSON line each with the .crate's sha256 as cksum) and the downloads on ``dl_site`` (like
    static.crates.io) at /crates/NAME/VERSION/download and /crates/NAME/NAME-VERSION.crate.

    ``crates``: {name: [version]}; by default larder-hello 1.0.0 and 1.1.0."""

    def __init__(self, root, artifacts, crates=None, site="crates", dl_site="crates-dl"):
        super().__init__(root, artifacts, (site, dl_site))
        self.site, self.dl_site = site, dl_site
        self.crates = crates or {"larder-hello": ["1.0.0", "1.1.0"]}
        config = {"dl": base(dl_site) + "/crates", "api": base(site)}
        self.serve(site, "/config.json", self.document("config.json", json.dumps(config)), "application/json",
                   template=True)
        for name, versions in self.crates.items():
            self._crate(name, versions)

    def crate(self, name, version):
        return self.artifacts.get("crate", name, version, lambda d: build_crate(d, name, version))

    def _crate(self, name, versions):
        lines = []
        for version in sorted(versions, key=version_key):
            path = self.crate(name, version)
            lines.append(json.dumps({"name": name, "vers": version, "deps": [],
                                     "cksum": hashlib.sha256(path.read_bytes()).hexdigest(),
                                     "features": {}, "yanked": False, "links": None}))
            self.serve(self.dl_site, f"/crates/{name}/{version}/download", path, "application/gzip")
            self.serve(self.dl_site, f"/crates/{name}/{path.name}", path, "application/gzip")
        index_path = crate_index_path(name)
        self.serve(self.site, index_path, self.document("index" + index_path, "\n".join(lines) + "\n"),
                   "text/plain")


# ---------------------------------------------------------------------------
# Go module proxy


def go_escape(path):
    """The module proxy's case encoding: an upper-case letter is ! and the letter in lower case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), path)


def go_mod(module):
    return f"module {module}\n\ngo 1.21\n".encode()


def build_go_zip(directory, module, version):
    """A module zip: every file under MODULE@VERSION/."""
    prefix = f"{module}@{version}/"
    members = {prefix + "go.mod": go_mod(module),
               prefix + "hello.go": f'package hello\n\nconst Version = "{version}"\n'.encode()}
    return write_zip(Path(directory) / f"{version}.zip", members)


def go_h1(files):
    """The go.sum hash (dirhash's Hash1) of {name: bytes}."""
    summary = "".join(f"{hashlib.sha256(files[n]).hexdigest()}  {n}\n" for n in sorted(files))
    return "h1:" + base64.b64encode(hashlib.sha256(summary.encode()).digest()).decode()


def go_sum_lines(module, version, zip_path):
    """The two go.sum lines of a module version (its zip's tree, and its go.mod)."""
    with zipfile.ZipFile(zip_path) as z:
        files = {n: z.read(n) for n in z.namelist()}
    return [f"{module} {version} {go_h1(files)}",
            f"{module} {version}/go.mod {go_h1({'go.mod': go_mod(module)})}"]


class GoProxy(Registry):
    """A Go module proxy (GOPROXY protocol): /MODULE/@v/list, VERSION.info (with Time), .mod, .zip,
    and /MODULE/@latest, the module path case-encoded.

    ``modules``: {module: {version: time}}; by default example.com/larder/hello v1.0.0 and v1.1.0
    (10 and 1 day(s) before ``now``)."""

    def __init__(self, root, artifacts, modules=None, now=None, site="go"):
        super().__init__(root, artifacts, (site,))
        self.site = site
        self.modules = modules or {"example.com/larder/hello": {"v1.0.0": days_ago(10, now),
                                                                "v1.1.0": days_ago(1, now)}}
        for module, versions in self.modules.items():
            self._module(module, versions)

    def zip(self, module, version):
        return self.artifacts.get("go", module, version, lambda d: build_go_zip(d, module, version))

    def _module(self, module, versions):
        escaped = go_escape(module)
        ordered = sorted(versions, key=version_key)
        for version in ordered:
            stem = f"/{escaped}/@v/{version}"
            info = self.document(f"go{stem}.info", json.dumps({"Version": version,
                                                               "Time": iso_utc(versions[version], 0)}))
            self.serve(self.site, stem + ".info", info, "application/json", last_modified=versions[version])
            self.serve(self.site, stem + ".mod", self.document(f"go{stem}.mod", go_mod(module)),
                       "text/plain; charset=utf-8", last_modified=versions[version])
            self.serve(self.site, stem + ".zip", self.zip(module, version), "application/zip",
                       last_modified=versions[version])
        self.serve(self.site, f"/{escaped}/@v/list",
                   self.document(f"go/{escaped}/@v/list", "".join(v + "\n" for v in ordered)),
                   "text/plain; charset=utf-8")
        self.serve(self.site, f"/{escaped}/@latest", self.root / f"go/{escaped}/@v/{ordered[-1]}.info",
                   "application/json")


# ---------------------------------------------------------------------------
# Maven


def maven_pom(group, artifact, version):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
            f'  <modelVersion>4.0.0</modelVersion>\n  <groupId>{group}</groupId>\n'
            f'  <artifactId>{artifact}</artifactId>\n  <version>{version}</version>\n'
            '  <packaging>jar</packaging>\n  <description>an artifact built by the tests</description>\n'
            '</project>\n').encode()


def build_maven_jar(directory, group, artifact, version):
    members = {"META-INF/MANIFEST.MF": b"Manifest-Version: 1.0\r\nCreated-By: larder-tests\r\n\r\n",
               f"{group.replace('.', '/')}/{artifact}/VERSION": version.encode() + b"\n"}
    return write_zip(Path(directory) / f"{artifact}-{version}.jar", members)


class MavenRepository(Registry):
    """A Maven repository (Maven Central's layout): GROUP/ARTIFACT/VERSION/ARTIFACT-VERSION.pom and
    .jar, each with .sha1 and .md5, and GROUP/ARTIFACT/maven-metadata.xml (with its own .sha1, .md5).

    ``coordinates``: {"group:artifact": {version: time}}; by default com.example:larder-hello 1.0
    and 1.1 (10 and 1 day(s) before ``now``)."""

    def __init__(self, root, artifacts, coordinates=None, now=None, site="maven"):
        super().__init__(root, artifacts, (site,))
        self.site = site
        self.coordinates = coordinates or {"com.example:larder-hello": {"1.0": days_ago(10, now),
                                                                      "1.1": days_ago(1, now)}}
        for coordinate, versions in self.coordinates.items():
            group, artifact = coordinate.split(":")
            self._artifact(group, artifact, versions)

    def jar(self, group, artifact, version):
        return self.artifacts.get("maven", f"{group}:{artifact}", version,
                                  lambda d: build_maven_jar(d, group, artifact, version))

    def _with_checksums(self, path, file, content_type, last_modified):
        self.serve(self.site, path, file, content_type, last_modified=last_modified)
        data = Path(file).read_bytes()
        for algorithm in ("sha1", "md5"):
            digest = self.document(f"checksums{path}.{algorithm}", hashlib.new(algorithm, data).hexdigest())
            self.serve(self.site, f"{path}.{algorithm}", digest, "text/plain", last_modified=last_modified)

    def _artifact(self, group, artifact, versions):
        folder = f"/{group.replace('.', '/')}/{artifact}"
        ordered = sorted(versions, key=version_key)
        for version in ordered:
            stem = f"{folder}/{version}/{artifact}-{version}"
            pom = self.document(f"files{stem}.pom", maven_pom(group, artifact, version))
            self._with_checksums(stem + ".pom", pom, "text/xml", versions[version])
            self._with_checksums(stem + ".jar", self.jar(group, artifact, version), "application/java-archive",
                                 versions[version])
        updated = max(versions.values())
        listed = "".join(f"      <version>{v}</version>\n" for v in ordered)
        metadata = (f'<?xml version="1.0" encoding="UTF-8"?>\n<metadata>\n  <groupId>{group}</groupId>\n'
                    f'  <artifactId>{artifact}</artifactId>\n  <versioning>\n    <latest>{ordered[-1]}</latest>\n'
                    f'    <release>{ordered[-1]}</release>\n    <versions>\n{listed}    </versions>\n'
                    f'    <lastUpdated>{time.strftime("%Y%m%d%H%M%S", time.gmtime(updated))}</lastUpdated>\n'
                    '  </versioning>\n</metadata>\n')
        self._with_checksums(f"{folder}/maven-metadata.xml", self.document(f"files{folder}/maven-metadata.xml",
                                                                           metadata), "text/xml", updated)


# ---------------------------------------------------------------------------
# Debian


class GpgSigner:
    """A throwaway OpenPGP key (in its own GnuPG home) that signs Release files; ``keyring`` is its
    public key for apt's signed-by. ``close()`` stops the gpg-agent that signing started."""

    USER = "Larder tests <tests@larder.invalid>"

    def __init__(self, home):
        self.home = Path(home)
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._gpg("--quick-generate-key", self.USER, "ed25519", "sign", "never")
        self.keyring = self.home / "archive-key.gpg"
        self.keyring.write_bytes(self._gpg("--export", self.USER).stdout)

    def _gpg(self, *args):
        return subprocess.run(["gpg", "--batch", "--homedir", self.home, "--pinentry-mode", "loopback",
                               "--passphrase", "", *args], check=True, capture_output=True, timeout=CLIENT_TIMEOUT)

    def clearsign(self, source, target):
        self._gpg("--digest-algo", "SHA256", "--local-user", self.USER, "--output", target, "--clearsign", source)

    def detach_sign(self, source, target):
        self._gpg("--digest-algo", "SHA256", "--local-user", self.USER, "--output", target, "--armor",
                  "--detach-sign", source)

    def close(self):
        subprocess.run(["gpgconf", "--homedir", str(self.home), "--kill", "gpg-agent"], capture_output=True,
                       timeout=30)


def host_architecture():
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True,
                          timeout=CLIENT_TIMEOUT).stdout.strip()


def deb_control_fields(name, version):
    return [("Package", name), ("Version", version), ("Architecture", "all"),
            ("Maintainer", "Larder tests <tests@larder.invalid>"),
            ("Description", "test package\n a package built by the tests")]


def build_deb(directory, name, version):
    """NAME_VERSION_all.deb, made by dpkg-deb from a control file and one data file."""
    work = Path(directory) / "tree"
    (work / "DEBIAN").mkdir(parents=True)
    (work / f"usr/share/{name}").mkdir(parents=True)
    (work / f"usr/share/{name}/README").write_text(f"{name} {version}, a package for a test archive\n" * 50)
    (work / "DEBIAN/control").write_text("".join(f"{k}: {v}\n" for k, v in deb_control_fields(name, version)))
    deb = Path(directory) / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(work), str(deb)], check=True,
                   capture_output=True, timeout=CLIENT_TIMEOUT,
                   env={**child_env(), "SOURCE_DATE_EPOCH": str(FIXED_MTIME)})
    shutil.rmtree(work)
    return deb


def pool_path(name, version):
    return f"pool/main/{name[0]}/{name}/{name}_{version}_all.deb"


class DebianArchive(Registry):
    """A Debian archive for ``apt-get``: pool/ with the .deb files, dists/SUITE/ with Release,
    InRelease and Release.gpg (signed by ``signer``, a GpgSigner; without one, Release alone:
    clients then need [trusted=yes]) and main/binary-ARCH/Packages, .gz and .xz; with ``by_hash``,
    the Release says Acquire-By-Hash: yes and each index is also at by-hash/SHA256/ and MD5Sum/.

    ``publish(packages)`` replaces what the archive offers, in place: new .deb files (the old stay
    in the pool, as on a real mirror), new indexes, a new Release dated later. Each publication is a
    directory of its own, and the routes move to it at once. ``packages``: {name: version};
    by default larder-hello 1.0."""

    def __init__(self, root, artifacts, packages=None, signer=None, by_hash=False, suite="stable", site="debian"):
        super().__init__(root, artifacts, (site,))
        self.site, self.suite, self.signer = site, suite, signer
        self.arch = host_architecture()
        self.generation = 0
        self.dated = 0
        self.packages = {}
        self.publish(packages or {"larder-hello": "1.0"}, by_hash=by_hash, announce=False)

    def deb(self, name, version):
        return self.artifacts.get("deb", name, version, lambda d: build_deb(d, name, version))

    @property
    def dists(self):
        return f"/dists/{self.suite}"

    @property
    def binary(self):
        return f"main/binary-{self.arch}"

    def publish(self, packages, by_hash=None, announce=True):
        """Offers ``packages`` ({name: version}) from now on; ``by_hash`` None keeps the current choice."""
        if by_hash is not None:
            self.by_hash = by_hash
        self.generation += 1
        self.packages = dict(packages)
        # Dated in the past (apt refuses a Release from the future) and later than the last one.
        now = int(time.time())
        self.dated = min(now, max(now - 3600, self.dated + 60))
        for name, version in self.packages.items():
            self.serve(self.site, "/" + pool_path(name, version), self.deb(name, version),
                       "application/vnd.debian.binary-package", last_modified=self.dated)
        indexes = self._indexes()
        self._release(indexes)
        if announce:
            self.changed()

    def _stanza(self, name, version):
        data = self.deb(name, version).read_bytes()
        digests = hashes(data)
        fields = deb_control_fields(name, version)
        fields[-1:-1] = [("Filename", pool_path(name, version)), ("Size", str(len(data))),
                         ("MD5sum", digests["md5"]), ("SHA1", digests["sha1"]), ("SHA256", digests["sha256"])]
        return "".join(f"{k}: {v}\n" for k, v in fields)

    def _indexes(self):
        """Packages, .gz and .xz of this publication: {path under dists/SUITE: file}."""
        packages = "\n".join(self._stanza(n, v) for n, v in sorted(self.packages.items())).encode()
        folder = f"dists-{self.generation}/{self.binary}"
        indexes = {f"{self.binary}/Packages": self.document(f"{folder}/Packages", packages),
                   f"{self.binary}/Packages.gz": self.document(f"{folder}/Packages.gz", gzip.compress(packages, mtime=0)),
                   f"{self.binary}/Packages.xz": self.document(f"{folder}/Packages.xz", lzma.compress(packages))}
        for relative, file in indexes.items():
            self.serve(self.site, f"{self.dists}/{relative}", file, "application/octet-stream",
                       last_modified=self.dated)
            if self.by_hash:
                data = file.read_bytes()
                for algorithm, field in (("sha256", "SHA256"), ("md5", "MD5Sum")):
                    self.serve(self.site, f"{self.dists}/{self.binary}/by-hash/{field}/"
                               f"{hashlib.new(algorithm, data).hexdigest()}", file, "application/octet-stream",
                               last_modified=self.dated)
        return indexes

    def _release(self, indexes):
        sections = []
        for field, algorithm in (("MD5Sum", "md5"), ("SHA256", "sha256")):
            lines = [f" {hashlib.new(algorithm, f.read_bytes()).hexdigest()} {f.stat().st_size} {relative}"
                     for relative, f in indexes.items()]
            sections.append(f"{field}:\n" + "\n".join(lines) + "\n")
        text = ("Origin: Larder tests\nLabel: Larder tests\n"
                f"Suite: {self.suite}\nCodename: {self.suite}\n"
                f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S UTC', time.gmtime(self.dated))}\n"
                f"Architectures: {self.arch}\nComponents: main\nDescription: an archive built by the tests\n"
                + ("Acquire-By-Hash: yes\n" if self.by_hash else "") + "".join(sections))
        folder = f"dists-{self.generation}"
        release = self.document(f"{folder}/Release", text)
        self.serve(self.site, f"{self.dists}/Release", release, "text/plain", last_modified=self.dated)
        if self.signer is None:
            return
        self.signer.clearsign(release, self.root / folder / "InRelease")
        self.signer.detach_sign(release, self.root / folder / "Release.gpg")
        for name in ("InRelease", "Release.gpg"):
            self.serve(self.site, f"{self.dists}/{name}", self.root / folder / name, "text/plain",
                       last_modified=self.dated)

    def source_line(self, url, signed_by=None, trusted=False):
        """The sources.list line for this archive at ``url`` (e.g. Larder's /debian prefix)."""
        options = []
        if signed_by:
            options.append(f"signed-by={signed_by}")
        if trusted:
            options.append("trusted=yes")
        opts = f"[{' '.join(options)}] " if options else ""
        return f"deb {opts}{url} {self.suite} main\n"


# ---------------------------------------------------------------------------
# RubyGems


def gemspec_yaml(name, version):
    return f"""--- !ruby/object:Gem::Specification
name: {name}
version: !ruby/object:Gem::Version
  version: {version}
platform: ruby
authors:
- Larder tests
bindir: bin
cert_chain: []
date: 2024-01-01 00:00:00.000000000 Z
dependencies: []
description: a gem built by the tests
executables: []
extensions: []
extra_rdoc_files: []
files:
- lib/{name.replace('-', '_')}.rb
licenses:
- MIT
metadata: {{}}
rdoc_options: []
require_paths:
- lib
required_ruby_version: !ruby/object:Gem::Requirement
  requirements:
  - - ">="
    - !ruby/object:Gem::Version
      version: '0'
required_rubygems_version: !ruby/object:Gem::Requirement
  requirements:
  - - ">="
    - !ruby/object:Gem::Version
      version: '0'
requirements: []
rubygems_version: 3.4.20
specification_version: 4
summary: a gem built by the tests
test_files: []
""".encode()


def build_gem(directory, name, version):
    """A .gem: a plain tar of metadata.gz, data.tar.gz and checksums.yaml.gz."""
    metadata = gzip.compress(gemspec_yaml(name, version), mtime=0)
    data_tar = Path(directory) / "data.tar.gz"
    write_tar(data_tar, {f"lib/{name.replace('-', '_')}.rb": f'VERSION = "{version}"\n'.encode()})
    data = data_tar.read_bytes()
    data_tar.unlink()
    checksums = "---\n" + "".join(
        f"{algorithm.upper()}:\n  metadata.gz: {hashlib.new(algorithm, metadata).hexdigest()}\n"
        f"  data.tar.gz: {hashlib.new(algorithm, data).hexdigest()}\n" for algorithm in ("sha256", "sha512"))
    members = {"metadata.gz": metadata, "data.tar.gz": data,
               "checksums.yaml.gz": gzip.compress(checksums.encode(), mtime=0)}
    return write_tar(Path(directory) / f"{name}-{version}.gem", members, compress=False)


def repr_digest(data):
    return "sha-256=:" + base64.b64encode(hashlib.sha256(data).digest()).decode() + ":"


class RubyGemsRegistry(Registry):
    """RubyGems' compact index (/names, /versions, /info/GEM, with Repr-Digest like rubygems.org)
    and the gems at /gems/NAME-VERSION.gem.

    ``gems``: {name: {version: time}}; by default larder-hello 1.0.0 and 1.1.0."""

    def __init__(self, root, artifacts, gems=None, now=None, site="rubygems"):
        super().__init__(root, artifacts, (site,))
        self.site = site
        self.gems = gems or {"larder-hello": {"1.0.0": days_ago(10, now), "1.1.0": days_ago(1, now)}}
        version_lines = []
        for name, versions in sorted(self.gems.items()):
            info = self._gem(name, versions)
            ordered = ",".join(sorted(versions, key=version_key))
            version_lines.append(f"{name} {ordered} {hashlib.md5(info).hexdigest()}\n")
        created = iso_utc(max(t for v in self.gems.values() for t in v.values()), 0)
        self._compact("/versions", f"created_at: {created}\n---\n" + "".join(version_lines))
        self._compact("/names", "---\n" + "".join(f"{n}\n" for n in sorted(self.gems)))

    def gem(self, name, version):
        return self.artifacts.get("gem", name, version, lambda d: build_gem(d, name, version))

    def _compact(self, path, text):
        file = self.document("compact" + path, text)
        self.serve(self.site, path, file, "text/plain; charset=utf-8",
                   headers={"Repr-Digest": repr_digest(file.read_bytes())})
        return file.read_bytes()

    def _gem(self, name, versions):
        lines = []
        for version in sorted(versions, key=version_key):
            path = self.gem(name, version)
            self.serve(self.site, f"/gems/{path.name}", path, "application/octet-stream",
                       last_modified=versions[version])
            lines.append(f"{version} |checksum:{hashlib.sha256(path.read_bytes()).hexdigest()}\n")
        return self._compact(f"/info/{name}", "---\n" + "".join(lines))


# ---------------------------------------------------------------------------
# The server


class RegistryServer:
    """registry_origin.py serving ``registries`` over TLS (``tls``), one listener per site (and one
    plain http listener more per site with ``plain_http``). Each request it answers is logged."""

    def __init__(self, workdir, tls, registries, plain_http=False, name="registry"):
        self.workdir = Path(workdir)
        self.tls = tls
        self.registries = list(registries)
        self.rules = []
        self.manifest_path = self.workdir / f"{name}-manifest.json"
        self.log_path = self.workdir / f"{name}-requests.jsonl"
        self.stderr_path = self.workdir / f"{name}.stderr"
        self._write_manifest()
        for registry in self.registries:
            registry.on_change(self._write_manifest)
        cmd = [sys.executable, HERE / "registry_origin.py", "--manifest", self.manifest_path, "--log",
               self.log_path, "--cert", tls.cert, "--key", tls.key] + (["--plain-http"] if plain_http else [])
        with open(self.stderr_path, "wb") as stderr:
            self.proc = spawn(cmd, stdout=subprocess.PIPE, stderr=stderr)
        self.ports = self._read_ports()

    def _read_ports(self):
        got = []
        reader = threading.Thread(target=lambda: got.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT)
        try:
            return json.loads(got[0])["sites"]
        except (IndexError, ValueError, KeyError):
            stop_process(self.proc, signal.SIGKILL, 5)
            raise AssertionError(f"registry server did not start: {got!r}\n{self.stderr_path.read_text()[-3000:]}")

    def _write_manifest(self):
        sites = {}
        for registry in self.registries:
            for site, routes in registry.routes.items():
                assert site not in sites, f"two registries serve the site {site!r}"
                sites[site] = {"routes": routes}
        temporary = self.manifest_path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"sites": sites, "rules": self.rules}))
        os.replace(temporary, self.manifest_path)  # the server reads the whole of one or the other

    # Addresses

    @property
    def ca(self):
        """The test CA's file, which a client needs to reach the https listeners."""
        return self.tls.ca

    def url(self, site):
        """https://127.0.0.1:PORT of ``site`` (what a mirror's upstream is)."""
        return f"https://127.0.0.1:{self.ports[site]['https']}"

    def http_url(self, site):
        """http://127.0.0.1:PORT of ``site`` (started with plain_http)."""
        return f"http://127.0.0.1:{self.ports[site]['http']}"

    # Behaviour set by the test

    def set_headers(self, glob, headers, site="*"):
        """Adds or replaces (None: removes) fields of every answer whose path matches ``glob``."""
        self.rules.append({"site": site, "glob": glob, "headers": headers})
        self._write_manifest()

    def set_status(self, glob, status, site="*"):
        """Answers ``status`` (e.g. 503) for every path matching ``glob``."""
        self.rules.append({"site": site, "glob": glob, "status": status})
        self._write_manifest()

    def clear_rules(self):
        self.rules = []
        self._write_manifest()

    # What it was asked

    def requests(self, site=None):
        """Every request so far ({time, site, scheme, method, path, status, headers}), oldest first."""
        if not self.log_path.exists():
            return []
        # A line still being written (no newline yet) is not a request yet.
        lines = self.log_path.read_text().split("\n")[:-1]
        records = [json.loads(line) for line in lines if line.strip()]
        return [r for r in records if site is None or r["site"] == site]

    def mark(self):
        """A point in the log: ``requests_since(mark)`` gives the requests after it."""
        return len(self.requests())

    def requests_since(self, mark, site=None):
        return [r for r in self.requests()[mark:] if site is None or r["site"] == site]

    def stop(self):
        stop_process(self.proc, signal.SIGTERM, 5)


# ---------------------------------------------------------------------------
# Real clients, each with state of its own


class ClientRun:
    """A finished client command: ``proc`` (its CompletedProcess) and ``output`` (stdout + stderr)."""

    def __init__(self, proc):
        self.proc = proc
        self.returncode = proc.returncode
        self.output = (proc.stdout or "") + (proc.stderr or "")


def require(binary, client=None):
    """Skips the test when ``binary`` is not installed."""
    path = shutil.which(binary)
    if path is None:
        pytest.skip(f"{client or binary} is not installed ({binary} not found on PATH)")
    return path


# Variables through which a client would read settings of this machine or of the user.
FOREIGN_SETTINGS = re.compile(r"^(PIP_|NPM_CONFIG_|CARGO_|RUSTFLAGS|MAVEN_|JAVA_TOOL_OPTIONS|GO|BUNDLE_|GEM_|"
                              r"APT_CONFIG|SSL_CERT_|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|NODE_)", re.IGNORECASE)


def isolated_env(home, **extra):
    """The environment of a client: no proxy, none of the machine's or user's client settings, a
    HOME of its own (rustup's home stays: cargo is rustup's proxy)."""
    rustup_home = os.environ.get("RUSTUP_HOME") or str(Path.home() / ".rustup")
    env = {k: v for k, v in child_env().items() if not FOREIGN_SETTINGS.match(k)}
    Path(home).mkdir(parents=True, exist_ok=True)
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(Path(home) / ".config"),
                "XDG_CACHE_HOME": str(Path(home) / ".cache"), "LC_ALL": "C", "RUSTUP_HOME": rustup_home,
                "RUSTUP_AUTO_INSTALL": "0"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_client(cmd, env, cwd, check=True, timeout=CLIENT_TIMEOUT):
    proc = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    run = ClientRun(proc)
    if check:
        assert run.returncode == 0, f"{' '.join(map(str, cmd))} exited with {run.returncode}:\n{run.output[-6000:]}"
    return run


def fresh_dir(parent, stem):
    """parent/stem-N, the first N not used yet."""
    n = 1
    while (Path(parent) / f"{stem}-{n}").exists():
        n += 1
    path = Path(parent) / f"{stem}-{n}"
    path.mkdir(parents=True)
    return path


# pip


def pip_install(workdir, index_url, *requirements, ca=None, cache_dir=None, target=None, extra=(), check=True):
    """``pip install --target DIR`` from ``index_url`` only (no configuration, no other index);
    ``cache_dir`` None: --no-cache-dir. Returns (ClientRun, target directory)."""
    base = fresh_dir(workdir, "pip")
    target = Path(target) if target else base / "target"
    cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--disable-pip-version-check", "--no-input",
           "--index-url", index_url, "--target", target, "--retries", "0", "--timeout", "20", "--no-color",
           "--progress-bar", "off"]
    cmd += ["--cache-dir", cache_dir] if cache_dir else ["--no-cache-dir"]
    cmd += ["--cert", ca] if ca else []
    env = isolated_env(base / "home", PIP_CONFIG_FILE=os.devnull)
    return run_client([*cmd, *extra, *requirements], env, base, check), target


def installed_module_version(target, module="larder_hello"):
    """The VERSION a module built by the tests says it is, read from its installed source."""
    match = re.search(r'VERSION = "([^"]+)"', (Path(target) / module / "__init__.py").read_text())
    return match.group(1)


# apt-get


class AptClient:
    """apt-get with every directory of its own (state, cache, sources, configuration: nothing of
    this machine's apt applies), kept between runs so a second ``update`` starts from the first's
    lists. ``source``: a sources.list line (DebianArchive.source_line). ``ca``: trusted for https;
    ``options``: more -o settings (e.g. Acquire::http::Proxy)."""

    def __init__(self, base, source, ca=None, options=None):
        require("apt-get")
        self.base = Path(base)
        for d in ("state/lists/partial", "cache/archives/partial", "etc/parts", "etc/sources.d", "etc/prefs.d",
                  "out"):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        (self.base / "state/status").write_text("")
        (self.base / "etc/sources.list").write_text(source)
        # Read instead of /etc/apt/apt.conf: no configuration of this machine's apt applies.
        (self.base / "etc/apt.conf").write_text(
            f'Dir::Etc::Parts "{self.base}/etc/parts";\nDir::Etc::Main "/dev/null";\n')
        self.options = {
            "Dir::State": self.base / "state", "Dir::State::status": self.base / "state/status",
            "Dir::Cache": self.base / "cache", "Dir::Etc::SourceList": self.base / "etc/sources.list",
            "Dir::Etc::SourceParts": self.base / "etc/sources.d", "Dir::Etc::Preferences": "/dev/null",
            "Dir::Etc::PreferencesParts": self.base / "etc/prefs.d", "Dir::Etc::Trusted": "/dev/null",
            "Dir::Etc::TrustedParts": self.base / "etc/parts",
            "APT::Sandbox::User": "root", "Acquire::Languages": "none", "Acquire::Retries": "0",
            "Debug::NoLocking": "true",
            **({"Acquire::https::CaInfo": ca, "Acquire::https::Verify-Peer": "true"} if ca else {}),
            **(options or {}),
        }

    @property
    def lists(self):
        return self.base / "state/lists"

    @property
    def out(self):
        return self.base / "out"

    def run(self, *command, check=True):
        args = [f"-o{k}={v}" for k, v in self.options.items()]
        env = {**isolated_env(self.base / "home"), "APT_CONFIG": str(self.base / "etc/apt.conf")}
        return run_client(["apt-get", "-q", *args, *command], env, self.out, check)

    def update(self, check=True):
        return self.run("update", check=check)

    def download(self, package, check=True):
        """``apt-get download``: the .deb lands in ``out``."""
        return self.run("download", package, check=check)


# npm


class NpmClient:
    """npm with a cache, configuration files and a project of its own, talking to ``registry``
    only: online every time (prefer-online), no audit, no funding or update notices."""

    def __init__(self, base, registry, ca=None):
        require("npm")
        self.base = Path(base)
        self.project = self.base / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        (self.project / "package.json").write_text(json.dumps({"name": "larder-client", "version": "1.0.0",
                                                               "private": True}))
        for name in ("npmrc", "global-npmrc"):
            (self.base / name).write_text("")
        self.env = isolated_env(
            self.base / "home", npm_config_userconfig=self.base / "npmrc",
            npm_config_globalconfig=self.base / "global-npmrc", npm_config_cache=self.base / "cache",
            npm_config_prefix=self.base / "prefix", npm_config_registry=registry, npm_config_audit="false",
            npm_config_fund="false", npm_config_update_notifier="false", npm_config_prefer_online="true",
            npm_config_fetch_retries="0", npm_config_strict_ssl="true", npm_config_loglevel="warn",
            npm_config_progress="false", **({"npm_config_cafile": ca} if ca else {}))

    def run(self, *args, check=True):
        return run_client(["npm", *args], self.env, self.project, check)

    def install(self, *specs, check=True):
        return self.run("install", "--no-save", *specs, check=check)

    def view(self, spec, *fields):
        """``npm view SPEC FIELDS --json``, parsed (reads the full document)."""
        return json.loads(self.run("view", spec, *fields, "--json").proc.stdout)

    def installed_version(self, name):
        return json.loads((self.project / "node_modules" / name / "package.json").read_text())["version"]


# cargo


class CargoClient:
    """cargo with a CARGO_HOME of its own whose crates.io is replaced by the sparse index at
    ``index_url`` (http(s)://.../), and a project depending on ``dependencies`` ({crate: requirement})."""

    def __init__(self, base, index_url, dependencies, ca=None):
        require("cargo")
        self.base = Path(base)
        self.home = self.base / "cargo-home"
        self.project = self.base / "project"
        (self.project / "src").mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        config = ('[source.crates-io]\nreplace-with = "larder-test"\n\n'
                  f'[source.larder-test]\nregistry = "sparse+{index_url.rstrip("/")}/"\n\n'
                  '[net]\nretry = 0\n\n[http]\ntimeout = 30\n' + (f'cainfo = "{ca}"\n' if ca else ""))
        (self.home / "config.toml").write_text(config)
        deps = "".join(f'"{name}" = "{requirement}"\n' for name, requirement in dependencies.items())
        (self.project / "Cargo.toml").write_text('[package]\nname = "larder-client"\nversion = "0.1.0"\n'
                                                 f'edition = "2021"\n\n[dependencies]\n{deps}')
        (self.project / "src/lib.rs").write_text("")
        self.env = isolated_env(self.base / "home", CARGO_HOME=self.home, CARGO_TERM_COLOR="never",
                                CARGO_HTTP_MULTIPLEXING="false")

    def run(self, *args, check=True):
        return run_client(["cargo", *args], self.env, self.project, check)

    def generate_lockfile(self, check=True):
        return self.run("generate-lockfile", check=check)

    def fetch(self, check=True):
        return self.run("fetch", check=check)

    def locked(self):
        """{crate: (version, checksum)} from Cargo.lock."""
        lock = tomllib.loads((self.project / "Cargo.lock").read_text())
        return {p["name"]: (p["version"], p.get("checksum")) for p in lock.get("package", [])}

    def unpacked(self, name, version):
        """The crate's source as cargo unpacked it (None if it did not)."""
        found = list((self.home / "registry/src").glob(f"*/{name}-{version}"))
        return found[0] if found else None


# Maven


class MavenClient:
    """mvn with settings, a local repository and a project of its own; every repository is
    mirrored by ``repo_url``. Resolves artifacts as the project's core extensions
    (.mvn/extensions.xml) while ``mvn validate`` starts: Maven's own resolver and transport, and no
    plugin (none is installed here, and none may be fetched from the internet). With ``tls`` (the
    RegistryTLS), Java trusts only the test CA."""

    def __init__(self, base, repo_url, tls=None):
        require("mvn", "Maven")
        self.base = Path(base)
        self.local = self.base / "local-repository"
        self.project = self.base / "project"
        (self.project / ".mvn").mkdir(parents=True, exist_ok=True)
        (self.base / "settings.xml").write_text(
            f"<settings>\n  <localRepository>{self.local}</localRepository>\n  <mirrors>\n"
            f"    <mirror><id>larder-test</id><mirrorOf>*</mirrorOf><url>{repo_url}</url></mirror>\n"
            "  </mirrors>\n</settings>\n")
        (self.base / "global-settings.xml").write_text("<settings/>\n")
        (self.project / "pom.xml").write_text(
            '<project xmlns="http://maven.apache.org/POM/4.0.0">\n  <modelVersion>4.0.0</modelVersion>\n'
            "  <groupId>test</groupId><artifactId>larder-client</artifactId><version>1</version>\n"
            "  <packaging>pom</packaging>\n</project>\n")
        # Quick to start (a JIT that compiles less): mvn runs for a few seconds at most here.
        java = ["-XX:TieredStopAtLevel=1", "-Xshare:auto"]
        if tls is not None:
            java += [f"-Djavax.net.ssl.trustStore={tls.java_truststore()}",
                     "-Djavax.net.ssl.trustStorePassword=changeit", "-Djavax.net.ssl.trustStoreType=PKCS12"]
        self.env = isolated_env(self.base / "home", MAVEN_OPTS=" ".join(java))

    def resolve(self, *coordinates, check=True):
        """Resolves "group:artifact:version" (a version range such as [1.0,2.0) reads maven-metadata.xml)
        with strict checksums (-C: a wrong .sha1 fails)."""
        extensions = "".join(f"  <extension><groupId>{g}</groupId><artifactId>{a}</artifactId>"
                             f"<version>{v}</version></extension>\n"
                             for g, a, v in (c.split(":") for c in coordinates))
        (self.project / ".mvn/extensions.xml").write_text(f"<extensions>\n{extensions}</extensions>\n")
        return run_client(["mvn", "-B", "-C", "-s", self.base / "settings.xml", "-gs",
                           self.base / "global-settings.xml", "validate"], self.env, self.project, check)

    def resolved(self, group, artifact, version, ext="jar"):
        return self.local / group.replace(".", "/") / artifact / version / f"{artifact}-{version}.{ext}"


# curl (the Go and RubyGems clients are not installed here)


class Fetched:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # {lower-case name: value}
        self.body = body

    def header(self, name):
        return self.headers.get(name.lower())


def curl_get(url, ca=None, headers=(), method="GET"):
    """``url`` fetched by curl (no proxy, the test CA only); a Fetched."""
    require("curl")
    # -q first: no .curlrc is read.
    cmd = ["curl", "-q", "-sS", "--max-time", "30", "--noproxy", "*", "--proto", "=http,https", "-D", "-",
           "-o", "-", "-X", method]
    cmd += ["--cacert", ca] if ca else []
    for name, value in headers:
        cmd += ["-H", f"{name}: {value}"]
    if method == "HEAD":
        cmd += ["-I"]
    proc = subprocess.run([*cmd, url], capture_output=True, env=child_env(), timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"curl {url}: {proc.stderr.decode(errors='replace')}"
    head, _, body = proc.stdout.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parsed = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        parsed[name.strip().lower()] = value.strip()
    return Fetched(int(lines[0].split()[1]), parsed, body)


# ---------------------------------------------------------------------------
# Fixtures (import them into a test module: ``from registries import registry_tls, ...``)


@pytest.fixture(scope="session")
def registry_tls(tmp_path_factory):
    """The registries' test CA and certificate, made once a session."""
    return make_registry_tls(tmp_path_factory.mktemp("registry-tls"))


@pytest.fixture(scope="session")
def registry_artifacts(tmp_path_factory):
    """The session's ArtifactCache."""
    return ArtifactCache(tmp_path_factory.mktemp("registry-artifacts"))


@pytest.fixture(scope="session")
def debian_signer(tmp_path_factory):
    """A GpgSigner for DebianArchive, or None when gpg is not installed."""
    if not (shutil.which("gpg") and shutil.which("gpgconf")):
        yield None
        return
    signer = GpgSigner(tmp_path_factory.mktemp("registry-gpg"))
    yield signer
    signer.close()


@pytest.fixture
def registry_server_factory(workdir, registry_tls):
    """``start(registries, plain_http=False, name=None)``: a RegistryServer, stopped after the test."""
    started = []

    def start(registries, plain_http=False, name=None):
        server = RegistryServer(workdir, registry_tls, registries, plain_http, name or f"registry{len(started) + 1}")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
