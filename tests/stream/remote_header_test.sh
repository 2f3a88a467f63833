#!/bin/bash
# A remote reader checks what a local reader checks: a shard whose tar headers were rewritten
# in place at the same size (two samples' KEY.json members swap names, checksums fixed), served
# by a server whose ETag does not change with the content (remote_faults.py: "v1-SIZE"), is
# refused by the stream naming the URL, the key, the member and the header's name, where before
# it delivered one sample's caption under the other's key; the same change on local disk is
# refused by the shard's fingerprint. The intact shard streams the local bytes.
set -uo pipefail
BIN=$(readlink -f "$1")
HERE=$(dirname "$(readlink -f "$0")")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_header
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$HERE/../loader/remote_servers.sh"
. "$HERE/remote_stream_steps.sh"

"$BIN" synth --out "$T/www/corpus" --samples 12 --shards 1 --seed 6 >/dev/null 2>&1 || fail synth
"$BIN" index -o "$T/local.alidx" "$T/www/corpus" >/dev/null 2>&1 || fail "index local"
"$BIN" plan --index "$T/local.alidx" --world 1 -o "$T/m.alm" >/dev/null 2>&1 || fail plan
S=("$BIN" stream --manifest "$T/m.alm" --rank 0 --threads 1 --members latent,json --jsonl)
"${S[@]}" --index "$T/local.alidx" >"$T/local.jsonl" 2>"$T/err" || fail "local: $(cat "$T/err")"
start_faults "$T/www"
URL=http://127.0.0.1:$FAULT_PORT/ok/0/corpus/shard-000000.tar
"$BIN" index -o "$T/url.alidx" "$URL" >/dev/null 2>"$T/err" || fail "index url: $(cat "$T/err")"
"${S[@]}" --index "$T/url.alidx" >"$T/url.jsonl" 2>"$T/err" || fail "url: $(cat "$T/err")"
same_delivery "$T/local.jsonl" "$T/url.jsonl" || fail "the intact shard: other bytes than local disk"

# Swap the names of the KEY.json members of the second and third samples in their headers.
python3 - "$T/www/corpus/shard-000000.tar" >"$T/swapped" <<'PY' || fail "rewrite"
import sys, tarfile
path = sys.argv[1]
with tarfile.open(path) as t:
    js = [m for m in t.getmembers() if m.name.endswith(".json")][1:3]
with open(path, "r+b") as f:
    for m, other in ((js[0], js[1].name), (js[1], js[0].name)):
        f.seek(m.offset)
        h = bytearray(f.read(512))
        assert len(other) == len(m.name) < 100
        h[0:100] = other.encode().ljust(100, b"\0")
        h[148:156] = b" " * 8
        h[148:156] = b"%06o\0 " % sum(h)
        f.seek(m.offset)
        f.write(h)
print(js[0].name)
PY
key=$(sed 's/\.json$//' "$T/swapped")

"${S[@]}" --index "$T/url.alidx" >"$T/url2.jsonl" 2>"$T/url2.err" && fail "a rewritten remote shard streamed"
grep -q "$URL: shard changed since indexing: the tar header before key '$key' member '$key.json' at byte [0-9]* names '[0-9-]*.json' ([0-9]* bytes): it names another member" "$T/url2.err" ||
  fail "remote: $(cat "$T/url2.err")"
"${S[@]}" --index "$T/local.alidx" >"$T/local2.jsonl" 2>"$T/local2.err" && fail "a rewritten local shard streamed"
grep -q "shard changed since indexing" "$T/local2.err" || fail "local: $(cat "$T/local2.err")"
echo "ok: remote: $(grep -o 'shard changed since indexing: the tar header[^:]*: it names another member' "$T/url2.err" | head -1)"
echo PASS
