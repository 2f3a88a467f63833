#!/usr/bin/env python3
"""Import cycles among the Python modules of one tree: exits 1 naming each cycle, 0 when the
imports of every tree form a DAG.

    python3 tools/import_cycles.py [--root REPO] [TREE ...]   (default trees: python tests examples dev)

Every `import` and `from ... import` of every .py file is read with ast, wherever it stands (a
function-level import closes a cycle as surely as a top-level one, only later). A name is
resolved the way the tree's code finds it: a package's relative imports against the package;
an absolute name against the importing file's own folder (the scripts put their folder on
sys.path, or run from it) and against the folder above its top package (python/ for
adaptiveload). Names that resolve to no file of the same tree (the standard library, numpy,
torch, another tree such as tests importing adaptiveload from python/) are not edges: a cycle
is counted only among modules of one tree. The import of a package's __init__.py that Python
runs before a submodule is not an edge either, so `from . import x` is an edge to x alone.
Cycles are the strongly connected components of more than one file. Stdlib only; run by
//tools:import_cycles_test."""

import argparse
import ast
import os
import sys

TREES = ("python", "tests", "examples", "dev")
SKIP_DIRS = {"__pycache__", ".venv", ".wheels", "venv", "wheels", "node_modules"}


def py_files(tree):
    for d, dirs, files in os.walk(tree):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith((".", "bazel-")))
        for f in sorted(files):
            if f.endswith(".py"):
                yield os.path.join(d, f)


def package_of(path):
    """(the folder above the top package, the dotted package name) of a file; (its folder, "")
    for a file outside any package."""
    d = os.path.dirname(path)
    parts = []
    while os.path.isfile(os.path.join(d, "__init__.py")):
        parts.insert(0, os.path.basename(d))
        d = os.path.dirname(d)
    return d, ".".join(parts)


def module_file(base, dotted):
    """The file of module `dotted` under folder `base`, or None."""
    p = os.path.join(base, *dotted.split("."))
    for c in (p + ".py", os.path.join(p, "__init__.py")):
        if os.path.isfile(c):
            return c
    return None


def imports_of(path):
    """(module name, names imported from it, relative level) of every import in the file."""
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, (), 0
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", tuple(a.name for a in node.names), node.level


def edges_of(path, in_tree):
    """The files of the same tree that `path` imports."""
    top, pkg = package_of(path)
    here = os.path.dirname(path)
    out = set()

    def add(f):
        if f and in_tree(f) and f != path:
            out.add(f)

    for mod, names, level in imports_of(path):
        if level:
            if not pkg:
                continue  # a relative import outside a package fails; it makes no edge
            up = pkg.split(".")
            up = up[: len(up) - (level - 1)]  # level 1: this package, 2: its parent, ...
            bases, dotted = [top], ".".join(up + ([mod] if mod else []))
        else:
            bases, dotted = [here] + ([top] if top != here else []), mod
        for b in bases:
            f = module_file(b, dotted)
            if f is None:
                continue
            if names and f.endswith("__init__.py"):
                # from PKG import y: the submodule y when there is one, else a name of PKG itself
                for n in names:
                    add(module_file(b, dotted + "." + n) or f)
            else:
                add(f)
            break  # the first folder that has the module is the one Python imports from
    return out


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
    return sorted(comps)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                    help="the repository (default: the one this file is in)")
    ap.add_argument("trees", nargs="*", default=list(TREES))
    a = ap.parse_args()
    bad = 0
    for t in a.trees:
        tree = os.path.join(a.root, t)
        if not os.path.isdir(tree):
            print("import_cycles: no folder %s" % tree, file=sys.stderr)
            return 2
        files = list(py_files(tree))
        prefix = tree.rstrip(os.sep) + os.sep
        graph = {f: edges_of(f, lambda p: p.startswith(prefix)) for f in files}
        found = cycles(graph)
        rel = lambda p: os.path.relpath(p, a.root)  # noqa: E731
        for comp in found:
            bad += 1
            print("cycle in %s/: %s" % (t, ", ".join(rel(f) for f in comp)))
            for f in comp:
                for g in sorted(graph[f] & set(comp)):
                    print("  %s imports %s" % (rel(f), rel(g)))
        print("%s/: %d modules, %d imports among them, %d cycles" % (t, len(files), sum(map(len, graph.values())),
                                                                 len(found)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
