#!/bin/bash
# A three-source mixture against its largest source planned alone, in one run: the plan
# summaries (bubble, tokens per step and its CV, predicted tokens/s) of `plan --mixture` by
# tokens and by compute, of a staged mixture (a ramp, a paused source) with inspect's realised
# shares per stage, and of `plan --index web --planner chunked`, at W = 64, K = 2.
# Usage: dev/bench_mixture.sh BIN WORK [WEB_N HQ_N IMG_N]
set -euo pipefail
BIN=$1 W=$2 NW=${3:-30000} NH=${4:-3000} NI=${5:-10000}
mkdir -p "$W"
for x in web:$NW:3 hq:$NH:4 img:$NI:5; do
  IFS=: read -r name n seed <<<"$x"
  [ -e "$W/$name.alidx" ] && continue
  "$BIN" synth --out "$W/$name" --samples "$n" --payload none --seed "$seed" >/dev/null 2>&1
  "$BIN" index -o "$W/$name.alidx" "$W/$name" >/dev/null 2>&1
done
for by in tokens compute; do
  cat >"$W/mix-$by.json" <<J
{"by": "$by", "steps": 400,
 "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5},
             {"name": "hq", "index": "hq.alidx", "weight": 0.3},
             {"name": "img", "index": "img.alidx", "weight": 0.2}]}
J
  echo "== mixture by $by"
  "$BIN" plan --mixture "$W/mix-$by.json" --world 64 --micro-per-step 2 -o "$W/mix-$by.alm" 2>&1 |
    grep -E "^plan: (mixture|source|imbalance|2 micro)"
done
cat >"$W/mix-staged.json" <<J
{"by": "tokens", "steps": 400,
 "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5},
             {"name": "hq", "index": "hq.alidx", "weight": 0.3},
             {"name": "img", "index": "img.alidx", "weight": 0.2}],
 "stages": [{"from_step": 128, "ramp_steps": 128, "weights": {"web": 0.2, "hq": 0.2, "img": 0.6}},
            {"from_step": 320, "weights": {"web": 0.6, "hq": 0, "img": 0.4}}]}
J
echo "== mixture by tokens, staged (a ramp over steps 128..255, hq paused from 320)"
"$BIN" plan --mixture "$W/mix-staged.json" --world 64 --micro-per-step 2 -o "$W/mix-staged.alm" 2>&1 |
  grep -E "^plan: (mixture|source|stage|imbalance|2 micro)"
"$BIN" inspect "$W/mix-staged.alm" | sed -n '/^mixture by/,$p'
echo "== web alone, chunked"
"$BIN" plan --index "$W/web.alidx" --planner chunked --world 64 --micro-per-step 2 -o "$W/web.alm" 2>&1 |
  grep -E "^plan: (chunked|imbalance|2 micro)"
