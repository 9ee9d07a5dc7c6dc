"""The test registries of registries.py, checked with the real clients directly (no Larder between
them), so the mirror tests can rely on them: pip, npm, cargo, Maven and apt-get over TLS with the test
CA (and pip over plain http), curl for the Go module proxy and RubyGems (neither go nor gem is
installed here). Nothing leaves 127.0.0.1."""

import gzip
import hashlib
import io
import json
import re
import shutil
import tarfile
import zipfile

import pytest

from registries import (CratesRegistry, DebianArchive, GoProxy, MavenRepository, NpmRegistry, PyPIRegistry,
                        RubyGemsRegistry, AptClient, CargoClient, MavenClient, NpmClient, crate_index_path,
                        curl_get, days_ago, debian_signer, go_sum_lines, installed_module_version, iso_utc,
                        npm_integrity, pip_install, registry_artifacts, registry_server_factory,  # noqa: F401
                        registry_tls)  # noqa: F401 (fixtures)

NOW = 1760000000  # a fixed present for upload times: 2025-10-09T08:53:20Z


def paths(records):
    return [r["path"] for r in records]


def header(record, name):
    return next((v for k, v in record["headers"] if k.lower() == name.lower()), None)


# ---------------------------------------------------------------------------
# PyPI


@pytest.fixture
def pypi(workdir, registry_artifacts):
    return PyPIRegistry(workdir / "pypi", registry_artifacts, now=NOW)


def test_pip_installs_a_wheel_from_the_json_index_over_tls(workdir, pypi, registry_tls, registry_server_factory):
    server = registry_server_factory([pypi])
    _, target = pip_install(workdir, server.url("pypi") + "/simple/", "larder-hello==1.1", ca=registry_tls.ca,
                            extra=["--only-binary", ":all:"])
    assert installed_module_version(target) == "1.1"
    index = [r for r in server.requests("pypi") if r["path"] == "/simple/larder-hello/"]
    assert index and header(index[0], "Accept").startswith("application/vnd.pypi.simple.v1+json"), index
    files = paths(server.requests("files"))
    assert any(p.endswith("/larder_hello-1.1-py3-none-any.whl") for p in files), files
    assert all(r["scheme"] == "https" for r in server.requests())


def test_pip_builds_the_sdist_with_its_in_tree_backend(workdir, pypi, registry_tls, registry_server_factory):
    server = registry_server_factory([pypi])
    _, target = pip_install(workdir, server.url("pypi") + "/simple/", "larder-hello==1.0", ca=registry_tls.ca,
                            extra=["--no-binary", ":all:"])
    assert installed_module_version(target) == "1.0"
    assert any(p.endswith("/larder_hello-1.0.tar.gz") for p in paths(server.requests("files")))


def test_pip_reads_the_html_index_over_plain_http(workdir, registry_artifacts, registry_server_factory):
    html_only = PyPIRegistry(workdir / "pypi", registry_artifacts, now=NOW, forms=("html",))
    server = registry_server_factory([html_only], plain_http=True)
    _, target = pip_install(workdir, server.http_url("pypi") + "/simple/", "larder-hello")
    assert installed_module_version(target) == "1.2"
    # The page served over plain http points at the files host over plain http.
    assert server.requests("files") and all(r["scheme"] == "http" for r in server.requests())


def test_simple_index_negotiates_its_form_and_files_carry_their_upload_time(pypi, registry_tls,
                                                                            registry_server_factory):
    server = registry_server_factory([pypi])
    page = server.url("pypi") + "/simple/larder-hello/"
    as_json = curl_get(page, registry_tls.ca, [("Accept", "application/vnd.pypi.simple.v1+json")])
    as_html = curl_get(page, registry_tls.ca, [("Accept", "text/html")])
    assert as_json.header("Content-Type") == "application/vnd.pypi.simple.v1+json"
    assert as_html.header("Content-Type").startswith("text/html")
    assert as_json.header("Vary") == as_html.header("Vary") == "Accept"
    doc = json.loads(as_json.body)
    assert doc["meta"]["api-version"] == "1.1" and doc["versions"] == ["1.0", "1.1", "1.2"]
    newest = [f for f in doc["files"] if "-1.2" in f["filename"]]
    assert {f["upload-time"] for f in newest} == {iso_utc(days_ago(1, NOW))}
    wheel = next(f for f in newest if f["filename"].endswith(".whl"))
    assert wheel["url"].startswith(server.url("files") + "/packages/") and wheel["url"] in as_html.body.decode()
    got = curl_get(wheel["url"], registry_tls.ca)
    assert hashlib.sha256(got.body).hexdigest() == wheel["hashes"]["sha256"] and len(got.body) == wheel["size"]
    assert got.header("Last-Modified") == "Wed, 08 Oct 2025 08:53:20 GMT"  # one day before NOW
    metadata = curl_get(wheel["url"] + ".metadata", registry_tls.ca)
    assert hashlib.sha256(metadata.body).hexdigest() == wheel["core-metadata"]["sha256"]
    # Revalidation and ranges, as a cache in front of it would ask.
    assert curl_get(wheel["url"], registry_tls.ca, [("If-None-Match", got.header("ETag"))]).status == 304
    assert curl_get(wheel["url"], registry_tls.ca, [("If-Modified-Since", got.header("Last-Modified"))]).status == 304
    part = curl_get(wheel["url"], registry_tls.ca, [("Range", "bytes=10-19")])
    assert part.status == 206 and part.body == got.body[10:20]
    api = json.loads(curl_get(server.url("pypi") + "/pypi/larder-hello/json", registry_tls.ca).body)
    assert api["info"]["version"] == "1.2" and sorted(api["releases"]) == ["1.0", "1.1", "1.2"]
    assert curl_get(server.url("pypi") + "/simple/larder-hello", registry_tls.ca).status == 301


# ---------------------------------------------------------------------------
# npm


def test_npm_installs_plain_and_scoped_packages_over_tls(workdir, registry_artifacts, registry_tls,
                                                         registry_server_factory):
    npm = NpmRegistry(workdir / "npm", registry_artifacts, now=NOW)
    server = registry_server_factory([npm])
    client = NpmClient(workdir / "npm-client", server.url("npm") + "/", ca=registry_tls.ca)
    client.install("larder-hello@1.1.0", "@larder-test/scoped-hello")
    assert client.installed_version("larder-hello") == "1.1.0"
    assert client.installed_version("@larder-test/scoped-hello") == "1.0.0"
    asked = server.requests("npm")
    documents = [r for r in asked if not r["path"].endswith(".tgz")]
    assert sorted(paths(documents)) == ["/@larder-test%2fscoped-hello", "/larder-hello"], paths(asked)
    # npm 10 asks for the full document (application/json) when it installs; the abbreviated one
    # is checked in the next test.
    assert all(r["status"] == 200 for r in asked), asked
    assert "/larder-hello/-/larder-hello-1.1.0.tgz" in paths(asked)
    # The full document, as npm view reads it: publication times and dist-tags.
    times = client.view("larder-hello", "time")
    assert times["2.0.0"] == iso_utc(days_ago(1, NOW), 3)
    assert client.view("larder-hello", "dist-tags") == {"latest": "2.0.0"}


def test_npm_documents_carry_correct_integrity(workdir, registry_artifacts, registry_tls, registry_server_factory):
    npm = NpmRegistry(workdir / "npm", registry_artifacts, now=NOW)
    server = registry_server_factory([npm])
    short = curl_get(server.url("npm") + "/larder-hello", registry_tls.ca,
                     [("Accept", "application/vnd.npm.install-v1+json")])
    assert short.header("Content-Type") == "application/vnd.npm.install-v1+json" and short.header("Vary") == "Accept"
    doc = json.loads(short.body)
    assert "time" not in doc and doc["dist-tags"]["latest"] == "2.0.0"
    dist = doc["versions"]["1.0.0"]["dist"]
    assert dist["tarball"] == server.url("npm") + "/larder-hello/-/larder-hello-1.0.0.tgz"
    tarball = curl_get(dist["tarball"], registry_tls.ca).body
    assert npm_integrity(tarball) == dist["integrity"] and hashlib.sha1(tarball).hexdigest() == dist["shasum"]
    with tarfile.open(fileobj=io.BytesIO(tarball)) as tar:
        assert json.load(tar.extractfile("package/package.json"))["version"] == "1.0.0"
    full = json.loads(curl_get(server.url("npm") + "/@larder-test%2fscoped-hello", registry_tls.ca,
                               [("Accept", "application/json")]).body)
    assert full["name"] == "@larder-test/scoped-hello" and "1.0.0" in full["time"]


# ---------------------------------------------------------------------------
# crates.io


@pytest.mark.parametrize("scheme", ["https", "http"])
def test_cargo_resolves_and_fetches_from_the_sparse_index(workdir, registry_artifacts, registry_tls,
                                                          registry_server_factory, scheme):
    crates = CratesRegistry(workdir / "crates", registry_artifacts)
    server = registry_server_factory([crates], plain_http=True)
    if scheme == "https":
        client = CargoClient(workdir / "cargo", server.url("crates"), {"larder-hello": "1"}, ca=registry_tls.ca)
    else:  # as through a mirror, which clients reach over plain http
        client = CargoClient(workdir / "cargo", server.http_url("crates"), {"larder-hello": "1"})
    client.generate_lockfile()
    version, checksum = client.locked()["larder-hello"]
    assert version == "1.1.0"
    assert checksum == hashlib.sha256(crates.crate("larder-hello", "1.1.0").read_bytes()).hexdigest()
    client.fetch()
    assert (client.unpacked("larder-hello", "1.1.0") / "src/lib.rs").read_text() == \
        'pub const VERSION: &str = "1.1.0";\n'
    assert paths(server.requests("crates")) == ["/config.json", "/la/rd/larder-hello"]
    assert paths(server.requests("crates-dl")) == ["/crates/larder-hello/1.1.0/download"]
    assert {r["scheme"] for r in server.requests()} == {scheme}


def test_crate_index_paths_follow_cargos_layout():
    assert [crate_index_path(n) for n in ("a", "ab", "abc", "abcd", "Larder-Hello")] == \
        ["/1/a", "/2/ab", "/3/a/abc", "/ab/cd/abcd", "/la/rd/larder-hello"]


# ---------------------------------------------------------------------------
# Maven


def test_maven_resolves_an_artifact_and_a_version_range_over_tls(workdir, registry_artifacts, registry_tls,
                                                                 registry_server_factory):
    maven = MavenRepository(workdir / "maven", registry_artifacts, now=NOW)
    server = registry_server_factory([maven])
    client = MavenClient(workdir / "mvn", server.url("maven"), tls=registry_tls)
    client.resolve("com.example:larder-hello:[1.0,2.0)")
    jar = client.resolved("com.example", "larder-hello", "1.1")
    assert jar.read_bytes() == maven.jar("com.example", "larder-hello", "1.1").read_bytes()
    asked = paths(server.requests("maven"))
    for path in ("/com/example/larder-hello/maven-metadata.xml", "/com/example/larder-hello/maven-metadata.xml.sha1",
                 "/com/example/larder-hello/1.1/larder-hello-1.1.pom.sha1",
                 "/com/example/larder-hello/1.1/larder-hello-1.1.jar.sha1"):
        assert path in asked, asked


# ---------------------------------------------------------------------------
# Debian


def apt_client(workdir, archive, server, registry_tls, debian_signer, name="apt"):
    keyring = debian_signer.keyring if debian_signer else None
    source = archive.source_line(server.url("debian"), signed_by=keyring, trusted=keyring is None)
    options = {} if keyring else {"APT::Get::AllowUnauthenticated": "true"}
    return AptClient(workdir / name, source, ca=registry_tls.ca, options=options)


@pytest.mark.timeout_s(120)
@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_apt_get_follows_the_archive_as_it_changes(workdir, registry_artifacts, registry_tls, debian_signer,
                                                   registry_server_factory, signed):
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        pytest.skip("apt-get or dpkg-deb is not installed")
    if signed and debian_signer is None:
        pytest.skip("gpg is not installed: the archive cannot be signed")
    debian_signer = debian_signer if signed else None
    archive = DebianArchive(workdir / "debian", registry_artifacts, signer=debian_signer)
    server = registry_server_factory([archive])
    server.set_headers("*/InRelease", {"Cache-Control": "max-age=60"})
    server.set_headers("*/Packages*", {"Cache-Control": "max-age=300"})
    apt = apt_client(workdir, archive, server, registry_tls, debian_signer)
    apt.update()
    apt.download("larder-hello")
    assert (apt.out / "larder-hello_1.0_all.deb").read_bytes() == archive.deb("larder-hello", "1.0").read_bytes()
    first = paths(server.requests())
    assert ("/dists/stable/InRelease" if debian_signer else "/dists/stable/Release") in first, first

    # The mirror changes between two updates: a new version, by-hash indexes.
    mark = server.mark()
    archive.publish({"larder-hello": "1.1"}, by_hash=True)
    apt.update()
    apt.download("larder-hello")
    assert (apt.out / "larder-hello_1.1_all.deb").exists()
    again = server.requests_since(mark)
    by_hash = [p for p in paths(again) if "/by-hash/SHA256/" in p]
    # Unsigned, the archive has no InRelease or Release.gpg: apt asks, is told 404, reads Release.
    unsigned_misses = () if debian_signer else ("/dists/stable/InRelease", "/dists/stable/Release.gpg")
    assert by_hash and all(r["status"] == 200 for r in again if r["path"] not in unsigned_misses), again
    inrelease = curl_get(server.url("debian") + "/dists/stable/InRelease", registry_tls.ca)
    if debian_signer:
        assert inrelease.header("Cache-Control") == "max-age=60"
        assert b"Acquire-By-Hash: yes" in inrelease.body and b"BEGIN PGP SIGNATURE" in inrelease.body
    packages = curl_get(server.url("debian") + f"/dists/stable/main/binary-{archive.arch}/Packages.gz", registry_tls.ca)
    assert packages.header("Cache-Control") == "max-age=300"
    assert b"Version: 1.1\n" in gzip.decompress(packages.body)


# ---------------------------------------------------------------------------
# Go module proxy (no go binary here: curl and Python check the protocol's documents)


def test_go_proxy_serves_list_info_mod_and_a_module_zip(workdir, registry_artifacts, registry_tls,
                                                        registry_server_factory):
    go = GoProxy(workdir / "go", registry_artifacts, now=NOW)
    server = registry_server_factory([go])
    module = server.url("go") + "/example.com/larder/hello"
    assert curl_get(module + "/@v/list", registry_tls.ca).body == b"v1.0.0\nv1.1.0\n"
    info = json.loads(curl_get(module + "/@v/v1.1.0.info", registry_tls.ca).body)
    assert info == {"Version": "v1.1.0", "Time": iso_utc(days_ago(1, NOW), 0)}
    assert json.loads(curl_get(module + "/@latest", registry_tls.ca).body) == info
    assert curl_get(module + "/@v/v1.1.0.mod", registry_tls.ca).body.startswith(b"module example.com/larder/hello\n")
    archive = curl_get(module + "/@v/v1.1.0.zip", registry_tls.ca).body
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        names = z.namelist()
        assert all(n.startswith("example.com/larder/hello@v1.1.0/") for n in names), names
        assert z.read("example.com/larder/hello@v1.1.0/go.mod") == \
            curl_get(module + "/@v/v1.1.0.mod", registry_tls.ca).body
    lines = go_sum_lines("example.com/larder/hello", "v1.1.0", go.zip("example.com/larder/hello", "v1.1.0"))
    assert all(re.fullmatch(r"\S+ v1\.1\.0(/go\.mod)? h1:[A-Za-z0-9+/]{43}=", line) for line in lines), lines
    assert curl_get(module + "/@v/v9.9.9.info", registry_tls.ca).status == 404


# ---------------------------------------------------------------------------
# RubyGems (no gem binary here: curl and Python check the compact index and the gems)


def test_rubygems_compact_index_matches_its_gems(workdir, registry_artifacts, registry_tls, registry_server_factory):
    gems = RubyGemsRegistry(workdir / "rubygems", registry_artifacts, now=NOW)
    server = registry_server_factory([gems])
    versions = curl_get(server.url("rubygems") + "/versions", registry_tls.ca)
    info = curl_get(server.url("rubygems") + "/info/larder-hello", registry_tls.ca)
    assert versions.body.split(b"\n---\n", 1)[1] == \
        f"larder-hello 1.0.0,1.1.0 {hashlib.md5(info.body).hexdigest()}\n".encode()
    assert info.header("Repr-Digest").startswith("sha-256=:")
    checksums = dict(re.findall(r"^(\S+) \|checksum:([0-9a-f]{64})$", info.body.decode(), re.M))
    assert sorted(checksums) == ["1.0.0", "1.1.0"]
    gem = curl_get(server.url("rubygems") + "/gems/larder-hello-1.1.0.gem", registry_tls.ca).body
    assert hashlib.sha256(gem).hexdigest() == checksums["1.1.0"]
    with tarfile.open(fileobj=io.BytesIO(gem)) as tar:
        assert sorted(tar.getnames()) == ["checksums.yaml.gz", "data.tar.gz", "metadata.gz"]
        spec = gzip.decompress(tar.extractfile("metadata.gz").read()).decode()
    assert "name: larder-hello\n" in spec and "  version: 1.1.0\n" in spec
    # Bundler appends to /versions with a range request.
    tail = curl_get(server.url("rubygems") + "/versions", registry_tls.ca, [("Range", "bytes=10-")])
    assert tail.status == 206 and tail.body == versions.body[10:]
    assert curl_get(server.url("rubygems") + "/names", registry_tls.ca).body == b"---\nlarder-hello\n"


# ---------------------------------------------------------------------------
# The server's own behaviour


def test_rules_set_status_and_headers_and_every_request_is_logged(workdir, pypi, registry_tls,
                                                                  registry_server_factory):
    server = registry_server_factory([pypi])
    page = server.url("pypi") + "/simple/larder-hello/"
    server.set_status("/simple/*", 503, site="pypi")
    assert curl_get(page, registry_tls.ca).status == 503
    server.clear_rules()
    server.set_headers("/simple/*", {"Cache-Control": "max-age=5", "ETag": None})
    got = curl_get(page, registry_tls.ca)
    assert got.status == 200 and got.header("Cache-Control") == "max-age=5" and got.header("ETag") is None
    mark = server.mark()
    assert curl_get(server.url("pypi") + "/nothing", registry_tls.ca).status == 404
    assert [(r["path"], r["status"]) for r in server.requests_since(mark)] == [("/nothing", 404)]
    assert [r["status"] for r in server.requests("pypi")] == [503, 200, 404]
