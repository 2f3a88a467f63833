#!/bin/bash
# The shared libraries export exactly the functions their public headers declare
# with AL_API: `nm -D --defined-only` of each library is compared, name by name,
# with dist/gen_exports.sh --names over the headers. An internal function leaking
# out, or a public one missing, fails with the difference.
set -euo pipefail
gen=dist/gen_exports.sh
fail=0
check() {  # LIB HEADER...
  local lib=$1
  shift
  local want got
  want=$("$gen" --names "$@")
  # Every defined dynamic symbol (functions and data), minus the ELF bookkeeping ones.
  got=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' |
    grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$' | sort -u)
  if [ "$want" != "$got" ]; then
    echo "FAIL: $lib exports differ from its public headers ($*)"
    diff <(echo "$want") <(echo "$got") | sed -e 's/^</  declared, not exported:/' -e 's/^>/  exported, not declared:/' | grep -v '^---\|^[0-9]'
    fail=1
  else
    echo "ok: $lib exports the $(echo "$want" | wc -l) functions its headers declare"
  fi
}
# Arguments: the public headers (//dist:public_headers).
[ $# -ge 10 ] || { echo "FAIL: expected the public headers as arguments, got $#"; exit 1; }
check dist/libadaptiveload.so "$@"
check dist/libal_kernels.so common/al_status.h common/al_version.h kernels/al_adaln.h
exit $fail
