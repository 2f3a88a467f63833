#!/bin/bash
# `adaptiveload index` of shards behind URLs, against nginx and the S3 server (tests/loader/s3_server.py) on 127.0.0.1: the same
# corpus indexed from local disk, over http (brace patterns) and from S3 (a listed prefix,
# a bare prefix) gives identical samples, offsets, typed headers, content fingerprints and
# index fingerprint; payloads are not fetched; compressed shards (.tar.gz, .tar.lz4) are read
# through; a plan from a remote index is byte-identical to one from the local index;
# unreachable servers, missing objects, non-tar objects and a refused access key are rejected
# shards naming their URLs, the rest indexed; credentials appear nowhere.
# Python's adaptiveload.build_index gives the same index from http and S3 URLs.
# args: ADAPTIVELOAD REMOTE_INDEX_DUMP LIBADAPTIVELOAD_SO PYTHON_DIR
set -uo pipefail
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
AL=$(abs "$1")
DUMP=$(abs "$2")
export ADAPTIVELOAD_LIB=$(abs "$3") PYTHONPATH=$(cd "$4" && pwd) PYTHONDONTWRITEBYTECODE=1
. "$(dirname "$0")/../common/python_env.sh"
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_index
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/remote_servers.sh"

S3_SECRET=sekrit-value-$$ # the server's secret for this run: never in an index
unset AWS_SESSION_TOKEN AWS_ENDPOINT_URL

# The corpus: three synth shards with ~1-4 MB latents per sample, a shard with typed .npy
# latents and payload members, and metadata-only shards compressed with gzip and LZ4.
W=$T/www
mkdir -p "$W/meta" "$W/bad"
"$AL" synth --out "$W/corpus" --samples 60 --shards 3 --seed 7 >/dev/null 2>&1 || fail "synth"
python3 - "$W/corpus/shard-000003.tar" <<'PY' || fail "typed shard"
import io, json, random, sys, tarfile
rng = random.Random(3)
def npy(shape):  # .npy 1.0 of float16 zeros-and-noise, header padded to 128 bytes
    d = "{'descr': '<f2', 'fortran_order': False, 'shape': (%s), }" % "".join("%d, " % x for x in shape)
    d = d.ljust(128 - 10 - 1) + "\n"
    n = 2
    for x in shape:
        n *= x
    return b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d.encode() + rng.randbytes(n)
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as tar:
    def add(name, data):
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        ti.mtime = 1700000000
        tar.addfile(ti, io.BytesIO(data))
    for i in range(12):
        key = "typed/%04d" % i
        t = 1 + i % 3
        add(key + ".json", json.dumps({"width": 96, "height": 64, "frames": (t - 1) * 4 + 1, "fps": 24}).encode())
        add(key + ".latent.npy", npy((16, t, 8, 12)))
        add(key + ".mp4", rng.randbytes(300000 + 1000 * i))
PY
"$AL" synth --out "$T/m" --samples 300 --shards 2 --seed 9 --payload none >/dev/null 2>&1 || fail "synth meta"
gzip -c "$T/m/shard-000000.tar" >"$W/meta/shard-000000.tar.gz"
lz4 -q -c "$T/m/shard-000001.tar" >"$W/meta/shard-000001.tar.lz4"
head -c 70000 /dev/urandom >"$W/bad/junk.tar"
zstd -q -c "$T/m/shard-000001.tar" >"$W/meta/shard-000002.tar.zst"
# Damaged plain tars: cut inside a payload, and a header overwritten mid-shard.
head -c 2000000 "$W/corpus/shard-000003.tar" >"$W/bad/cut.tar"
cp "$W/corpus/shard-000003.tar" "$W/bad/hdr.tar"
printf 'garbage!' | dd of="$W/bad/hdr.tar" bs=1 seek=306000 conv=notrunc status=none

run() { # run NAME ARGS...: index, exit status in $T/NAME.rc, outputs in $T/NAME.{out,err}
  local name=$1
  shift
  "$AL" index --no-progress --json -o "$T/$name.idx" "$@" >"$T/$name.out" 2>"$T/$name.err"
  echo $? >"$T/$name.rc"
}
ok() { [ "$(cat "$T/$1.rc")" = 0 ] || fail "$1: exit $(cat "$T/$1.rc"): $(cat "$T/$1.err")"; }
dump() { "$DUMP" "$T/$1.idx" >"$T/$1.dump" 2>"$T/$1.where" || fail "dump $1"; }
json() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$T/$1.out" "$2"; }
same() { diff "$T/$1.dump" "$T/$2.dump" >"$T/diff" || fail "$1 and $2 differ: $(head -20 "$T/diff")"; }

start_nginx "$W"
start_s3 bkt
export AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
U=http://127.0.0.1:$NGINX_PORT
EP=$S3_EP
for f in "$W"/corpus/*.tar "$W"/meta/*; do s3_put "$f" "${f#"$W"/}"; done
echo "not a shard" >"$T/README.txt"
s3_put "$T/README.txt" corpus/README.txt

# 1. Local, http (brace pattern) and S3 (listed prefix): the same index.
run local "$W/corpus"
ok local
run http "$U/corpus/shard-{000000..000003}.tar"
ok http
run s3 --s3-endpoint "$EP" s3://bkt/corpus/
ok s3
for x in local http s3; do dump $x; done
same local http
same local s3
[ "$(grep -c '^shard ' "$T/local.dump")" = 4 ] || fail "expected 4 shards: $(cat "$T/local.dump" | head)"
grep -q 'latent.npy@[0-9]*+[0-9]*:float16(16,3,8,12)+128' "$T/local.dump" ||
  fail "typed members not indexed: $(grep typed "$T/local.dump" | head -3)"
grep -q 'content_fp 0000000000000000' "$T/local.dump" && fail "a content fingerprint is missing"
grep -q "^where 0 $U/corpus/shard-000000.tar remote 1 etag \"..*\"\$" "$T/http.where" ||
  fail "http shard record: $(cat "$T/http.where")"
grep -q '^where 3 s3://bkt/corpus/shard-000003.tar remote 2 etag "[0-9a-f]\{32\}"$' "$T/s3.where" ||
  fail "s3 shard record: $(cat "$T/s3.where")"

# Payloads are not fetched: a few % of the corpus at most, and per-shard figures add up.
for x in http s3; do
  python3 - "$T/$x.out" <<'PY' || fail "$x transfer figures: $(cat "$T/$x.out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["remote_shards"] == 4, j
assert 0 < j["remote_bytes"] * 50 < j["bytes"], (j["remote_bytes"], j["bytes"])
assert sum(r["requests"] for r in j["remote"]) == j["remote_requests"], j
assert sum(r["bytes"] for r in j["remote"]) == j["remote_bytes"], j
assert all(r["requests"] >= 2 for r in j["remote"]), j
PY
done
grep -q "index: 4 remote shards: [0-9]* requests" <("$AL" index --no-progress -o "$T/x.idx" \
  "$U/corpus/shard-00000{0,1,2,3}.tar" 2>&1) || fail "summary line"

# Local paths and URLs mixed, and a brace pattern of s3:// objects: the same index again.
run mixed --s3-endpoint "$EP" "$W/corpus/shard-000000.tar" "$U/corpus/shard-000001.tar" \
  "s3://bkt/corpus/shard-{000002..000003}.tar"
ok mixed
dump mixed
same local mixed
grep -q "^where 0 $W/corpus/shard-000000.tar remote 0 etag \$" "$T/mixed.where" &&
  grep -q "^where 2 s3://bkt/corpus/shard-000002.tar remote 2 " "$T/mixed.where" ||
  fail "mixed records: $(cat "$T/mixed.where")"
[ "$(json mixed remote_shards)" = 3 ] || fail "mixed: $(cat "$T/mixed.out")"

# A bare prefix lists the same objects (README.txt is not a tar); AWS_ENDPOINT_URL serves
# as the endpoint.
AWS_ENDPOINT_URL=$EP run s3bare s3://bkt/corpus/shard-0000
ok s3bare
dump s3bare
same local s3bare
run s3none --s3-endpoint "$EP" s3://bkt/nothing/
[ "$(cat "$T/s3none.rc")" = 1 ] && grep -q "s3://bkt/nothing/.*no \*.tar" "$T/s3none.err" ||
  fail "empty prefix: $(cat "$T/s3none.err")"

# A plan of the remote index is the plan of the local one.
"$AL" plan --index "$T/local.idx" --world 2 --seed 3 -o "$T/local.m" >/dev/null 2>&1 || fail "plan local"
"$AL" plan --index "$T/s3.idx" --world 2 --seed 3 -o "$T/s3.m" >/dev/null 2>&1 || fail "plan s3"
cmp -s "$T/local.m" "$T/s3.m" || fail "manifests of the local and the S3 index differ"
"$AL" inspect "$T/http.idx" >"$T/inspect.out" 2>&1 || fail "inspect"
grep -q "remote    4 shards are URLs (the first $U/corpus/shard-000000.tar)" "$T/inspect.out" ||
  fail "inspect: $(cat "$T/inspect.out")"

# Python: build_index with URLs, s3_endpoint=, and its errors.
if al_tsan_build "$ADAPTIVELOAD_LIB"; then
  # Python cannot load a ThreadSanitizer build of the library (the runtime must start the
  # process); the C indexing above ran under it, and this step runs in the other builds.
  echo "remote_index_test: the Python step does not run against a TSan build of the library"
else
( # a subshell: only python3 gets an ASan build's runtimes preloaded, not the CLI runs
al_asan_env "$ADAPTIVELOAD_LIB"
/usr/bin/python3 - "$T" "$U" "$EP" <<'PY'
import sys
import adaptiveload
t, u, ep = sys.argv[1:]
r = adaptiveload.build_index(u + "/corpus/shard-{000000..000003}.tar", t + "/pyhttp.idx")
assert r["samples"] == 72 and r["remote_shards"] == 4 and len(r["remote"]) == 4, r
assert r["remote_bytes"] * 50 < r["bytes"], r
r = adaptiveload.build_index(["s3://bkt/corpus/"], t + "/pys3.idx", s3_endpoint=ep, threads=2)
assert r["samples"] == 72 and r["remote_requests"] == sum(x["requests"] for x in r["remote"]), r
try:
    adaptiveload.build_index([u + "/corpus/missing.tar"], t + "/pymiss.idx", remote_timeout=1)
    raise SystemExit("a missing object alone must fail")
except adaptiveload.Error as e:
    assert "no shard could be read" in str(e), e
try:
    adaptiveload.build_index(["s3://bkt/nothing/"], t + "/pyempty.idx", s3_endpoint=ep)
    raise SystemExit("an empty prefix must fail")
except adaptiveload.Error as e:
    assert "s3://bkt/nothing/" in str(e), e
for bad in ({"threads": -1}, {"remote_timeout": 0}):
    try:
        adaptiveload.build_index(u + "/corpus/shard-000000.tar", t + "/pybad.idx", **bad)
        raise SystemExit("accepted %r" % bad)
    except ValueError:
        pass
PY
) || fail "python build_index"
for x in pyhttp pys3; do dump $x; same local $x; done
fi

# 2. Compressed shards: read through, the same records as from local disk.
run mlocal "$W/meta/shard-000000.tar.gz" "$W/meta/shard-000001.tar.lz4" "$W/meta/shard-000002.tar.zst"
ok mlocal
run mhttp "$U/meta/shard-000000.tar.gz" "$U/meta/shard-000001.tar.lz4" "$U/meta/shard-000002.tar.zst"
ok mhttp
run ms3 --s3-endpoint "$EP" s3://bkt/meta/
ok ms3
for x in mlocal mhttp ms3; do dump $x; done
same mlocal mhttp
same mlocal ms3
grep -q "shard shard-000000.tar.gz .* compression gzip" "$T/ms3.dump" || fail "gzip: $(cat "$T/ms3.dump" | head -3)"
grep -q "shard shard-000001.tar.lz4 .* compression lz4" "$T/ms3.dump" || fail "lz4"
grep -q "shard shard-000002.tar.zst .* compression zstd" "$T/ms3.dump" || fail "zstd"
[ "$(json mhttp remote_bytes)" -ge "$(json mhttp bytes)" ] || fail "compressed: read through"

# Damaged plain tars: the same samples and the same rejected entries as from local disk.
run dlocal "$W/bad/cut.tar" "$W/bad/hdr.tar"
run dhttp "$U/bad/cut.tar" "$U/bad/hdr.tar"
for x in dlocal dhttp; do
  dump $x
  "$AL" inspect "$T/$x.idx" --rejected --json |
    python3 -c 'import json,sys; [print(e["member"], e["offset"], e["key"], e["reason"]) for e in json.load(sys.stdin)["entries"]]' \
      >"$T/$x.raw" || fail "inspect --rejected $x"
  sed -e "s#$W/bad/##g" -e "s#$U/bad/##g" "$T/$x.raw" >"$T/$x.rej" # duplicates name the shards
done
same dlocal dhttp
diff "$T/dlocal.rej" "$T/dhttp.rej" >"$T/diff" || fail "damaged tars: rejections differ: $(cat "$T/diff")"
[ "$(wc -l <"$T/dlocal.rej")" -ge 2 ] || fail "damaged tars: expected rejections: $(cat "$T/dlocal.rej")"

# 3. Errors: each bad shard is rejected naming its URL, the good one is indexed.
DOWN=http://127.0.0.1:$(free_port)
run errs --remote-timeout 1 --s3-endpoint "$EP" "$U/corpus/shard-000003.tar" "$DOWN/x.tar" \
  "$U/corpus/missing.tar" "$U/bad/junk.tar" s3://bkt/corpus/missing.tar s3://nobucket/a.tar
ok errs
[ "$(json errs samples)" = 12 ] && [ "$(json errs rejected)" = 5 ] || fail "errors: $(cat "$T/errs.out")"
for u in "$DOWN/x.tar" "$U/corpus/missing.tar: .*404" "$U/bad/junk.tar: .*not a readable tar" \
  "s3://bkt/corpus/missing.tar.*404" "s3://nobucket/a.tar"; do
  grep -q "$u" "$T/errs.err" || fail "no rejection for $u: $(cat "$T/errs.err")"
done
run strict --strict --remote-timeout 1 "$U/corpus/shard-000003.tar" "$U/corpus/missing.tar"
[ "$(cat "$T/strict.rc")" = 1 ] || fail "--strict with a missing object: exit $(cat "$T/strict.rc")"
# An access key the server refuses: every shard rejected with the 403, exit 1.
AWS_ACCESS_KEY_ID=NOSUCHKEY run denied --s3-endpoint "$EP" s3://bkt/corpus/shard-000000.tar
[ "$(cat "$T/denied.rc")" = 1 ] && grep -q "s3://bkt/corpus/shard-000000.tar.*403" "$T/denied.err" ||
  fail "refused key: $(cat "$T/denied.err")"
# A URL with user:password@ is refused before anything is stored.
run userinfo "http://user:pw-$S3_SECRET@127.0.0.1:$NGINX_PORT/corpus/shard-000000.tar"
[ "$(cat "$T/userinfo.rc")" = 1 ] && grep -q "user:password@" "$T/userinfo.err" ||
  fail "userinfo: $(cat "$T/userinfo.err")"
# The secret is nowhere: not in messages, not in index files.
grep -l -- "$S3_SECRET" "$T"/*.out "$T"/*.err "$T"/*.idx 2>/dev/null && fail "the secret leaked"
grep -l -- "$S3_KEY_ID" "$T"/*.where "$T"/*.dump 2>/dev/null && fail "the access key id is in an index"
echo PASS
