# Sourced by the shell tests that run Python against the built library and CLI, and by the
# remote tests' server helpers.

# The test environment: third_party/venv, made by tools/bootstrap.sh from PyPI
# (tools/requirements-test.txt: a current torch on the CPU, numpy, moto's S3 server). It is
# found through this file's real path (a runfiles symlink into the source tree).
AL_VENV=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)/third_party/venv

# al_python: the interpreter the Python tests run under: AL_TEST_PYTHON, else the test
# environment's.
al_python() {
  echo "${AL_TEST_PYTHON:-$AL_VENV/bin/python3}"
}

# al_require PY MODULE WHAT: true when PY imports MODULE; else prints a FAIL line naming WHAT,
# the import error and the command that installs it, and is false (the caller fails).
al_require() {
  if "$1" -c "import $2" >/dev/null 2>&1; then
    return 0
  fi
  echo "FAIL: $1 cannot import $2, so $3 cannot run (tools/bootstrap.sh makes $AL_VENV)" >&2
  "$1" -c "import $2" 2>&1 | tail -1 >&2 || true
  return 1
}

# al_asan_preload LIB: prints the sanitizer runtimes python3 must load first (LD_PRELOAD) when
# LIB is an ASan build (bazel test --config=asan), nothing when it is not instrumented.
al_asan_preload() {
  local syms
  syms=$(nm -D "$1" 2>/dev/null || true) # no pipe: grep -q would cut nm short under pipefail
  if grep -q " U __asan_init" <<<"$syms"; then
    echo "$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  fi
}

# al_tsan_build LIB: true when LIB is a ThreadSanitizer build (bazel test --config=tsan), which
# Python cannot load: the TSan runtime must start the process, and python3 is not built with it.
al_tsan_build() {
  local syms
  syms=$(nm -D "$1" 2>/dev/null || true)
  grep -q " U __tsan_init" <<<"$syms"
}

# al_asan_env LIB: for an ASan build of LIB, exports LD_PRELOAD with its runtimes and
# ASAN_OPTIONS without leak checks (CPython's own allocations are not ours to check).
al_asan_env() {
  local pre
  pre=$(al_asan_preload "$1")
  if [ -n "$pre" ]; then
    export LD_PRELOAD="$pre" ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0
  fi
}

# al_python_env DIR: the built CLI and library under the runfiles root DIR for the Python
# package in DIR/python, with al_asan_env.
al_python_env() {
  export ADAPTIVELOAD_LIB="$1/dist/libadaptiveload.so"
  export ADAPTIVELOAD_BIN="$1/adaptiveload"
  export PYTHONPATH="$1/python"
  export PYTHONDONTWRITEBYTECODE=1
  al_asan_env "$ADAPTIVELOAD_LIB"
}
