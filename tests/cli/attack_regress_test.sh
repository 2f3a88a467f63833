#!/bin/bash
# Defects tests/attack/run.py found in the CLI, each checked the way the attack saw it:
#  * a verb whose standard output cannot be written (a full disk: /dev/full) exits 1 naming
#    standard output, instead of 0 with its report, JSON or listing lost;
#  * a tar member whose typeflag is GNU sparse ('S') with an empty sparse map is rejected when
#    indexing (its stored bytes are not its content), the sample's other members with it;
#  * `stream` refusing an index / manifest pair names both files; `--ext ''` is a usage error
#    naming --ext;
#  * a re-plan whose --step-tokens needs more than 2^20 micro-batches per rank names
#    step-tokens (it named only the derived micro-per-step);
#  * `inspect INDEX` of an index without rejected entries passes no NULL to qsort (undefined
#    behaviour that UBSan reports under --config=asan; exit 0 with the summary).
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/attack_regress
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN" synth --out "$T/shards" --samples 12 --shards 2 --seed 4 >/dev/null 2>&1 || fail "synth"
"$BIN" index -o "$T/i.alidx" "$T/shards" >/dev/null 2>&1 || fail "index"
"$BIN" plan --index "$T/i.alidx" --world 1 -o "$T/m.alm" >/dev/null 2>&1 || fail "plan"

"$BIN" inspect "$T/i.alidx" >"$T/out" 2>"$T/err" || fail "inspect INDEX: $(cat "$T/err")"
grep -q "rejected  0" "$T/out" || fail "inspect INDEX printed: $(head -5 "$T/out")"
"$BIN" inspect "$T/i.alidx" --json >/dev/null 2>"$T/err" || fail "inspect INDEX --json: $(cat "$T/err")"

# A plain shard, then its second sample's txt header retyped 'S' (checksum fixed).
python3 - "$T/sparse" <<'PY' || fail "python3 writing the sparse shard"
import io, json, os, sys, tarfile
d = sys.argv[1]
os.makedirs(d)
b = io.BytesIO()
with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as t:
    for k in ("a", "b"):
        for ext, data in (("json", json.dumps({"width": 64, "height": 64, "frames": 1}).encode()),
                          ("txt", b"caption " + k.encode())):
            ti = tarfile.TarInfo(k + "." + ext)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
raw = bytearray(b.getvalue())
o = next(i for i in range(0, len(raw), 512) if raw[i:i + 5] == b"b.txt")
raw[o + 156] = ord("S")
raw[o + 148:o + 156] = b" " * 8
raw[o + 148:o + 156] = ("%06o\0 " % sum(raw[o:o + 512])).encode()
open(os.path.join(d, "s.tar"), "wb").write(bytes(raw))
PY
"$BIN" index -o "$T/sp.alidx" "$T/sparse/s.tar" >/dev/null 2>"$T/err" || fail "index of the sparse shard: $(cat "$T/err")"
"$BIN" inspect "$T/sp.alidx" --rejected >"$T/out" 2>&1 || fail "inspect --rejected: $(cat "$T/out")"
grep -q "b.txt.*GNU sparse member (typeflag 'S')" "$T/out" || fail "the 'S' member was not rejected: $(cat "$T/out")"
"$BIN" inspect "$T/sp.alidx" --json | grep -q '"samples": 1,' || fail "sample b was kept"

"$BIN" index -o "$T/sp2.alidx" "$T/sparse/s.tar" >/dev/null 2>&1 || fail "index sp2"
"$BIN" stream --index "$T/sp2.alidx" --manifest "$T/m.alm" >/dev/null 2>"$T/err" && fail "a foreign manifest streamed"
grep -q "planned from another index" "$T/err" && grep -qF "$T/m.alm" "$T/err" && grep -qF "$T/sp2.alidx" "$T/err" ||
  fail "the refused pair is not named: $(cat "$T/err")"
"$BIN" stream --index "$T/i.alidx" --manifest "$T/m.alm" --ext "" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--ext" "$T/err" || fail "--ext '' exited $rc: $(cat "$T/err")"

"$BIN" plan --resume-from "$T/m.alm" --at-step 1 --world 1 --step-tokens 18446744073709551615 \
  -o "$T/r.alm" >/dev/null 2>"$T/err" && fail "a re-plan of 2^64 - 1 step tokens was accepted"
grep -q "step-tokens 18446744073709551615 over 1 ranks" "$T/err" || fail "re-plan message: $(cat "$T/err")"

if [ -w /dev/full ]; then
  for args in "inspect $T/m.alm --json" "inspect $T/m.alm --jsonl" "inspect $T/i.alidx" \
    "stream --index $T/i.alidx --manifest $T/m.alm --jsonl" "fit --default --json" \
    "plan --index $T/i.alidx --world 1 -o $T/m2.alm --json" "index -o $T/i2.alidx --json $T/shards" \
    "--version" "plan --help"; do
    # shellcheck disable=SC2086
    "$BIN" $args >/dev/full 2>"$T/err"
    rc=$?
    [ $rc -eq 1 ] || fail "'$args' >/dev/full exited $rc (want 1): $(cat "$T/err")"
    grep -q "standard output" "$T/err" || fail "'$args' >/dev/full: message $(cat "$T/err")"
  done
  "$BIN" inspect "$T/m.alm" --json >/dev/null 2>&1 || fail "inspect to /dev/null must still work"
else
  echo "attack_regress_test: no writable /dev/full, the stdout checks skipped"
fi
echo "attack_regress_test: OK"
