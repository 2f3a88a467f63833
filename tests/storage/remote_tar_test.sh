#!/bin/bash
# storage_tar_scan (//storage) over nginx on 127.0.0.1: the members of ustar, pax and
# GNU tars (long names, directories, an empty member, a 3 MB member between small ones)
# match Python's tarfile (name, data offset, size, type); neighbouring headers come in one
# ranged GET and the big payload is never fetched; damaged tars (cut in a header, cut in a
# member, a bad checksum) are errors naming the URL and the offset; through the fault server
# a tar read with connection resets gives the same listing.
set -uo pipefail
PROBE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/remote_tar
rm -rf "$T" && mkdir -p "$T/www"
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$(readlink -f "$0")")/../loader/remote_servers.sh"

python3 - "$T/www" <<'PY' || fail "writing the tars"
import io, os, random, sys, tarfile
d = sys.argv[1]
rng = random.Random(7)
fmts = {"ustar": tarfile.USTAR_FORMAT, "pax": tarfile.PAX_FORMAT, "gnu": tarfile.GNU_FORMAT}
for name, fmt in fmts.items():
    with tarfile.open(os.path.join(d, name + ".tar"), "w", format=fmt) as t:
        def add(n, size, kind=tarfile.REGTYPE):
            i = tarfile.TarInfo(n)
            i.type, i.size, i.mtime = kind, size if kind == tarfile.REGTYPE else 0, 1700000000
            t.addfile(i, io.BytesIO(rng.randbytes(i.size)) if i.size else None)
        add("dir", 0, tarfile.DIRTYPE)
        for k in range(150):
            add("dir/%06d.json" % k, rng.randrange(0, 1500))
            add("dir/%06d.jpg" % k, rng.randrange(1, 4000))
            if k == 75:
                add("dir/big.mp4", 3 << 20)
        add("empty", 0)
        deep = "d" * 120 + "/" + "f" * 90  # prefix + name in ustar
        add(deep if fmt == tarfile.USTAR_FORMAT else "long/" + "n" * 150 + ".bin", 1234)
    with tarfile.open(os.path.join(d, name + ".tar")) as t, open(os.path.join(d, name + ".want"), "w") as f:
        for m in t.getmembers():
            # tarfile drops a directory's trailing '/', which the header holds.
            name = m.name + "/" if m.isdir() else m.name
            f.write("%s %d %d %s\n" % (name, m.offset_data, m.size, m.type.decode()))
b = open(os.path.join(d, "ustar.tar"), "rb").read()
with tarfile.open(os.path.join(d, "ustar.tar")) as t:
    ms = t.getmembers()
h2 = ms[2].offset  # the third member's header
open(os.path.join(d, "cut_header.tar"), "wb").write(b[: h2 + 100])
open(os.path.join(d, "cut_member.tar"), "wb").write(b[: ms[2].offset_data + 10])
bad = bytearray(b)
bad[h2] ^= 1  # a name byte
open(os.path.join(d, "bad_sum.tar"), "wb").write(bytes(bad))
open(os.path.join(d, "offsets"), "w").write("%d %d %s %d\n" % (h2, h2 + 100, ms[2].name, ms[2].offset_data + 10))
PY
read -r H2 CUT_H NAME2 CUT_M <"$T/www/offsets"
start_nginx "$T/www"
start_faults "$T/www"
NG=http://127.0.0.1:$NGINX_PORT
FT=http://127.0.0.1:$FAULT_PORT

for f in ustar pax gnu; do
  "$PROBE" tar "$NG/$f.tar" 65536 >"$T/out" 2>"$T/err" || fail "$f: $(cat "$T/err")"
  grep -v '^tar requests' "$T/out" >"$T/got"
  cmp -s "$T/www/$f.want" "$T/got" || fail "$f: $(diff "$T/www/$f.want" "$T/got" | head)"
  read -r _ _ req _ fetched < <(grep '^tar requests' "$T/out")
  size=$(stat -c %s "$T/www/$f.tar")
  # ~300 small members in ~600 KB: a handful of 64 KiB windows; the 3 MB payload skipped.
  [ "$req" -le 16 ] && [ "$fetched" -lt $((size - (3 << 20) + 65536)) ] ||
    fail "$f: $req requests, $fetched of $size bytes fetched"
done
# One header per request with the smallest window: the same listing.
"$PROBE" tar "$NG/pax.tar" 512 2>/dev/null | grep -v '^tar requests' >"$T/got" || fail "batch 512"
cmp -s "$T/www/pax.want" "$T/got" || fail "batch 512: listing differs"

"$PROBE" tar "$NG/cut_header.tar" 65536 >"$T/out" 2>"$T/err" && fail "cut header read"
grep -qx "$NG/cut_header.tar: offset $H2: the tar ends inside a header (size $CUT_H)" "$T/err" ||
  fail "cut header: $(cat "$T/err")"
"$PROBE" tar "$NG/cut_member.tar" 65536 >"$T/out" 2>"$T/err" && fail "cut member read"
grep -q "^$NG/cut_member.tar: offset $H2: member $NAME2's [0-9]* bytes run past the end (size $CUT_M)$" \
  "$T/err" || fail "cut member: $(cat "$T/err")"
"$PROBE" tar "$NG/bad_sum.tar" 65536 >"$T/out" 2>"$T/err" && fail "bad checksum read"
grep -qx "$NG/bad_sum.tar: offset $H2: not a tar header (checksum or size)" "$T/err" ||
  fail "bad checksum: $(cat "$T/err")"

"$PROBE" -b 0.01 tar "$FT/reset/3/gnu.tar" 65536 >"$T/out" 2>"$T/err" || fail "reset: $(cat "$T/err")"
grep -v '^tar requests' "$T/out" | cmp -s "$T/www/gnu.want" - || fail "reset: listing differs"
grep -q "retries 3 " "$T/err" || fail "reset: $(cat "$T/err")"
echo PASS
