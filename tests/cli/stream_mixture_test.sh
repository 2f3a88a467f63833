#!/bin/bash
# A mixture's manifest streamed through the binary: `stream --mixture MIX.json` reads every
# sample from its own source's index (each delivered array is the one that source's index holds
# under that key: the CRC-32 of the plain stream of each index alone), every rank's rows name
# the sources, together the ranks deliver each source's draws (its passes), and a resume at a
# position delivers what the full stream delivers from there. Streaming it as one index, or with
# the sources in another order, is refused naming the source.
set -uo pipefail
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T=${TEST_TMPDIR:-$(mktemp -d)}/stream_mixture
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

# A few small buckets, so that small corpora fill whole micro-batches.
printf 'frames 1 5\naspect 1:1 240x240\naspect 16:9 416x240\naspect 9:16 240x416\n' >"$T/buckets.txt"
for x in web:120:3 hq:30:4 img:80:5; do
  IFS=: read -r name n seed <<<"$x"
  "$BIN" synth --out "$T/$name" --samples "$n" --shards 2 --seed "$seed" >/dev/null 2>&1 || fail "synth $name"
  "$BIN" index -o "$T/$name.alidx" "$T/$name" >/dev/null 2>&1 || fail "index $name"
  # Every sample of the index alone: key -> CRC-32 of its delivered latent.
  "$BIN" plan --index "$T/$name.alidx" --world 1 --buckets "$T/buckets.txt" -o "$T/$name.alm" >/dev/null 2>&1 ||
    fail "plan $name"
  "$BIN" stream --index "$T/$name.alidx" --manifest "$T/$name.alm" --jsonl >"$T/$name.jsonl" 2>/dev/null ||
    fail "stream $name alone"
done
cat >"$T/mix.json" <<'J'
{"by": "tokens", "steps": 120,
 "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5},
             {"name": "hq", "index": "hq.alidx", "weight": 0.3},
             {"name": "img", "index": "img.alidx", "weight": 0.2}]}
J
"$BIN" plan --mixture "$T/mix.json" --world 2 --micro-per-step 2 --buckets "$T/buckets.txt" -o "$T/mix.alm" \
  2>"$T/plan.err" ||
  fail "plan: $(cat "$T/plan.err")"
for r in 0 1; do
  "$BIN" stream --mixture "$T/mix.json" --manifest "$T/mix.alm" --rank $r --jsonl >"$T/r$r.jsonl" 2>"$T/err" ||
    fail "stream rank $r: $(cat "$T/err")"
done
python3 - "$T" <<'PY' || fail "the mixture's stream"
import collections, json, re, sys
t = sys.argv[1]
crc = {}
for name in ("web", "hq", "img"):
    for line in open("%s/%s.jsonl" % (t, name)):
        row = json.loads(line)
        m = next(iter(row["members"].values()))
        for k, c, p in zip(row["keys"], m["crc32"], row["padded"]):
            crc[(name, k)] = c
drawn = {m.group(1): int(m.group(2)) for m in
         re.finditer(r"plan: source (\w+): weight [0-9.]+, \w+, \d+ pass(?:es)? of \d+ samples, draws (\d+) samples",
                     open(t + "/plan.err").read())}
assert set(drawn) == {"web", "hq", "img"}, drawn
got = collections.Counter()
for r in (0, 1):
    for line in open("%s/r%d.jsonl" % (t, r)):
        row = json.loads(line)
        m = next(iter(row["members"].values()))
        assert len(row["sources"]) == len(row["keys"]), row
        for s, k, c, p in zip(row["sources"], row["keys"], m["crc32"], row["padded"]):
            assert (s, k) in crc, "key %s is not in source %s" % (k, s)
            assert crc[(s, k)] == c, "%s/%s: delivered CRC %s, the source's index holds %s" % (s, k, c, crc[(s, k)])
            if not p:
                got[s] += 1
for s, n in drawn.items():
    assert got[s] == n, "source %s: %d real samples delivered, the plan draws %d" % (s, got[s], n)
print("ok", dict(got))
PY

# Resume: from position 7 of rank 1, the same rows as the full stream from there.
"$BIN" stream --mixture "$T/mix.json" --manifest "$T/mix.alm" --rank 1 --resume-at 7 --jsonl >"$T/res.jsonl" 2>"$T/err" ||
  fail "resume: $(cat "$T/err")"
strip() { sed 's/,"cost":{[^}]*}//' "$1"; }
diff <(strip "$T/res.jsonl") <(strip "$T/r1.jsonl" | tail -n +8) >/dev/null || fail "the resumed stream differs"

# Refusals.
"$BIN" stream --index "$T/web.alidx" --manifest "$T/mix.alm" --rank 0 >/dev/null 2>"$T/err" && fail "streamed a mixture as one index"
grep -q "mixture's (3 sources)" "$T/err" || fail "one index: $(cat "$T/err")"
sed 's/"web.alidx"/"TMP"/; s/"hq.alidx"/"web.alidx"/; s/"TMP"/"hq.alidx"/' "$T/mix.json" >"$T/swap.json"
"$BIN" stream --mixture "$T/swap.json" --manifest "$T/mix.alm" --rank 0 >/dev/null 2>"$T/err" && fail "streamed swapped indexes"
grep -q "source 'web' was planned from another index" "$T/err" || fail "swapped: $(cat "$T/err")"
sed 's/"name": "hq"/"name": "hq2"/' "$T/mix.json" >"$T/rename.json"
"$BIN" stream --mixture "$T/rename.json" --manifest "$T/mix.alm" --rank 0 >/dev/null 2>"$T/err" && fail "streamed a renamed source"
grep -q "source 1 is 'hq2' but manifest .* source 1 is 'hq'" "$T/err" || fail "renamed: $(cat "$T/err")"
"$BIN" stream --mixture "$T/mix.json" --index "$T/web.alidx" --manifest "$T/mix.alm" >/dev/null 2>"$T/err" && fail "both"
grep -q "exclude each other" "$T/err" || fail "both: $(cat "$T/err")"
# --require-members in a mixture: a source whose samples lack the latent in every fourth sample.
# Planned without it, the stream refuses at open (a sample of the rank lacks the member);
# planned with it, those samples are left out of every pass and the stream reads every batch.
python3 - "$T/cap" <<'PY'
import io, json, os, sys, tarfile
os.makedirs(sys.argv[1])
with tarfile.open(os.path.join(sys.argv[1], "shard-000000.tar"), "w", format=tarfile.USTAR_FORMAT) as t:
    def add(name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    for k in range(40):
        key = "cap-%04d" % k
        add(key + ".json", json.dumps({"width": 240, "height": 240, "frames": 1}).encode())
        if k % 4:
            add(key + ".latent", bytes([k]) * (16 * 30 * 30 * 2))
PY
"$BIN" index -o "$T/cap.alidx" "$T/cap" >/dev/null 2>&1 || fail "index cap"
cat >"$T/req.json" <<'J'
{"by": "tokens", "steps": 60,
 "sources": [{"name": "web", "index": "web.alidx", "weight": 0.6},
             {"name": "cap", "index": "cap.alidx", "weight": 0.4}]}
J
"$BIN" plan --mixture "$T/req.json" --world 2 --micro-per-step 2 --buckets "$T/buckets.txt" -o "$T/noreq.alm" \
  >/dev/null 2>&1 || fail "plan without --require-members"
"$BIN" stream --mixture "$T/req.json" --manifest "$T/noreq.alm" --rank 0 >/dev/null 2>"$T/err" &&
  fail "streamed samples lacking the latent"
grep -q "source 'cap'" "$T/err" || fail "lacking says: $(cat "$T/err")"
"$BIN" plan --mixture "$T/req.json" --world 2 --micro-per-step 2 --buckets "$T/buckets.txt" --require-members latent \
  -o "$T/req.alm" 2>"$T/err" || fail "plan --require-members: $(cat "$T/err")"
grep -q "plan: source cap: weight [0-9.]*, repeat, [0-9]* passes of 30 samples" "$T/err" || fail "cap's pass: $(grep cap "$T/err")"
for r in 0 1; do
  "$BIN" stream --mixture "$T/req.json" --manifest "$T/req.alm" --rank $r --jsonl >"$T/q$r.jsonl" 2>"$T/err" ||
    fail "stream --require-members rank $r: $(cat "$T/err")"
done
python3 - "$T" <<'PY' || fail "the required member"
import json, sys
t = sys.argv[1]
keys = [k for r in (0, 1) for l in open("%s/q%d.jsonl" % (t, r))
        for s, k in zip(json.loads(l)["sources"], json.loads(l)["keys"]) if s == "cap"]
assert keys and all(int(k[-4:]) % 4 for k in keys), keys[:8]
PY

# verify --mixture: every source checked, each against its entry in the mixture's plan.
"$BIN" verify --mixture "$T/mix.json" "$T/mix.alm" --buckets "$T/buckets.txt" >"$T/v.txt" 2>&1 ||
  fail "verify: $(tail -5 "$T/v.txt")"
[ "$(grep -c '^== source ' "$T/v.txt")" -eq 3 ] || fail "verify sections: $(grep '^== ' "$T/v.txt")"
grep -q "verify: mixture $T/mix.json: 3 sources, no problems" "$T/v.txt" || fail "verify summary: $(tail -2 "$T/v.txt")"
"$BIN" verify --mixture "$T/mix.json" "$T/web.alm" --json >"$T/v.json" 2>/dev/null
[ $? -eq 3 ] || fail "verify with a one-index manifest did not report a problem"
grep -q '"manifest_problem":' "$T/v.json" || fail "no manifest problem: $(head -c 300 "$T/v.json")"
# A shard of hq cut short: its source reports it; the others stay clean.
shard=$(ls "$T"/hq/*.tar | head -1)
truncate -s 100000 "$shard"
"$BIN" verify --mixture "$T/mix.json" "$T/mix.alm" --json >"$T/v.json" 2>/dev/null
[ $? -eq 3 ] || fail "verify of a truncated hq shard did not report problems"
python3 - "$T/v.json" <<'PY' || fail "verify's report of the truncated source"
import json, sys
d = json.load(open(sys.argv[1]))
by = {s["source"]: s for s in d["sources"]}
assert not d["ok"] and by["web"]["ok"] and by["img"]["ok"] and not by["hq"]["ok"], {k: v["ok"] for k, v in by.items()}
assert by["hq"]["manifest_used"]
PY
echo PASS
