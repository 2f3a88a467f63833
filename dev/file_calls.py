#!/usr/bin/env python3
"""dev/file_calls.py OBJ_GLOB... - the file-level call graph of object files: for each .o, the
global symbols it defines (nm T/D/R/B) and which other files' symbols it references (nm U).
Prints one line per edge, then `cycles: none` or the files of each cycle (no two source files
may call each other). Usage, after `bazel build --config=opt //...`:
    O=$(bazel info --config=opt bazel-bin)
    python3 dev/file_calls.py "$O/common/_objs/*/*.o" "$O/proto/_objs/*/*.o" "$O/storage/_objs/*/*.o" "$O/loader/_objs/*/*.o" \
        "$O/cost/_objs/*/*.o" "$O/planner/_objs/*/*.o" "$O/manifest/_objs/*/*.o" "$O/stream/_objs/*/*.o" "$O/cli/_objs/*/*.o"
"""
import subprocess, sys, glob, os, itertools
objs = sorted(itertools.chain.from_iterable(glob.glob(a) for a in sys.argv[1:]))
defs, uses = {}, {}
for o in objs:
    name = os.path.basename(o)[:-2] + ".c"
    out = subprocess.run(["nm", o], capture_output=True, text=True).stdout
    d, u = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDRB": d.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U": u.add(parts[1])
    defs[name], uses[name] = d, u
owner = {s: f for f, ds in defs.items() for s in ds}
edges = {}
for f, us in uses.items():
    for s in sorted(us):
        g = owner.get(s)
        if g and g != f: edges.setdefault(f, {}).setdefault(g, []).append(s)
for f in sorted(defs):
    for g, ss in sorted(edges.get(f, {}).items()):
        print(f"{f} -> {g}: {', '.join(ss)}")
# cycles: strongly connected components of size > 1
idx, low, st, on, out, cnt = {}, {}, [], set(), [], [0]
def sc(v):
    idx[v] = low[v] = cnt[0]; cnt[0] += 1; st.append(v); on.add(v)
    for w in edges.get(v, {}):
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: out.append(comp)
for v in defs:
    if v not in idx: sc(v)
print("cycles:", out if out else "none")
