import Testing
@testable import Registries

// Small documents shaped like what the registries send. Times are around `now`; hashes are the
// SHA-256 of single letters, which is all the tests need of them.

/// The fixed "now": Tue, 14 Nov 2023 22:13:20 GMT.
let now: Int64 = 1_700_000_000
let day: Int64 = 86_400
/// `min_release_age: 7d` at `now`: the cutoff is 2023-11-07T22:13:20Z.
let sevenDays = ReleaseAge(minimumAge: 7 * day, now: now)

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

enum Hashes {
    static let a = "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
    static let b = "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"
    static let c = "2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6"
    static let d = "18ac3e7343f016890c510e93f935261169d9e3f565436429830faf0934f4f8e4"
    static let e = "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea"
    static let f = "252f10c83610ebca1a059c0bae8255eba2f95be4d1d7bcfa89d7248a82d9f111"
    static let g = "cd0aa9856147b6c5b4ff2b7dfee5da20aa38253099ef1b4a64aced233c9afe29"
    static let h = "aaa9402664f1a41f40ebbc52c9993eb66aeb366602958fdfaa283b71e64db123"
}

/// The mirror's links, as the lead's configuration would give them.
enum Maps {
    static let pypiFiles = URLPrefixMap(["https://files.pythonhosted.org/": "http://larder.internal:3128/pypi/files/"])
    static let npm = URLPrefixMap(["https://registry.npmjs.org/": "http://larder.internal:3128/npm/"])
    static let crates = URLPrefixMap([
        "https://static.crates.io/crates": "http://larder.internal:3128/crates/dl",
        "https://crates.io": "http://larder.internal:3128/crates/api",
    ])
}

enum PyPIFixtures {
    static let filesHost = "https://files.pythonhosted.org/packages"

    /// A PEP 691 page (API 1.1, so with PEP 700 `versions` and `upload-time`), pretty-printed as
    /// PyPI does. 0.9.0 has no files; 1.0.0 a wheel and an sdist; 1.1.0 a yanked sdist, an old
    /// wheel and a cp312 wheel added two days ago; 2.0.0 (a wheel and an sdist) three days ago.
    static let simpleJSON = """
        {
          "files": [
            {
              "core-metadata": {
                "sha256": "\(Hashes.b)"
              },
              "data-dist-info-metadata": {
                "sha256": "\(Hashes.b)"
              },
              "filename": "example_pkg-1.0.0-py3-none-any.whl",
              "hashes": {
                "sha256": "\(Hashes.a)"
              },
              "requires-python": ">=3.8",
              "size": 10234,
              "upload-time": "2023-01-10T09:30:00.123456Z",
              "url": "\(filesHost)/0a/1b/\(Hashes.a.prefix(60))/example_pkg-1.0.0-py3-none-any.whl",
              "yanked": false
            },
            {
              "core-metadata": false,
              "data-dist-info-metadata": false,
              "filename": "example_pkg-1.0.0.tar.gz",
              "hashes": {
                "sha256": "\(Hashes.c)"
              },
              "requires-python": ">=3.8",
              "size": 9120,
              "upload-time": "2023-01-10T09:30:02.654321Z",
              "url": "\(filesHost)/2c/3d/\(Hashes.c.prefix(60))/example_pkg-1.0.0.tar.gz",
              "yanked": false
            },
            {
              "core-metadata": {
                "sha256": "\(Hashes.e)"
              },
              "data-dist-info-metadata": {
                "sha256": "\(Hashes.e)"
              },
              "filename": "example_pkg-1.1.0-py3-none-any.whl",
              "hashes": {
                "sha256": "\(Hashes.d)"
              },
              "requires-python": ">=3.8",
              "size": 10450,
              "upload-time": "2023-06-01T12:00:00.000000Z",
              "url": "\(filesHost)/4e/5f/\(Hashes.d.prefix(60))/example_pkg-1.1.0-py3-none-any.whl",
              "yanked": false
            },
            {
              "core-metadata": false,
              "data-dist-info-metadata": false,
              "filename": "example_pkg-1.1.0.tar.gz",
              "hashes": {
                "sha256": "\(Hashes.f)"
              },
              "requires-python": ">=3.8",
              "size": 9301,
              "upload-time": "2023-06-01T12:00:03.000000Z",
              "url": "\(filesHost)/6a/7b/\(Hashes.f.prefix(60))/example_pkg-1.1.0.tar.gz",
              "yanked": "Missing \\"py.typed\\" & <data> files"
            },
            {
              "core-metadata": true,
              "data-dist-info-metadata": true,
              "filename": "example_pkg-1.1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
              "hashes": {
                "sha256": "\(Hashes.g)"
              },
              "requires-python": ">=3.8",
              "size": 48800,
              "upload-time": "2023-11-12T08:00:00.000000Z",
              "url": "\(filesHost)/8c/9d/\(Hashes.g.prefix(60))/example_pkg-1.1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
              "yanked": false
            },
            {
              "core-metadata": {
                "sha256": "\(Hashes.h)"
              },
              "data-dist-info-metadata": {
                "sha256": "\(Hashes.h)"
              },
              "filename": "example_pkg-2.0.0-py3-none-any.whl",
              "hashes": {
                "sha256": "\(Hashes.h)"
              },
              "requires-python": ">=3.9",
              "size": 11002,
              "upload-time": "2023-11-11T17:45:10.000000Z",
              "url": "\(filesHost)/0e/1f/\(Hashes.h.prefix(60))/example_pkg-2.0.0-py3-none-any.whl",
              "yanked": false
            },
            {
              "core-metadata": false,
              "data-dist-info-metadata": false,
              "filename": "example_pkg-2.0.0.tar.gz",
              "hashes": {
                "sha256": "\(Hashes.a)"
              },
              "requires-python": ">=3.9",
              "size": 9840,
              "upload-time": "2023-11-11T17:45:12.000000Z",
              "url": "\(filesHost)/2a/3b/\(Hashes.a.prefix(60))/example_pkg-2.0.0.tar.gz",
              "yanked": false
            }
          ],
          "meta": {
            "_last-serial": 20123456,
            "api-version": "1.1"
          },
          "name": "example-pkg",
          "versions": [
            "0.9.0",
            "1.0.0",
            "1.1.0",
            "2.0.0"
          ]
        }
        """

    /// The PyPI JSON API for the same project (trimmed: `info` holds far more upstream).
    static let jsonAPI = """
        {"info":{"name":"example-pkg","version":"2.0.0","project_url":"https://pypi.org/project/example-pkg/",\
        "home_page":"https://files.pythonhosted.org/not-a-file"},"last_serial":20123456,\
        "releases":{"1.0.0":[{"filename":"example_pkg-1.0.0.tar.gz","packagetype":"sdist",\
        "url":"\(filesHost)/2c/3d/example_pkg-1.0.0.tar.gz"}],"2.0.0":[{"filename":"example_pkg-2.0.0.tar.gz",\
        "url":"\(filesHost)/2a/3b/example_pkg-2.0.0.tar.gz"},{"filename":"example_pkg-2.0.0-py3-none-any.whl",\
        "url":"\(filesHost)/0e/1f/example_pkg-2.0.0-py3-none-any.whl"}]},\
        "urls":[{"filename":"example_pkg-2.0.0.tar.gz","url":"\(filesHost)/2a/3b/example_pkg-2.0.0.tar.gz"}],\
        "vulnerabilities":[]}
        """

    /// A PEP 503 page as PyPI writes it.
    static let simpleHTML = """
        <!DOCTYPE html>
        <html>
          <head>
            <meta name="pypi:repository-version" content="1.1">
            <title>Links for example-pkg</title>
          </head>
          <body>
            <h1>Links for example-pkg</h1>
            <a href="\(filesHost)/0a/1b/example_pkg-1.0.0-py3-none-any.whl#sha256=\(Hashes.a)" \
        data-requires-python="&gt;=3.8" data-dist-info-metadata="sha256=\(Hashes.b)" \
        data-core-metadata="sha256=\(Hashes.b)">example_pkg-1.0.0-py3-none-any.whl</a><br />
            <a href='\(filesHost)/2c/3d/example_pkg-1.0.0.tar.gz#sha256=\(Hashes.c)' data-requires-python="&gt;=3.8" \
        >example_pkg-1.0.0.tar.gz</a><br />
            <a href="\(filesHost)/6a/7b/example_pkg-1.1.0.tar.gz?a=1&amp;b=2#sha256=\(Hashes.f)" \
        data-yanked="broken">example_pkg-1.1.0.tar.gz</a><br />
          </body>
        </html>
        <!--SERIAL 20123456-->

        """
}

enum NPMFixtures {
    static let registry = "https://registry.npmjs.org"

    static func version(_ number: String, shasum: String, dependencies: String = "{}") -> String {
        """
        {"name":"tiny-tool","version":"\(number)","description":"A tiny tool","main":"index.js",\
        "dependencies":\(dependencies),"_id":"tiny-tool@\(number)","_nodeVersion":"20.9.0","_npmVersion":"10.1.0",\
        "dist":{"integrity":"sha512-\(shasum.prefix(20))==","shasum":"\(shasum.prefix(40))",\
        "tarball":"\(registry)/tiny-tool/-/tiny-tool-\(number).tgz","fileCount":4,"unpackedSize":2048},\
        "_npmUser":{"name":"someone","email":"someone@example.org"},"directories":{}}
        """
    }

    /// A full package document (`application/json`) with four versions, one a pre-release, and
    /// `time`; written with two-space indents for the top level like the registry's pretty form.
    /// At `now` with seven days: 2.0.0-beta.1 (four days old) and 2.0.0 (one day old) are too new.
    static let packument = """
        {
          "_id": "tiny-tool",
          "_rev": "12-0123456789abcdef0123456789abcdef",
          "name": "tiny-tool",
          "dist-tags": {
            "latest": "2.0.0",
            "next": "2.0.0-beta.1",
            "legacy": "1.0.0"
          },
          "versions": {
            "1.0.0": \(version("1.0.0", shasum: Hashes.a)),
            "1.1.0": \(version("1.1.0", shasum: Hashes.b, dependencies: #"{"left-pad":"^1.3.0"}"#)),
            "2.0.0-beta.1": \(version("2.0.0-beta.1", shasum: Hashes.c)),
            "2.0.0": \(version("2.0.0", shasum: Hashes.d))
          },
          "time": {
            "created": "2022-03-01T10:00:00.000Z",
            "1.0.0": "2022-03-01T10:00:01.000Z",
            "1.1.0": "2023-05-20T08:30:00.000Z",
            "2.0.0-beta.1": "2023-11-10T12:00:00.000Z",
            "2.0.0": "2023-11-13T12:00:00.000Z",
            "modified": "2023-11-13T12:00:05.000Z"
          },
          "maintainers": [{"name": "someone", "email": "someone@example.org"}],
          "description": "A tiny tool",
          "readme": "# tiny-tool\\n\\nDoes one thing. See https://registry.npmjs.org/tiny-tool for more.",
          "license": "MIT"
        }
        """

    /// The abbreviated form (`application/vnd.npm.install-v1+json`): no `time`.
    static let abbreviated = """
        {"name":"tiny-tool","modified":"2023-11-13T12:00:05.000Z","dist-tags":{"latest":"2.0.0"},\
        "versions":{"1.0.0":{"name":"tiny-tool","version":"1.0.0","dist":{"shasum":"\(Hashes.a.prefix(40))",\
        "tarball":"\(registry)/tiny-tool/-/tiny-tool-1.0.0.tgz"}},"2.0.0":{"name":"tiny-tool","version":"2.0.0",\
        "dist":{"shasum":"\(Hashes.d.prefix(40))","tarball":"\(registry)/tiny-tool/-/tiny-tool-2.0.0.tgz"}}}}
        """
}

enum CratesFixtures {
    /// crates.io's sparse index `config.json`.
    static let config = """
        {
          "dl": "https://static.crates.io/crates",
          "api": "https://crates.io"
        }
        """
}

enum DebianFixtures {
    /// A clear-signed InRelease shaped like deb.debian.org's (fewer files, a made-up signature).
    static let inRelease = """
        -----BEGIN PGP SIGNED MESSAGE-----
        Hash: SHA512

        Origin: Debian
        Label: Debian
        Suite: stable
        Version: 12.2
        Codename: bookworm
        Changelogs: https://metadata.ftp-master.debian.org/changelogs/@CHANGEPATH@_changelog
        Date: Sat, 07 Oct 2023 09:42:51 UTC
        Valid-Until: Sat, 14 Oct 2023 09:42:51 UTC
        Acquire-By-Hash: yes
        No-Support-for-Architecture-all: Packages
        Architectures: all amd64 arm64 armel armhf i386 mips64el mipsel ppc64el s390x
        Components: main contrib non-free-firmware non-free
        Description: Debian 12.2 Released 07 October 2023
        MD5Sum:
         0ed6d4c8891eb86358b94bb35d9e4da4  1484322 contrib/Contents-all
         d0a0325a97c42fd5f66a8c3e29bcea64    98581 contrib/Contents-all.gz
         2c4f2b3c0b1f4a1b6e5a8d1c9f0e7b3a   114516 main/binary-amd64/Packages.xz
        SHA256:
         \(Hashes.a)  1484322 contrib/Contents-all
         \(Hashes.b)    98581 contrib/Contents-all.gz
         \(Hashes.c) 45867823 main/binary-amd64/Packages
         \(Hashes.d)  8786420 main/binary-amd64/Packages.xz
         \(Hashes.e)      117 main/binary-amd64/Release
         \(Hashes.f)   121456 main/i18n/Translation-en.bz2
        -----BEGIN PGP SIGNATURE-----

        iQIzBAEBCgAdFiEEpyNohvPMyq0Uiif4DphATThvodkFAmUhJ8sACgkQDphATThv
        odkFAm8P/2Vk8rmMA3NXm3QvRdKDmA4XgZxYw0w0qRrlR3AmtwlG0+8M/Hz2EV5q
        =0X9p
        -----END PGP SIGNATURE-----

        """
}
