"""Writes pure-Python wheels by hand (no build tools, no network), and is a PEP 517 build backend.

The tests build their wheels with ``write_wheel``. Each sdist they build carries a copy of this
file as its in-tree backend (``backend-path = ["."]``, ``requires = []``), so pip can build the
sdist into a wheel with nothing but the standard library: nothing is fetched to build it.

Standard library only: it runs inside pip's isolated build environment.
"""

import base64
import hashlib
import os
import zipfile

# Every member's date: the same inputs make the same bytes, so a wheel's hash is known in advance.
FIXED_DATE = (2024, 1, 1, 0, 0, 0)


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def metadata_text(name, version, summary):
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {summary}\n"


def wheel_file_name(name, version):
    return f"{name.replace('-', '_')}-{version}-py3-none-any.whl"


def write_wheel(directory, name, version, members, summary="a wheel built by the tests"):
    """``name``-``version``, py3-none-any, holding ``members`` ({path in the wheel: bytes}) and
    its METADATA, WHEEL and RECORD (with each member's hash). Returns the wheel's path."""
    dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
    members = dict(members)
    members[f"{dist_info}/METADATA"] = metadata_text(name, version, summary).encode()
    members[f"{dist_info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: larder-tests\nRoot-Is-Purelib: true\n"
                                     b"Tag: py3-none-any\n")
    record = "".join(f"{path},{record_hash(data)},{len(data)}\n" for path, data in members.items())
    members[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, wheel_file_name(name, version))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in members.items():
            z.writestr(zipfile.ZipInfo(member, FIXED_DATE), data)
    return path


# ---------------------------------------------------------------------------
# PEP 517 hooks, run by pip from an unpacked sdist (the current directory)


def _pkg_info():
    fields = {}
    with open("PKG-INFO", encoding="utf-8") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    return fields["Name"], fields["Version"], fields.get("Summary", "")


def _package_members(name):
    """Every file of the import package named after the project (larder-hello: larder_hello/)."""
    package = name.replace("-", "_")
    members = {}
    for folder, _, files in os.walk(package):
        for file_name in sorted(files):
            path = os.path.join(folder, file_name)
            with open(path, "rb") as f:
                members[path.replace(os.sep, "/")] = f.read()
    return members


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version, summary = _pkg_info()
    return os.path.basename(write_wheel(wheel_directory, name, version, _package_members(name), summary))
