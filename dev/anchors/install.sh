#!/usr/bin/env bash
# dev/anchors/install.sh - installs the anchor loaders (mosaicml-streaming, webdataset,
# megatron-energon, torchdata, PyAV, decord, OpenCV; torch and numpy) pinned in
# dev/anchors/requirements.txt into their own venv, for side-by-side measurements and
# adapter tests. Not a test; nothing in the product or its tests uses this venv.
#
#   dev/anchors/install.sh           download into the wheelhouse (once), install, check
#   dev/anchors/install.sh --check   only the import check of an existing venv
#
# Steps: `python3 -m venv` at VENV; `pip download` of the requirements (wheels only) into
# WHEELS, skipped when WHEELS/.requirements.sha256 already holds the sha256 of
# requirements.txt (so a reinstall on the same machine needs no network); `pip install
# --no-index --find-links WHEELS`; the import check, which imports every package, prints
# its version and names the one that does not import. Then VENV/.anchors-requirements.sha256
# records the sha256 of requirements.txt: a later run with the same requirements only says
# where the venv is and exits 0. Changed requirements rebuild the venv from scratch.
#
# Environment (defaults): ANCHORS_VENV=dev/anchors/.venv ANCHORS_WHEELS=dev/anchors/.wheels
# ANCHORS_PYTHON=/usr/bin/python3 (the interpreter the venv is made from; the pins are
# checked on CPython 3.11 x86_64). pip's own variables (PIP_INDEX_URL, ...) apply.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REQ=$HERE/requirements.txt
VENV=${ANCHORS_VENV:-$HERE/.venv}
WHEELS=${ANCHORS_WHEELS:-$HERE/.wheels}
PYTHON=${ANCHORS_PYTHON:-/usr/bin/python3}
STAMP=$VENV/.anchors-requirements.sha256
WHEELS_STAMP=$WHEELS/.requirements.sha256
export PIP_DISABLE_PIP_VERSION_CHECK=1

die() { echo "anchors: error: $*" >&2; exit 1; }

usage() {
  sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

# Imports every package pinned in requirements.txt, checks the installed version against
# the pin and prints it; exits 1 naming each package that does not import.
check() {
  [[ -x $VENV/bin/python ]] || die "no venv at $VENV (run dev/anchors/install.sh first)"
  echo "anchors: import check of $VENV"
  "$VENV/bin/python" - "$REQ" <<'PY'
import importlib
import importlib.metadata as md
import re
import sys

# distribution -> what must import from it ("pkg.mod" a module, "pkg.mod.Name" an attribute)
IMPORTS = {
    "torch": ["torch"],
    "numpy": ["numpy"],
    "mosaicml-streaming": ["streaming", "streaming.StreamingDataset", "streaming.MDSWriter"],
    "webdataset": ["webdataset", "webdataset.WebDataset"],
    "megatron-energon": ["megatron.energon", "megatron.energon.get_train_dataset"],
    "torchdata": ["torchdata", "torchdata.stateful_dataloader.StatefulDataLoader",
                  "torchdata.nodes"],
    "av": ["av"],
    "decord": ["decord", "decord.VideoReader"],
    "opencv-python-headless": ["cv2", "cv2.VideoCapture"],
}


def load(path):
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as e:
        mod, _, attr = path.rpartition(".")
        if not mod or not (e.name and path.startswith(e.name)):
            raise
        return getattr(importlib.import_module(mod), attr)


pins = []
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if line:
        m = re.fullmatch(r"([A-Za-z0-9._-]+)\s*==\s*(\S+)", line)
        if not m:
            sys.exit(f"anchors: check: not a name==version pin in requirements.txt: {line!r}")
        pins.append(m.groups())

print(f"  python {sys.version.split()[0]} ({sys.executable})")
failed = []
for dist, want in pins:
    try:
        have = md.version(dist)
    except md.PackageNotFoundError:
        failed.append(dist)
        print(f"  FAIL {dist}: not installed (pinned {want})")
        continue
    bad = [] if have == want else [f"version {have}, pinned {want}"]
    shown = []
    for path in IMPORTS.get(dist, []):
        try:
            obj = load(path)
        except Exception as e:  # any import failure (missing library, ABI, ...) names the package
            bad.append(f"import {path}: {type(e).__name__}: {e}")
            continue
        v = getattr(obj, "__version__", None)
        shown.append(f"{path}" + (f" {v}" if isinstance(v, str) and path.count(".") == 0 else ""))
    if bad:
        failed.append(dist)
        for b in bad:
            print(f"  FAIL {dist}=={have}: {b}")
    else:
        print(f"  ok   {dist}=={have}: " + ", ".join(shown or ["(metadata only)"]))

if "torch" not in failed and any(d == "torch" for d, _ in pins):
    import torch
    print(f"  torch: CUDA build {torch.version.cuda}, cuda available here: {torch.cuda.is_available()}")

if failed:
    print(f"anchors: import check FAILED for: {', '.join(failed)}", file=sys.stderr)
    sys.exit(1)
print(f"anchors: import check ok ({len(pins)} packages)")
PY
}

case ${1:-} in
  "") ;;
  --check) [[ $# -eq 1 ]] || die "--check takes no argument"; check; exit 0 ;;
  -h|--help) usage; exit 0 ;;
  *) die "unknown argument '$1' (usage: dev/anchors/install.sh [--check])" ;;
esac

[[ -f $REQ ]] || die "missing $REQ"
SHA=$(sha256sum "$REQ" | cut -d' ' -f1)

if [[ -x $VENV/bin/python && -f $STAMP && $(cat "$STAMP") == "$SHA" ]]; then
  echo "anchors: venv up to date at $VENV (requirements sha256 $SHA)"
  echo "anchors: use $VENV/bin/python; 'dev/anchors/install.sh --check' re-runs the import check"
  exit 0
fi

# A path that exists but is no venv is left alone: --clear would empty it.
if [[ -e $VENV && ! -f $VENV/pyvenv.cfg ]]; then
  die "$VENV exists and is not a venv (no pyvenv.cfg); remove it or set ANCHORS_VENV"
fi
[[ -x $PYTHON ]] || die "no interpreter at $PYTHON (set ANCHORS_PYTHON)"

T0=$SECONDS
echo "anchors: creating venv $VENV with $PYTHON ($("$PYTHON" -c 'import sys; print(sys.version.split()[0])'))"
"$PYTHON" -m venv --clear "$VENV"
PIP=("$VENV/bin/python" -m pip)

mkdir -p "$WHEELS"
if [[ -f $WHEELS_STAMP && $(cat "$WHEELS_STAMP") == "$SHA" ]]; then
  echo "anchors: wheelhouse $WHEELS already holds these requirements; no download"
else
  echo "anchors: downloading wheels into $WHEELS"
  T=$SECONDS
  rm -f "$WHEELS_STAMP"
  "${PIP[@]}" download --only-binary=:all: --no-cache-dir --progress-bar off \
    -d "$WHEELS" -r "$REQ"
  echo "$SHA" > "$WHEELS_STAMP"
  echo "anchors: download took $((SECONDS - T)) s"
fi

echo "anchors: installing from $WHEELS (no index)"
T=$SECONDS
"${PIP[@]}" install --no-index --find-links "$WHEELS" --no-cache-dir --progress-bar off \
  -r "$REQ"
echo "anchors: install took $((SECONDS - T)) s"

check
echo "$SHA" > "$STAMP"
echo "anchors: done in $((SECONDS - T0)) s; venv $(du -sh "$VENV" | cut -f1) at $VENV," \
  "wheelhouse $(du -sh "$WHEELS" | cut -f1) at $WHEELS"
echo "anchors: use $VENV/bin/python"
