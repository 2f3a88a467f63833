#!/bin/bash
# The install bundle's README.txt lists what the bundle holds: every file name it mentions is in
# the bundle, and every file of bin/, lib/, include/, examples/ and tools/ is mentioned (the CLI's
# verbs too); the Python package is its folder. Usage: bundle_test.sh adaptiveload-dist.tar.gz BIN
set -uo pipefail
TAR=$1 BIN=$2
T=${TEST_TMPDIR:-$(mktemp -d)}/bundle
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
tar xzf "$TAR" -C "$T" || fail "cannot unpack $TAR"
R=$T/adaptiveload
README=$R/README.txt
[ -s "$README" ] || fail "no README.txt"

# Every file-like word of README.txt (a name with an extension or a path below a bundle folder)
# exists in the bundle: as a path from the root, under include/, or as a name in lib/ or examples/.
n=0
for w in $(tr -s ' \t,:()' '\n' <"$README" | grep -E '^[A-Za-z0-9_./+-]+$' |
           grep -E '\.(py|sh|h|txt|so)(\.[0-9.]+)?$|^(bin|lib|include|python|examples|tools)/' | sort -u); do
  case $w in ../../lib/*) w=lib/${w#../../lib/} ;; esac # the package's view of lib/
  if [ -e "$R/$w" ] || [ -e "$R/include/$w" ] || [ -e "$R/lib/$w" ] || [ -e "$R/examples/$w" ]; then
    n=$((n + 1))
  else
    fail "README.txt names '$w', which the bundle lacks"
  fi
done

# Every file of the bundle is named (the Python package by its folder).
words=$(tr -s ' \t,:' '\n' <"$README")
has() { grep -qxF -- "$1" <<<"$words"; }
for f in $(cd "$R" && find bin lib include examples tools -type f | sort); do
  case $f in
    include/*) has "${f#include/}" || fail "README.txt does not list $f" ;;
    lib/libadaptiveload.so | bin/adaptiveload | tools/*) has "$f" || fail "README.txt does not list $f" ;;
    lib/* | examples/*) has "$(basename "$f")" || fail "README.txt does not list $f" ;;
    *) fail "unexpected file $f" ;;
  esac
done
has "python/adaptiveload/" || fail "README.txt does not list python/adaptiveload/"
[ -f "$R/python/adaptiveload/__init__.py" ] || fail "no Python package"
ls "$R/examples/"*.py >/dev/null 2>&1 || fail "no examples"
[ "$n" -gt 20 ] || fail "README.txt names only $n files"

# The verbs are the CLI's own.
verbs=$("$BIN" --help | awk '/^verbs:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
[ -n "$verbs" ] || fail "no verbs in $BIN --help"
line=$(grep "^  bin/adaptiveload " "$README") || fail "no bin/adaptiveload line"
for v in $verbs; do
  grep -qE "[ :,]$v(,|$)" <<<"$line" || fail "README.txt's CLI line lacks the verb $v: $line"
done
echo PASS
