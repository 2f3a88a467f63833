#!/bin/bash
# `adaptiveload verify` of a typed corpus (KEY.latent.npy, KEY.t5.npy) on local disk, on nginx
# (http://) and on the S3 server (s3://, tests/loader/s3_server.py) on the loopback:
#   - intact: exit 0 from all three, every typed member header read (none fetched whole);
#   - one run over the S3 copy finds a deleted object, a replaced object (same size, other
#     bytes), a truncated object, a sample lacking a member and a typed header rewritten after
#     indexing (the ETag tells), each naming its URL, with --s3-endpoint or AWS_ENDPOINT_URL;
#   - on local disk a typed member whose header was rewritten in place (same size: the shard's
#     tar headers and so its fingerprint unchanged) is a bad_header problem naming shard, key,
#     member and byte offset, where before it passed verify and stopped the stream;
#   - an S3 index verified against another endpoint fails naming the URL, within the budget.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
HERE=$(dirname "$(readlink -f "$0")")
T=${TEST_TMPDIR:-$(mktemp -d)}/verify_remote
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$HERE/../loader/remote_servers.sh"
PY=$(al_python)
al_require "$PY" numpy "the typed corpus" || exit 1
export PYTHONDONTWRITEBYTECODE=1

# Five shards of 8 samples with typed latents and text (examples/train_dit.py's smoke
# profile); in shard 3 one sample's t5.npy left out before indexing.
W=$T/www
PYTHONPATH="$HERE/../../examples" "$PY" - "$W/c" <<'PY' || fail "corpus"
import io, sys, tarfile
import train_dit
out = sys.argv[1]
train_dit.write_typed_corpus(out, 40, shards=5, seed=1, profile="smoke", text_dim=8)
path = out + "/shard-000003.tar"
src = tarfile.open(path)
members = [(m, src.extractfile(m).read()) for m in src.getmembers()]
src.close()
dropped = [m.name for m, _ in members if m.name.endswith(".t5.npy")][2]
with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as dst:
    for m, data in members:
        if m.name != dropped:
            dst.addfile(m, io.BytesIO(data))
print(dropped)
PY
BUCKETS=$T/buckets.txt
PYTHONPATH="$HERE/../../examples" "$PY" -c "import train_dit; open('$BUCKETS', 'w').write(train_dit.SMOKE_BUCKETS)" ||
  fail "buckets"

start_nginx "$W"
start_s3 bkt
export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_ENDPOINT_URL
for f in "$W"/c/*.tar; do s3_put "$f" "c/$(basename "$f")"; done
urls=()
for f in "$W"/c/*.tar; do urls+=("http://127.0.0.1:$NGINX_PORT/c/$(basename "$f")"); done
"$BIN" index -o "$T/local.alidx" "$W/c" >/dev/null 2>&1 || fail "index local"
"$BIN" index -o "$T/http.alidx" "${urls[@]}" >/dev/null 2>&1 || fail "index http"
"$BIN" index -o "$T/s3.alidx" --s3-endpoint "$S3_EP" s3://bkt/c/ >"$T/err" 2>&1 || fail "index s3: $(cat "$T/err")"

# verify NAME INDEX [options]: --json into $T/NAME.json, exit status into $T/NAME.rc.
verify() {
  local name=$1 idx=$2
  shift 2
  "$BIN" verify "$idx" --buckets "$BUCKETS" --json --quiet "$@" >"$T/$name.json" 2>"$T/$name.err"
  echo $? >"$T/$name.rc"
}
# field NAME EXPR: a Python expression over the report `r` (its --json).
field() { "$PY" -c "import json, sys; r = json.load(open(sys.argv[1])); print($2)" "$T/$1.json"; }

# 1. Intact: exit 0, every typed header read (40 latents and 39 texts).
for kind in local http s3; do
  verify "intact-$kind" "$T/$kind.alidx" --s3-endpoint "$S3_EP"
  [ "$(cat "$T/intact-$kind.rc")" = 0 ] || fail "intact $kind: exit $(cat "$T/intact-$kind.rc"): $(cat "$T/intact-$kind.json" "$T/intact-$kind.err")"
  [ "$(field "intact-$kind" "r['typed_headers_read']")" = 79 ] ||
    fail "intact $kind: typed headers read: $(field "intact-$kind" "r['typed_headers_read']"), want 79"
done
reqs=$(field intact-s3 "r['remote_requests']")
[ "$reqs" -ge 5 ] && [ "$reqs" -le 40 ] || fail "intact s3: $reqs requests for 5 shards"
echo "ok: intact: exit 0 from local, http and s3 indexes; 79 typed headers read each; $reqs requests to S3"

# 2. A sample lacking a member, asked for: missing_member in all three.
verify lacks-s3 "$T/s3.alidx" --s3-endpoint "$S3_EP" --members latent.npy,t5.npy
[ "$(cat "$T/lacks-s3.rc")" = 3 ] && [ "$(field lacks-s3 "r['problem_count']")" = 1 ] &&
  field lacks-s3 "[p['kind'] for p in r['problems']]" | grep -q "missing_member" ||
  fail "lacking member: $(cat "$T/lacks-s3.json")"

# 3. The S3 copy damaged: shard 0 deleted, 1 replaced (same size), 2 truncated, 4 with a typed
# header rewritten (same size). One run finds all of them, and the lacking member.
code=$(curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" -u "$S3_KEY_ID:$S3_SECRET" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X DELETE "$S3_EP/bkt/c/shard-000000.tar")
[ "$code" = 204 ] || fail "DELETE: $code"
"$PY" - "$W/c" "$T" <<'PY' || fail "damage"
import sys
src, out = sys.argv[1:]
b = bytearray(open(src + "/shard-000001.tar", "rb").read())
b[len(b) // 2] ^= 0xFF  # inside a payload: the tar headers, and so the fingerprint, unchanged
open(out + "/replaced.tar", "wb").write(b)
b = open(src + "/shard-000002.tar", "rb").read()
open(out + "/truncated.tar", "wb").write(b[: len(b) // 2])
PY
# lie FILE: the first latent's npy header says another shape of the same size, in place.
lie() {
  "$PY" - "$1" <<'PY'
import re, sys, tarfile
path = sys.argv[1]
with tarfile.open(path) as t:
    m = next(m for m in t.getmembers() if m.name.endswith(".latent.npy"))
with open(path, "r+b") as f:
    f.seek(m.offset_data)
    head = f.read(128)
    shape = re.search(rb"'shape': \((\d+), (\d+), (\d+), (\d+)\)", head)
    c, t_, h, w = (int(x) for x in shape.groups())
    new = b"'shape': (%d, %d, %d, %d)" % (c, t_, w, h) if h != w else b"'shape': (%d, %d, %d, %d)" % (t_, c, h, w)
    assert len(new) == len(shape.group(0)) and new != shape.group(0), (new, shape.group(0))
    f.seek(m.offset_data + shape.start())
    f.write(new)
print(m.name, m.offset_data)
PY
}
cp "$W/c/shard-000004.tar" "$T/lie.tar" && lie "$T/lie.tar" >"$T/lie.where" || fail "lie"
s3_put "$T/replaced.tar" c/shard-000001.tar
s3_put "$T/truncated.tar" c/shard-000002.tar
s3_put "$T/lie.tar" c/shard-000004.tar
check_damaged() { # NAME: the report of the damaged S3 copy
  [ "$(cat "$T/$1.rc")" = 3 ] || fail "$1: exit $(cat "$T/$1.rc"): $(cat "$T/$1.err")"
  local got
  got=$(field "$1" "sorted((p['kind'], p['shard']) for p in r['problems'])")
  want="[('changed_shard', 's3://bkt/c/shard-000001.tar'), ('changed_shard', 's3://bkt/c/shard-000004.tar'), ('missing_member', 's3://bkt/c/shard-000003.tar'), ('missing_shard', 's3://bkt/c/shard-000000.tar'), ('truncated_shard', 's3://bkt/c/shard-000002.tar')]"
  [ "$got" = "$want" ] || fail "$1: problems $got"
  field "$1" "'\n'.join(p['message'] for p in r['problems'])" | grep -q "shard-000004.tar: shard changed since indexing (object changed): ETag is" ||
    fail "$1: the rewritten header's shard: $(field "$1" "r['problems']")"
}
verify damaged-s3 "$T/s3.alidx" --s3-endpoint "$S3_EP" --members latent.npy,t5.npy
check_damaged damaged-s3
AWS_ENDPOINT_URL=$S3_EP verify damaged-env "$T/s3.alidx" --members latent.npy,t5.npy
check_damaged damaged-env
echo "ok: one run over the damaged S3 copy: deleted, replaced, truncated, lacking a member, a rewritten header ($(field damaged-s3 "r['problem_count']") problems), with --s3-endpoint and with AWS_ENDPOINT_URL"

# 4. Local: the typed header rewritten in place (the shard's fingerprint unchanged).
lie "$W/c/shard-000004.tar" >"$T/lie-local.where" || fail "lie local"
read -r member offset <"$T/lie-local.where"
key=${member%.latent.npy}
verify lie-local "$T/local.alidx"
[ "$(cat "$T/lie-local.rc")" = 3 ] || fail "local lie: exit $(cat "$T/lie-local.rc"): $(cat "$T/lie-local.json")"
[ "$(field lie-local "[(p['kind'], p['key']) for p in r['problems']]")" = "[('bad_header', '$key')]" ] ||
  fail "local lie: $(field lie-local "r['problems']")"
field lie-local "r['problems'][0]['message']" |
  grep -q "$W/c/shard-000004.tar: key '$key' member 'latent.npy' at byte $offset: its header says float16 (" ||
  fail "local lie message: $(field lie-local "r['problems'][0]['message']")"
echo "ok: local: $(field lie-local "r['problems'][0]['message']")"

# 5. The S3 index against another endpoint (nginx: no such bucket): each shard a missing_shard
# naming its URL, within the budget.
verify wrong-ep "$T/s3.alidx" --s3-endpoint "http://127.0.0.1:$NGINX_PORT" --remote-timeout 2
[ "$(cat "$T/wrong-ep.rc")" = 3 ] && [ "$(field wrong-ep "r['kind_counts']['missing_shard'] if 'kind_counts' in r else sum(p['kind'] == 'missing_shard' for p in r['problems'])")" = 5 ] ||
  fail "wrong endpoint: $(cat "$T/wrong-ep.json" "$T/wrong-ep.err")"
field wrong-ep "r['problems'][0]['message']" | grep -q "s3://bkt/c/shard-00000.\.tar (http://127.0.0.1:$NGINX_PORT/bkt/c/" ||
  fail "wrong endpoint message: $(field wrong-ep "r['problems'][0]['message']")"
echo "ok: another endpoint: $(field wrong-ep "r['problems'][0]['message']")"
echo PASS
