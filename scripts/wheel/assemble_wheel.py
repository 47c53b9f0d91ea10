#!/usr/bin/env python3
"""Writes mxrun's wheel from a staged install prefix (scripts/build-wheel.sh stages it):

  assemble_wheel.py VERSION PLATFORM_TAG PACKAGE_DIR PREFIX_DIR OUT_DIR

  PACKAGE_DIR          the pure-Python package (python/mxrun): goes to site-packages/mxrun, and
                       mxrun-auto-progress.pth beside it (python/) to site-packages: each
                       interpreter's start under mxrun hooks the optimizers (_auto_progress.py),
                       and entry_points.txt beside it to the dist-info: Lightning's callback
                       registry loads mxrun's progress callback from it (_framework_progress.py;
                       pyproject.toml declares the same for pip's build, checked equal by
                       scripts/check-pip-install.sh)
  PREFIX_DIR/bin/*     the programs: go to the environment's bin/ (the wheel's .data/scripts)
  PREFIX_DIR/lib/mxrun the shared libraries they load, if any: go to <prefix>/lib/mxrun
                       (.data/data), which the programs' RPATH ($ORIGIN/../lib/mxrun) finds wherever
                       pip installs them (a virtual environment, --user's ~/.local, /usr/local),
                       whatever the Python. scripts/build-wheel.sh links its programs statically
                       (but for glibc), so it has none; a build that vendors libraries may.
  PREFIX_DIR/share/man/man1  the manual pages: go to <prefix>/share/man/man1, where man finds the
                       pages of the programs in <prefix>/bin

The wheel is py3-none-PLATFORM_TAG (its programs do not depend on the Python version), not pure
(Root-Is-Purelib: false), with a RECORD of sha256 hashes, written deterministically (sorted
entries, SOURCE_DATE_EPOCH or 1980 as every file's time). Prints the wheel's path. Its summary,
description, Python floor and classifiers come from pyproject.toml, as those of the wheel that pip
builds from a checkout through scikit-build-core. That build links the machine's own gRPC,
Protobuf and Abseil; this wheel's programs carry them, built for glibc 2.28 and linked statically
(scripts/wheel/build-glibc-deps.sh), for machines without, which the backend does not do.
"""
import base64
import hashlib
import os
import sys
import time
import tomllib
import zipfile


def project_metadata(root):
    """The [project] table of pyproject.toml, the one place for the metadata of both wheels (the
    one pip builds through scikit-build-core and this one), and the description it names."""
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    with open(os.path.join(root, project["readme"]), encoding="utf-8") as f:
        project["long_description"] = f.read()
    return project


def digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: assemble_wheel.py VERSION PLATFORM_TAG PACKAGE_DIR PREFIX_DIR OUT_DIR")
    version, platform_tag, package_dir, prefix, out_dir = sys.argv[1:]
    name = "mxrun"
    tag = f"py3-none-{platform_tag}"
    data = f"{name}-{version}.data"
    dist_info = f"{name}-{version}.dist-info"
    entries = []  # (archive path, bytes, executable)
    for folder, _, files in os.walk(package_dir):
        if "__pycache__" in folder:
            continue
        for f in files:
            if f.endswith((".py", ".typed")):
                path = os.path.join(folder, f)
                rel = os.path.relpath(path, os.path.dirname(package_dir.rstrip("/")))
                entries.append((rel, open(path, "rb").read(), False))
    pth = os.path.join(os.path.dirname(package_dir.rstrip("/")), "mxrun-auto-progress.pth")
    entries.append((os.path.basename(pth), open(pth, "rb").read(), False))
    for sub, target in (("bin", f"{data}/scripts"), ("lib/mxrun", f"{data}/data/lib/mxrun"),
                        ("share/man/man1", f"{data}/data/share/man/man1")):
        folder = os.path.join(prefix, sub)
        if sub == "lib/mxrun" and not os.path.isdir(folder):
            continue
        for f in sorted(os.listdir(folder)):
            path = os.path.join(folder, f)
            executable = os.access(path, os.X_OK) and sub == "bin"
            entries.append((f"{target}/{f}", open(path, "rb").read(), executable))
    if not any(p.startswith(f"{data}/scripts/mxrun") for p, _, _ in entries):
        sys.exit("assemble_wheel: no mxrun program in PREFIX_DIR/bin")
    project = project_metadata(os.path.dirname(os.path.dirname(package_dir.rstrip("/"))))
    metadata = "\n".join([
        "Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
        f"Summary: {project['description']}", f"Requires-Python: {project['requires-python']}",
        "Platform: Linux", *(f"Classifier: {c}" for c in project["classifiers"]),
        "Description-Content-Type: text/markdown", "", project["long_description"]])
    wheel = "\n".join(["Wheel-Version: 1.0", "Generator: mxrun (scripts/wheel/assemble_wheel.py)",
                       "Root-Is-Purelib: false", f"Tag: {tag}", ""])
    entry_points = os.path.join(os.path.dirname(package_dir.rstrip("/")), "entry_points.txt")
    entries += [(f"{dist_info}/entry_points.txt", open(entry_points, "rb").read(), False),
                (f"{dist_info}/METADATA", metadata.encode(), False),
                (f"{dist_info}/WHEEL", wheel.encode(), False),
                (f"{dist_info}/top_level.txt", b"mxrun\n", False)]
    entries.sort()
    record = "".join(f"{p},{digest(b)},{len(b)}\n" for p, b, _ in entries)
    record += f"{dist_info}/RECORD,,\n"
    entries.append((f"{dist_info}/RECORD", record.encode(), False))

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = time.gmtime(max(epoch, 315532800))[:6]
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{name}-{version}-{tag}.whl")
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for path, content, executable in entries:
            info = zipfile.ZipInfo(path, date_time=stamp)
            info.external_attr = ((0o755 if executable else 0o644) | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, content)
    print(out)


if __name__ == "__main__":
    main()
