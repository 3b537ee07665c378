"""The package's own PEP 517 build backend: it writes the wheel (and the
sdist) of this pure-Python package with the standard library alone, so
that `pip install bindings/python` needs no package index (pip's default
build isolation would otherwise fetch setuptools).  pyproject.toml
names it (backend-path); its [project] table holds the metadata."""

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "libreserve"


def _project():
    # The subset of TOML [project] uses here: key = "string" and
    # key = [strings], possibly over several lines.
    text = open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8").read()
    m = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    out = {}
    for key, value in re.findall(r'^([A-Za-z-]+)\s*=\s*("[^"\n]*"|\[.*?\])',
                                 m.group(1), re.M | re.S):
        if value.startswith("["):
            out[key] = re.findall(r'"([^"]*)"', value)
        else:
            out[key] = value[1:-1]
    return out


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"],
             "Version: " + p["version"], "Summary: " + p["description"],
             "Requires-Python: " + p["requires-python"],
             "Keywords: " + ",".join(p.get("keywords", []))]
    lines += ["Classifier: " + c for c in p.get("classifiers", [])]
    lines += ["Requires-Dist: " + d for d in p.get("dependencies", [])]
    lines.append("Description-Content-Type: text/markdown")
    readme = open(os.path.join(HERE, p["readme"]), encoding="utf-8").read()
    return p, "\n".join(lines) + "\n\n" + readme


def _files():
    src = os.path.join(HERE, PACKAGE)
    for name in sorted(os.listdir(src)):
        if name.endswith(".py") or name == "py.typed":
            yield PACKAGE + "/" + name, os.path.join(src, name)


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return "%s,sha256=%s,%d" % (arcname, digest.rstrip(b"=").decode(),
                                len(data))


def _wheel(directory, editable=False):
    p, metadata = _metadata()
    dist = "%s-%s" % (p["name"], p["version"])
    name = dist + "-py3-none-any.whl"
    info = dist + ".dist-info"
    entries = []
    if editable:
        entries.append((PACKAGE + ".pth", (HERE + "\n").encode()))
    else:
        for arcname, path in _files():
            with open(path, "rb") as f:
                entries.append((arcname, f.read()))
    entries.append((info + "/METADATA", metadata.encode("utf-8")))
    entries.append((info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: "
                    b"rsv_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    entries.append((info + "/top_level.txt", (PACKAGE + "\n").encode()))
    record = [_record_line(a, d) for a, d in entries]
    record.append(info + "/RECORD,,")
    entries.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(directory, name), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arcname, data in entries:
            z.writestr(zipfile.ZipInfo(arcname, (2020, 1, 1, 0, 0, 0)), data)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    return _wheel(wheel_directory)


def build_editable(wheel_directory, config_settings=None,
                   metadata_directory=None):
    return _wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    p, metadata = _metadata()
    dist = "%s-%s" % (p["name"], p["version"])
    name = dist + ".tar.gz"
    paths = [("pyproject.toml", os.path.join(HERE, "pyproject.toml")),
             ("README.md", os.path.join(HERE, "README.md")),
             ("LICENSE", os.path.join(HERE, "LICENSE")),
             ("build_backend/rsv_build.py", os.path.abspath(__file__))]
    paths += list(_files())
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz",
                      format=tarfile.PAX_FORMAT) as t:
        data = metadata.encode("utf-8")
        ti = tarfile.TarInfo(dist + "/PKG-INFO")
        ti.size, ti.mtime = len(data), time.time()
        t.addfile(ti, io.BytesIO(data))
        for arcname, path in paths:
            t.add(path, dist + "/" + arcname, recursive=False)
    return name
