#!/bin/bash
# The member rules from the CLI, over .npy corpora written here (pure Python: tarfile, struct):
# a member no sample has fails at open (also with --on-error skip), samples lacking a member
# fail at open or count against the skip budget (--max-skip-fraction), plan --require-members
# leaves them out, stream without --members delivers the index's typed latent, a
# KEY.latent_hr.npy latent is cropped to what cu_seqlens counts, and a --root copy whose .npy
# header was rewritten in place is a changed shard.
set -uo pipefail
BIN=$(pwd)/adaptiveload
T=${TEST_TMPDIR:-$(mktemp -d)}/members_cli
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() { local want=$1; shift; "$@" >"$T/out" 2>"$T/err"; local rc=$?; [ $rc = "$want" ] || { cat "$T/err" >&2; fail "$* -> exit $rc, wanted $want"; }; }

# corpus DIR LATENT_EXT LACK: 24 samples over 2 shards, KEY.json + KEY.LATENT_EXT (16, T, H/8,
# W/8) float16 + KEY.t5.npy, except samples i % LACK == 1 (LACK 0: none) without t5.npy.
corpus() {
  python3 - "$@" <<'PY'
import io, json, os, struct, sys, tarfile
out, lat_ext, lack = sys.argv[1], sys.argv[2], int(sys.argv[3])
def npy(descr, shape):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join("%d, " % s for s in shape))
    d += " " * ((64 - (10 + len(d) + 1) % 64) % 64) + "\n"
    n = 1
    for s in shape: n *= s
    isz = 2 if descr == "<f2" else 4
    data = bytes((i * 7 + 3) % 251 for i in range(n * isz))
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode("latin1") + data
os.makedirs(out, exist_ok=True)
tars = [tarfile.open(os.path.join(out, "s-%d.tar" % k), "w", format=tarfile.USTAR_FORMAT) for k in range(2)]
for i in range(24):
    key = "k%04d" % i
    w, h, f = 96 + 8 * (i % 5), 64 + 8 * (i % 4), 1 if i % 2 == 0 else 9
    members = [("json", json.dumps({"width": w, "height": h, "frames": f}).encode()),
               (lat_ext, npy("<f2", (16, 1 + (f - 1) // 4, h // 8, w // 8)))]
    if not (lack and i % lack == 1):
        members.append(("t5.npy", npy("<f4", (3 + i % 4, 8))))
    for ext, b in members:
        ti = tarfile.TarInfo("%s.%s" % (key, ext)); ti.size = len(b); ti.mtime = 1700000000
        tars[i % 2].addfile(ti, io.BytesIO(b))
for t in tars: t.close()
PY
}
printf 'frames 1 9 17\naspect 1:1 64x64\naspect 3:2 96x64\naspect 2:1 96x48 128x64\n' >"$T/buckets"
plan() { expect_rc 0 "$BIN" plan --index "$1" --world 1 --mem-tokens 400 --buckets "$T/buckets" -o "$2" "${@:3}"; }

corpus "$T/a" latent.npy 12 || fail "corpus a"   # k0001 and k0013 lack t5.npy
expect_rc 0 "$BIN" index -o "$T/a.alidx" "$T/a"
plan "$T/a.alidx" "$T/a.alm"
S=(stream --index "$T/a.alidx" --manifest "$T/a.alm")

# A typo: refused at open naming it and what the index has, whatever --on-error.
for mode in fail skip; do
  expect_rc 1 "$BIN" "${S[@]}" --members latent.npy,clip.npy --on-error $mode
  grep -q "member 'clip.npy' is in no sample of the index (24 samples); the index has: json, latent.npy, t5.npy" "$T/err" ||
    fail "typo ($mode): $(cat "$T/err")"
  grep -q "^step " "$T/out" && fail "typo ($mode) delivered batches"
done

# Samples lacking t5.npy: fail at open naming them; skip: past the default budget at open.
expect_rc 1 "$BIN" "${S[@]}" --members latent.npy,t5.npy
grep -q "2 of 24 samples lack a requested member: key 'k00" "$T/err" &&
  grep -q "key 'k0001' (shard $T/a/s-1.tar) has no 't5.npy'" "$T/err" && grep -q "key 'k0013'" "$T/err" ||
  fail "lacking at open: $(cat "$T/err")"
grep -q "^step " "$T/out" && fail "a stream lacking members delivered batches"
expect_rc 1 "$BIN" "${S[@]}" --members latent.npy,t5.npy --on-error skip
grep -q "skipped 2 of the 24 samples this stream reads, more than max_skip_fraction 0.01 allows" "$T/err" ||
  fail "budget at open: $(cat "$T/err")"
expect_rc 0 "$BIN" "${S[@]}" --members latent.npy,t5.npy --on-error skip --max-skip-fraction 0.1
grep -q "22 samples, 2 skipped$" "$T/err" || fail "skip within budget: $(cat "$T/err")"
expect_rc 2 "$BIN" "${S[@]}" --max-skip-fraction 0
expect_rc 2 "$BIN" "${S[@]}" --max-skip-fraction 1.5
# Everything skipped (a sample cap below every sample): exit 1 whatever the budget.
expect_rc 1 "$BIN" "${S[@]}" --on-error skip --max-skip-fraction 1 --max-sample-bytes 16
grep -q "delivered no sample: all 24 of its samples were skipped" "$T/err" || fail "nothing delivered: $(cat "$T/err")"

# plan --require-members: the two left out, listed; the stream needs no skipping.
plan "$T/a.alidx" "$T/r.alm" --require-members latent.npy,t5.npy
grep -q "plan: 2 samples left out (--require-members): 2 of 24 samples lack a requested member: key 'k0001'" "$T/err" ||
  fail "plan summary: $(cat "$T/err")"
grep -q "22 samples" "$T/err" || fail "plan planned other than 22: $(cat "$T/err")"
plan "$T/a.alidx" "$T/rj.alm" --require-members latent.npy,t5.npy --json
python3 -c 'import json, sys; d = json.loads(open(sys.argv[1]).read()); assert d["left_out_members"] == 2, d' "$T/out" ||
  fail "plan --json left_out_members: $(cat "$T/out")"
expect_rc 0 "$BIN" inspect "$T/r.alm"
grep -q "^left out    2 lacking a required member (plan --require-members)" "$T/out" || fail "inspect summary: $(cat "$T/out")"
expect_rc 0 "$BIN" inspect "$T/a.alm"
grep -q "^left out" "$T/out" && fail "inspect summary of a plain plan: $(cat "$T/out")"
expect_rc 0 "$BIN" inspect "$T/r.alm" --rejected
[ "$(grep -c 'lacks a required member' "$T/out")" = 2 ] && grep -q "k0013" "$T/out" || fail "inspect --rejected: $(cat "$T/out")"
expect_rc 0 "$BIN" stream --index "$T/a.alidx" --manifest "$T/r.alm" --members latent.npy,t5.npy
grep -q ", 0 skipped" "$T/err" || fail "required-members stream: $(cat "$T/err")"
expect_rc 1 "$BIN" plan --index "$T/a.alidx" --world 1 -o "$T/x.alm" --require-members t5.np
grep -q "member 't5.np' is in no sample" "$T/err" || fail "plan typo: $(cat "$T/err")"
expect_rc 2 "$BIN" plan --index "$T/a.alidx" --world 1 -o "$T/x.alm" --require-members latent.npy,,t5.npy
# Without the option the manifest is the same file as before.
plan "$T/a.alidx" "$T/a2.alm"
cmp -s "$T/a.alm" "$T/a2.alm" || fail "plan is not deterministic"

# No --members: the index's typed latent (latent.npy), cropped: tokens x 4 x 16 x 2 bytes.
check_crop() {  # JSONL on stdin, latent member name
  python3 -c '
import json, sys
name, n = sys.argv[1], 0
for line in sys.stdin:
    b = json.loads(line); m = b["members"][name]
    for i, shape in enumerate(m["shapes"]):
        c, t, h, w = shape
        tokens = b["cu_seqlens"][i + 1] - b["cu_seqlens"][i]
        assert c == 16 and t * (h // 2) * (w // 2) == tokens, (b["keys"][i], shape, tokens)
        n += 1
assert n == 24 or n == 22, n
print(n)' "$1"
}
expect_rc 0 "$BIN" "${S[@]}" --jsonl
check_crop latent.npy <"$T/out" >/dev/null || fail "default member not the cropped latent.npy: $(head -c 300 "$T/out")"

# KEY.latent_hr.npy: the index's latent, so cropped as planned.
corpus "$T/hr" latent_hr.npy 0 || fail "corpus hr"
expect_rc 0 "$BIN" index -o "$T/hr.alidx" "$T/hr"
plan "$T/hr.alidx" "$T/hr.alm"
expect_rc 0 "$BIN" stream --index "$T/hr.alidx" --manifest "$T/hr.alm" --members latent_hr.npy,t5.npy --jsonl
check_crop latent_hr.npy <"$T/out" >/dev/null || fail "latent_hr.npy not cropped to cu_seqlens: $(head -c 300 "$T/out")"
expect_rc 0 "$BIN" stream --index "$T/hr.alidx" --manifest "$T/hr.alm" --jsonl
check_crop latent_hr.npy <"$T/out" >/dev/null || fail "latent_hr.npy not the default: $(head -c 300 "$T/out")"

# A --root copy with one .npy header rewritten in place (16 -> 8 channels, as many elements).
cp -r "$T/a" "$T/copy"
python3 - "$T/copy/s-1.tar" <<'PY' || fail "rewrite"
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
old, new = b"'shape': (16, 3, 9, 13, ), }", b"'shape': (8, 6, 9, 13, ), } "  # k0001: 9 frames, 104 x 72
at = b.find(old)
assert at > 0 and len(old) == len(new)
b[at:at + len(old)] = new
open(p, "wb").write(bytes(b))
PY
expect_rc 1 "$BIN" "${S[@]}" --root "$T/a=$T/copy"
grep -q "$T/copy/s-1.tar: shard changed since indexing: key 'k0001' member 'k0001.latent.npy' at byte [0-9]*: its header says float16 (8, 6, 9, 13), the index recorded float16 (16, 3, 9, 13)" "$T/err" ||
  fail "rewritten header: $(cat "$T/err")"
echo "PASS: members CLI"
