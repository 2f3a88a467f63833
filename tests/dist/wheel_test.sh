#!/bin/bash
# The pip wheel (//dist:wheel) installed the way a user installs it: a fresh virtual
# environment of Debian's python3, `pip install WHEEL` with its dependencies (numpy) resolved
# from PyPI's wheels (the test environment's wheelhouse, third_party/wheels: offline), then
# the test environment's site-packages appended to its path for torch, then from a folder
# outside the checkout with PYTHONPATH and ADAPTIVELOAD_LIB unset:
#   - the wheel's name carries AL_VERSION_STRING of common/al_version.h and its RECORD
#     lists every file with its sha256 and size;
#   - the console script runs the bundled CLI: --help, a failing verb's exit status, a
#     small `adaptiveload demo`, synth / index / plan / stream --jsonl; a missing binary
#     is reported by name;
#   - tests/dist/wheel_check.py: the package and library come from the venv, plan in
#     Python equals the CLI's, StreamDataset equals `stream --jsonl`;
#   - with WHEEL_TEST_VERSION=1 (the default), `adaptiveload --version` and
#     adaptiveload.__version__ report that version.
# AL_TEST_PYTHON overrides the interpreter the fresh environment is made from (default
# Debian's /usr/bin/python3).
set -euo pipefail
PY=${AL_TEST_PYTHON:-/usr/bin/python3}
here=$(pwd)
. "$here/tests/common/python_env.sh"
fail() {
  echo "FAIL: $*"
  exit 1
}

version=$(sed -n 's/^#define AL_VERSION_STRING "\(.*\)"$/\1/p' common/al_version.h)
[ -n "$version" ] || fail "no AL_VERSION_STRING in common/al_version.h"
shopt -s nullglob
wheels=("$here"/dist/*.whl)
[ ${#wheels[@]} -eq 1 ] || fail "expected one wheel in dist/, found ${#wheels[@]}"
wheel=${wheels[0]}
[ "$(basename "$wheel")" = "adaptiveload-$version-py3-none-linux_x86_64.whl" ] ||
  fail "wheel $(basename "$wheel") is not named after version $version"
echo "ok: $(basename "$wheel")"

work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/wheel_test.XXXXXX")
trap 'rm -rf "$work"' EXIT
# RECORD: every member listed once with the sha256 (urlsafe base64, unpadded) and size of
# its bytes; the binary and the library executable.
"$PY" - "$wheel" "$version" <<'PY' || fail "the wheel's contents"
import base64, csv, hashlib, io, sys, zipfile
wheel, version = sys.argv[1:]
info = "adaptiveload-%s.dist-info/" % version
z = zipfile.ZipFile(wheel)
names = z.namelist()
rows = list(csv.reader(io.TextIOWrapper(z.open(info + "RECORD"), "utf-8")))
listed = [r[0] for r in rows]
assert sorted(listed) == sorted(names), (sorted(set(names) ^ set(listed)))
for name, digest, size in rows:
    if name == info + "RECORD":
        assert digest == size == "", rows[-1]
        continue
    data = z.read(name)
    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert (digest, int(size)) == (want, len(data)), (name, digest, size)
for name in ("adaptiveload/bin/adaptiveload", "adaptiveload/lib/libadaptiveload.so"):
    assert z.getinfo(name).external_attr >> 16 & 0o111, name + " is not executable"
meta = z.read(info + "METADATA").decode()
for line in ("Metadata-Version: 2.1", "Name: adaptiveload", "Version: " + version, "Requires-Dist: numpy"):
    assert line in meta.splitlines(), line
assert "Tag: py3-none-linux_x86_64" in z.read(info + "WHEEL").decode().splitlines()
print("ok: RECORD lists the %d files with their sha256 and size" % (len(rows) - 1))
PY

# Nothing of the checkout or of the caller's environment may leak in.
unset PYTHONPATH ADAPTIVELOAD_LIB ADAPTIVELOAD_BIN PYTHONHOME PYTHONSTARTUP
export HOME="$work/home" PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
export PYTHONDONTWRITEBYTECODE=1 PYTHONNOUSERSITE=1
mkdir -p "$HOME"
venv=$work/venv
wheels=$(dirname "$AL_VENV")/wheels
"$PY" -m venv "$venv" ||
  fail "$PY -m venv failed (Debian: apt-get install python3-venv, see tools/bootstrap.sh)"
"$venv/bin/python" -m pip install --no-index --find-links "$wheels" --quiet "$wheel" >"$work/pip.log" 2>&1 || {
  cat "$work/pip.log"
  fail "pip install $wheel (its dependencies from $wheels, made by tools/bootstrap.sh)"
}
"$venv/bin/python" -c "import numpy" || fail "pip did not install the wheel's dependency numpy"
site=$(echo "$venv"/lib/python3*/site-packages)
"$(al_python)" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" >"$site/zz_test_env.pth" ||
  fail "the test environment's Python (tools/bootstrap.sh)"
echo "ok: pip installed the wheel and numpy into a fresh virtual environment; torch from the test environment"
# An ASan build of the installed library (--config=asan): its runtimes load first.
al_asan_env "$(echo "$venv"/lib/python3*/site-packages/adaptiveload/lib/libadaptiveload.so)"
export PATH="$venv/bin:/usr/bin:/bin"
[ "$(command -v adaptiveload)" = "$venv/bin/adaptiveload" ] || fail "adaptiveload on PATH is $(command -v adaptiveload)"
run=$work/run
mkdir -p "$run"
cd "$run"

adaptiveload --help >"$work/help.out" || fail "adaptiveload --help exited $?"
grep -q "^usage: adaptiveload VERB" "$work/help.out" || fail "adaptiveload --help printed: $(cat "$work/help.out")"
rc=0
adaptiveload no-such-verb 2>"$work/verb.err" || rc=$?
[ $rc -eq 2 ] || fail "adaptiveload no-such-verb exited $rc, the CLI's usage status is 2"
grep -q "unknown verb 'no-such-verb'" "$work/verb.err" || fail "no-such-verb: $(cat "$work/verb.err")"
echo "ok: adaptiveload --help; a usage error exits 2"

adaptiveload demo --out "$run/demo" --samples 16 --shards 2 --world 2 --batches 2 >"$work/demo.out" 2>&1 || {
  tail -20 "$work/demo.out"
  fail "adaptiveload demo exited non-zero"
}
grep -q "^demo done" "$work/demo.out" || fail "adaptiveload demo did not finish: $(tail -5 "$work/demo.out")"
for f in index.alidx adaptive.alman equal-token.alman adaptive.svg; do
  [ -s "$run/demo/$f" ] || fail "adaptiveload demo wrote no $f"
done
echo "ok: adaptiveload demo"

# The package: imported from the venv (not the checkout), plan and stream through it.
where=$(python -c "import adaptiveload; print(adaptiveload.__file__)")
case "$where" in
  "$venv"/lib/python3*/site-packages/adaptiveload/__init__.py) ;;
  *) fail "import adaptiveload found $where, not the venv's" ;;
esac
adaptiveload synth --out "$run/shards" --samples 24 --shards 2 --seed 3 >/dev/null 2>&1 || fail "adaptiveload synth"
adaptiveload index -o "$run/corpus.alidx" "$run/shards" >/dev/null 2>&1 || fail "adaptiveload index"
adaptiveload plan --index "$run/corpus.alidx" --world 2 --seed 1 --mem-tokens 20000 -o "$run/cli.alm" \
  >/dev/null 2>&1 || fail "adaptiveload plan"
adaptiveload stream --index "$run/corpus.alidx" --manifest "$run/cli.alm" --rank 0 --max-batches 4 --jsonl \
  >"$run/stream.jsonl" || fail "adaptiveload stream --jsonl"
cp "$here/tests/dist/wheel_check.py" "$run/"
python "$run/wheel_check.py" "$venv" "$run/corpus.alidx" "$run/cli.alm" "$run/stream.jsonl" "$run"

if [ "${WHEEL_TEST_VERSION:-1}" = 1 ]; then
  got=$(adaptiveload --version 2>"$work/version.err") ||
    fail "adaptiveload --version exited non-zero: $(head -3 "$work/version.err")"
  [ "$got" = "adaptiveload $version" ] || fail "adaptiveload --version printed '$got', not 'adaptiveload $version'"
  got=$(python -c "import adaptiveload; print(adaptiveload.__version__)") || fail "adaptiveload.__version__"
  [ "$got" = "$version" ] || fail "adaptiveload.__version__ is '$got', not '$version'"
  echo "ok: adaptiveload --version and adaptiveload.__version__ are $version"
else
  echo "SKIP: WHEEL_TEST_VERSION=0: --version and __version__ not checked"
fi

# The console script names a missing binary.
bin=$(python -c "import adaptiveload._cli as c; print(c.binary_path())")
mv "$bin" "$bin.moved"
rc=0
adaptiveload --help >/dev/null 2>"$work/missing.err" || rc=$?
mv "$bin.moved" "$bin"
[ $rc -eq 127 ] || fail "with the binary missing, adaptiveload exited $rc, not 127"
grep -qF "the CLI binary $bin is missing" "$work/missing.err" || fail "missing binary: $(cat "$work/missing.err")"
echo "ok: a missing CLI binary is reported by path (exit 127)"
echo "PASS"
