#!/usr/bin/env python3
"""make_wheel.py --version-header H --lib SO --bin EXE --out-dir DIR PYFILE...

Writes DIR/adaptiveload-<version>-py3-none-linux_x86_64.whl (the rule //dist:wheel):

    adaptiveload/*.py                        the Python package (PYFILE...)
    adaptiveload/lib/libadaptiveload.so      the C library, kernels included (the package's
                                             library finder looks in its lib/ folder)
    adaptiveload/bin/adaptiveload            the CLI; the console script `adaptiveload`
                                             (adaptiveload._cli:main) execs it
    adaptiveload-<version>.dist-info/        METADATA, WHEEL, entry_points.txt,
                                             top_level.txt, RECORD

<version> is AL_VERSION_STRING of the header H (common/al_version.h, the one place it is
written). Standard library only. Reproducible: entries in sorted order (the dist-info
folder last, RECORD the last of all), a fixed timestamp, modes 0755 for files that are
executable in the input and 0644 otherwise, so the same inputs give the same bytes.
"""

import argparse
import base64
import hashlib
import os
import re
import sys
import zipfile

NAME = "adaptiveload"
TAG = "py3-none-linux_x86_64"
SUMMARY = "Shape-bucketed, load-balanced data loading for video diffusion transformers, with a fused AdaLN kernel"
REQUIRES_PYTHON = ">=3.8"
REQUIRES_DIST = ["numpy"]
ENTRY_POINTS = "[console_scripts]\nadaptiveload = adaptiveload._cli:main\n"
# The earliest time a zip entry can carry: every entry gets it.
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def read_version(header):
    """AL_VERSION_STRING of the header; exits naming the file when it is missing or malformed."""
    with open(header, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r'^#define\s+AL_VERSION_STRING\s+"([^"]*)"', text, re.M)
    if not m:
        sys.exit("make_wheel.py: %s: no '#define AL_VERSION_STRING \"...\"' line" % header)
    version = m.group(1)
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", version):
        sys.exit("make_wheel.py: %s: AL_VERSION_STRING '%s' is not N.N.N" % (header, version))
    return version


def metadata(version):
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + version,
        "Summary: " + SUMMARY,
        "Requires-Python: " + REQUIRES_PYTHON,
    ]
    lines += ["Requires-Dist: " + d for d in REQUIRES_DIST]
    return ("\n".join(lines) + "\n").encode()


def wheel_file():
    return ("Wheel-Version: 1.0\nGenerator: adaptiveload dist/make_wheel.py\nRoot-Is-Purelib: false\nTag: %s\n"
            % TAG).encode()


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (name, digest, len(data))


def add(zf, name, data, mode):
    info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
    info.create_system = 3  # Unix: the mode bits below are honoured by pip
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def file_mode(path):
    return 0o755 if os.stat(path).st_mode & 0o111 else 0o644


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version-header", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("py", nargs="+")
    args = ap.parse_args()

    version = read_version(args.version_header)
    files = {}  # name in the wheel -> source path
    for path in args.py:
        name = NAME + "/" + os.path.basename(path)
        if name in files:
            sys.exit("make_wheel.py: two Python files named %s (%s, %s)" % (name, files[name], path))
        files[name] = path
    files[NAME + "/lib/libadaptiveload.so"] = args.lib
    files[NAME + "/bin/adaptiveload"] = args.bin
    if NAME + "/_cli.py" not in files:
        sys.exit("make_wheel.py: the package has no _cli.py (the console script's entry point)")

    entries = []  # (name, data, mode)
    for name in sorted(files):
        with open(files[name], "rb") as f:
            entries.append((name, f.read(), file_mode(files[name])))
    info = "%s-%s.dist-info" % (NAME, version)
    entries.append((info + "/METADATA", metadata(version), 0o644))
    entries.append((info + "/WHEEL", wheel_file(), 0o644))
    entries.append((info + "/entry_points.txt", ENTRY_POINTS.encode(), 0o644))
    entries.append((info + "/top_level.txt", (NAME + "\n").encode(), 0o644))
    record = "".join(record_line(name, data) for name, data, _ in entries) + info + "/RECORD,,\n"
    entries.append((info + "/RECORD", record.encode(), 0o644))

    out = os.path.join(args.out_dir, "%s-%s-%s.whl" % (NAME, version, TAG))
    os.makedirs(args.out_dir, exist_ok=True)
    with zipfile.ZipFile(out, "w") as zf:
        for name, data, mode in entries:
            add(zf, name, data, mode)


if __name__ == "__main__":
    main()
