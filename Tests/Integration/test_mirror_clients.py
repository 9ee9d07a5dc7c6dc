"""The real clients through Larder's mirror endpoints, with no CA and no proxy configured on any
client: each installs (or fetches) a small package twice, the second time from the cache with the
registry seeing nothing. The registries (registries.py) are built here and served over TLS with a
test CA that only Larder trusts. Clients without their binary here (go, gem) are played by curl
speaking their protocol."""

import gzip
import hashlib
import json
import shutil

import pytest

from registries import (CratesRegistry, DebianArchive, GoProxy, MavenRepository, NpmRegistry, PyPIRegistry,
                        RubyGemsRegistry, AptClient, CargoClient, MavenClient, NpmClient, curl_get,
                        debian_signer, installed_module_version, pip_install, registry_artifacts,  # noqa: F401
                        registry_server_factory, registry_tls)  # noqa: F401 (fixtures)


def mirrored(larder_factory, registry_tls, *mirrors, **config):
    return larder_factory(config={"workers": 1, "tls": {"ca_file": str(registry_tls.ca)}, "mirrors": list(mirrors),
                                  **config})


def base(lr, name):
    return f"http://127.0.0.1:{lr.port}/{name}/"


def test_pip_installs_through_the_pypi_mirror_twice(workdir, larder_factory, registry_artifacts, registry_tls,
                                                    registry_server_factory):
    upstream = registry_server_factory([PyPIRegistry(workdir / "pypi", registry_artifacts)])
    lr = mirrored(larder_factory, registry_tls, {"name": "pypi", "upstream": upstream.url("pypi") + "/",
                                                 "also": {"files": upstream.url("files") + "/"}})
    index = base(lr, "pypi") + "simple/"
    _, target = pip_install(workdir, index, "larder-hello==1.1")
    assert installed_module_version(target) == "1.1"
    files = [r["path"] for r in upstream.requests("files")]
    assert any(p.endswith("larder_hello-1.1-py3-none-any.whl") for p in files), files
    mark = upstream.mark()
    _, again = pip_install(workdir, index, "larder-hello==1.1")
    assert installed_module_version(again) == "1.1"
    assert upstream.requests_since(mark) == []
    # The sdist too, built by pip from what the mirror served.
    _, sdist = pip_install(workdir, index, "larder-hello==1.0", extra=["--no-binary", ":all:"])
    assert installed_module_version(sdist) == "1.0"


def test_npm_installs_through_the_npm_mirror_twice(workdir, larder_factory, registry_artifacts, registry_tls,
                                                   registry_server_factory):
    npm = NpmRegistry(workdir / "npm", registry_artifacts)
    upstream = registry_server_factory([npm])
    lr = mirrored(larder_factory, registry_tls, {"name": "npm", "upstream": upstream.url("npm") + "/"})
    client = NpmClient(workdir / "npm-client", base(lr, "npm"))
    client.install("larder-hello@1.1.0", "@larder-test/scoped-hello")
    assert client.installed_version("larder-hello") == "1.1.0"
    assert client.installed_version("@larder-test/scoped-hello") == "1.0.0"
    tarballs = [r["path"] for r in upstream.requests("npm") if r["path"].endswith(".tgz")]
    assert "/larder-hello/-/larder-hello-1.1.0.tgz" in tarballs
    mark = upstream.mark()
    again = NpmClient(workdir / "npm-client-2", base(lr, "npm"))
    again.install("larder-hello@1.1.0", "@larder-test/scoped-hello")
    assert again.installed_version("larder-hello") == "1.1.0"
    assert upstream.requests_since(mark) == []


def test_cargo_fetches_through_the_crates_mirror_twice(workdir, larder_factory, registry_artifacts, registry_tls,
                                                       registry_server_factory):
    crates = CratesRegistry(workdir / "crates", registry_artifacts)
    upstream = registry_server_factory([crates])
    lr = mirrored(larder_factory, registry_tls, {"name": "crates", "upstream": upstream.url("crates") + "/",
                                                 "also": {"dl": upstream.url("crates-dl") + "/crates/"}})
    for name in ("cargo", "cargo-2"):
        mark = upstream.mark()
        client = CargoClient(workdir / name, base(lr, "crates").rstrip("/"), {"larder-hello": "1"})
        client.generate_lockfile()
        version, checksum = client.locked()["larder-hello"]
        assert version == "1.1.0"
        assert checksum == hashlib.sha256(crates.crate("larder-hello", "1.1.0").read_bytes()).hexdigest()
        client.fetch()
        assert (client.unpacked("larder-hello", "1.1.0") / "src/lib.rs").exists()
        if name == "cargo":
            assert [r["path"] for r in upstream.requests("crates-dl")] == ["/crates/larder-hello/1.1.0/download"]
        else:
            assert upstream.requests_since(mark) == []


def test_maven_resolves_through_the_maven_mirror_twice(workdir, larder_factory, registry_artifacts, registry_tls,
                                                       registry_server_factory):
    maven = MavenRepository(workdir / "maven", registry_artifacts)
    upstream = registry_server_factory([maven])
    lr = mirrored(larder_factory, registry_tls, {"name": "maven", "upstream": upstream.url("maven") + "/"})
    for name in ("mvn", "mvn-2"):
        mark = upstream.mark()
        client = MavenClient(workdir / name, base(lr, "maven").rstrip("/"))
        client.resolve("com.example:larder-hello:1.1")
        jar = client.resolved("com.example", "larder-hello", "1.1")
        assert jar.read_bytes() == maven.jar("com.example", "larder-hello", "1.1").read_bytes()
        if name == "mvn-2":
            assert upstream.requests_since(mark) == []


def test_the_go_module_proxy_protocol_through_the_go_mirror_twice(workdir, larder_factory, registry_artifacts,
                                                                  registry_tls, registry_server_factory):
    go = GoProxy(workdir / "go", registry_artifacts)
    upstream = registry_server_factory([go])
    lr = mirrored(larder_factory, registry_tls, {"name": "go", "upstream": upstream.url("go") + "/"})
    module = base(lr, "go") + "example.com/larder/hello/@v/"
    for round in (1, 2):
        mark = upstream.mark()
        assert curl_get(module + "list").body == b"v1.0.0\nv1.1.0\n"
        assert json.loads(curl_get(module + "v1.1.0.info").body)["Version"] == "v1.1.0"
        assert curl_get(module + "v1.1.0.zip").body == go.zip("example.com/larder/hello", "v1.1.0").read_bytes()
        if round == 2:
            assert upstream.requests_since(mark) == []


def test_the_rubygems_compact_index_through_the_rubygems_mirror_twice(workdir, larder_factory, registry_artifacts,
                                                                      registry_tls, registry_server_factory):
    gems = RubyGemsRegistry(workdir / "rubygems", registry_artifacts)
    upstream = registry_server_factory([gems])
    lr = mirrored(larder_factory, registry_tls, {"name": "rubygems", "upstream": upstream.url("rubygems") + "/"})
    for round in (1, 2):
        mark = upstream.mark()
        info = curl_get(base(lr, "rubygems") + "info/larder-hello")
        assert info.status == 200 and b"1.1.0" in info.body
        gem = curl_get(base(lr, "rubygems") + "gems/larder-hello-1.1.0.gem")
        assert gem.status == 200 and hashlib.sha256(gem.body).hexdigest() in info.body.decode()
        if round == 2:
            assert upstream.requests_since(mark) == []


def apt_through(workdir, archive, lr, path, signer, name, options=None):
    keyring = signer.keyring if signer else None
    source = archive.source_line(f"http://127.0.0.1:{lr.port}/{path}", signed_by=keyring, trusted=keyring is None)
    opts = {} if keyring else {"APT::Get::AllowUnauthenticated": "true"}
    return AptClient(workdir / name, source, options={**opts, **(options or {})})


@pytest.mark.timeout_s(180)
def test_apt_installs_through_the_debian_mirror_twice(workdir, larder_factory, registry_artifacts, registry_tls,
                                                      registry_server_factory, debian_signer):
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        pytest.skip("apt-get or dpkg-deb is not installed")
    archive = DebianArchive(workdir / "debian", registry_artifacts, signer=debian_signer)
    upstream = registry_server_factory([archive])
    lr = mirrored(larder_factory, registry_tls, {"name": "debian", "upstream": upstream.url("debian") + "/"})
    for name in ("apt", "apt-2"):
        mark = upstream.mark()
        apt = apt_through(workdir, archive, lr, "debian", debian_signer, name)
        apt.update()
        apt.download("larder-hello")
        assert (apt.out / "larder-hello_1.0_all.deb").read_bytes() == archive.deb("larder-hello", "1.0").read_bytes()
        if name == "apt-2":
            # Only what is never kept: a detached signature, or the 404s of an unsigned archive.
            asked = [r for r in upstream.requests_since(mark) if not r["path"].endswith("Release.gpg")]
            assert [r for r in asked if r["status"] == 200] == [], asked


@pytest.mark.timeout_s(240)
@pytest.mark.parametrize("mirror_kind", ["debian", "plain"])
def test_apt_never_gets_an_index_that_does_not_match_its_release(workdir, larder_factory, registry_artifacts,
                                                                 registry_tls, registry_server_factory,
                                                                 debian_signer, proxy_clock, mirror_kind):
    """The archive changes between two updates. Its InRelease may be kept a minute, its Packages five:
    a minute later a cache hands out the new InRelease with the old Packages (apt: "Hash Sum
    mismatch"), unless it fetches each index the InRelease names by its hash. The `plain` mirror,
    which knows nothing of apt, shows the failure the `debian` one prevents."""
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        pytest.skip("apt-get or dpkg-deb is not installed")
    if debian_signer is None:
        pytest.skip("gpg is not installed: the archive cannot carry an InRelease")
    archive = DebianArchive(workdir / "debian", registry_artifacts, signer=debian_signer, by_hash=True)
    upstream = registry_server_factory([archive])
    upstream.set_headers("*/InRelease", {"Cache-Control": "max-age=60"})
    upstream.set_headers("*/Packages*", {"Cache-Control": "max-age=300"})
    mirror = {"name": "archive", "kind": mirror_kind, "upstream": upstream.url("debian") + "/"}
    lr = mirrored(larder_factory, registry_tls, mirror, cache={"presets": ["debian"]})
    # apt asks for indexes by name, as apt does for an archive without by-hash and older apt always.
    apt = apt_through(workdir, archive, lr, "archive", debian_signer, "apt", options={"Acquire::By-Hash": "no"})
    apt.update()
    apt.download("larder-hello")
    assert (apt.out / "larder-hello_1.0_all.deb").exists()

    archive.publish({"larder-hello": "1.1"}, by_hash=True)
    proxy_clock.advance(120)
    second = apt.run("update", check=False)
    if mirror_kind == "plain":
        assert second.returncode != 0 and "Hash Sum mismatch" in second.output, second.output
        return
    assert second.returncode == 0, second.output
    apt.download("larder-hello")
    assert (apt.out / "larder-hello_1.1_all.deb").read_bytes() == archive.deb("larder-hello", "1.1").read_bytes()
    # The index came by hash from the archive, though apt asked for it by name.
    since = [r["path"] for r in upstream.requests()]
    assert any("/by-hash/SHA256/" in p for p in since), since


# ---------------------------------------------------------------------------
# min_release_age: versions published less than the age ago are hidden, and come back once it passes


def test_pip_does_not_see_a_version_published_yesterday_until_the_age_passes(
        workdir, larder_factory, registry_artifacts, registry_tls, registry_server_factory, proxy_clock):
    # larder-hello 1.0, 1.1 and 1.2, published 30 days, 10 days and 1 day ago.
    pypi = PyPIRegistry(workdir / "pypi", registry_artifacts)
    upstream = registry_server_factory([pypi])
    lr = mirrored(larder_factory, registry_tls, {"name": "pypi", "upstream": upstream.url("pypi") + "/",
                                                 "also": {"files": upstream.url("files") + "/"},
                                                 "min_release_age": "7d"})
    index = base(lr, "pypi") + "simple/"
    _, target = pip_install(workdir, index, "larder-hello")
    assert installed_module_version(target) == "1.1"
    # The JSON form was asked upstream (it dates files); pip, asking for either, got one it reads.
    asked = [r for r in upstream.requests("pypi") if r["path"] == "/simple/larder-hello/"]
    assert asked and all(dict(r["headers"]).get("Accept") == "application/vnd.pypi.simple.v1+json" for r in asked)
    html = curl_get(index + "larder-hello/", headers=[("Accept", "text/html")])
    assert html.status == 200 and html.header("Content-Type").startswith("text/html")
    assert b"larder_hello-1.1-py3-none-any.whl" in html.body and b"1.2" not in html.body
    # Asked for by name, the young version's file is refused with the reason.
    wheel = next(f for f in pypi.files["larder-hello"] if f["version"] == "1.2" and f["packagetype"] == "bdist_wheel")
    young = curl_get(base(lr, "pypi") + "files" + wheel["url_path"])
    assert young.status == 403 and b"min_release_age" in young.body
    lr.wait_for_text("published 1 day", timeout=10)

    proxy_clock.advance(7 * 86_400)
    _, later = pip_install(workdir, index, "larder-hello")
    assert installed_module_version(later) == "1.2"


def test_npm_latest_moves_back_past_a_version_published_yesterday(
        workdir, larder_factory, registry_artifacts, registry_tls, registry_server_factory, proxy_clock):
    # larder-hello 1.0.0, 1.1.0 and 2.0.0; 2.0.0 published a day ago and tagged latest.
    npm = NpmRegistry(workdir / "npm", registry_artifacts)
    upstream = registry_server_factory([npm])
    lr = mirrored(larder_factory, registry_tls, {"name": "npm", "upstream": upstream.url("npm") + "/",
                                                 "min_release_age": "7d"})
    client = NpmClient(workdir / "npm-client", base(lr, "npm"))
    assert client.view("larder-hello", "dist-tags") == {"latest": "1.1.0"}
    client.install("larder-hello")
    assert client.installed_version("larder-hello") == "1.1.0"
    young = curl_get(base(lr, "npm") + "larder-hello/-/larder-hello-2.0.0.tgz")
    assert young.status == 403 and b"min_release_age" in young.body

    proxy_clock.advance(7 * 86_400)
    later = NpmClient(workdir / "npm-client-2", base(lr, "npm"))
    assert later.view("larder-hello", "dist-tags") == {"latest": "2.0.0"}
    later.install("larder-hello")
    assert later.installed_version("larder-hello") == "2.0.0"
