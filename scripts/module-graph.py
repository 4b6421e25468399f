#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Who calls whom among the agent's modules, read from the built objects.

usage: scripts/module-graph.py [BUILD_DIR]   (default: build)

An edge A -> B means an object of module A uses a symbol that module B
defines (nm: A's undefined symbols against B's defined ones). Prints every
edge with the symbols behind it, then every cycle (a module reachable from
itself), and exits 1 if there is one. doc/design.md, "Architecture", draws
the graph this checks.
"""
import glob
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = set(), set()
    for ln in out.splitlines():
        parts = ln.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRC":
            defined.add(name)
    return defined, undefined


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    build = argv[1] if len(argv) == 2 else "build"
    objs = sorted(glob.glob(os.path.join(build, "agent", "*.p", "*.c.o")))
    if not objs:
        print("module-graph: no objects under %s/agent: build first (ninja -C %s)"
              % (build, build), file=sys.stderr)
        return 2
    mods = {}
    for o in objs:
        name = os.path.basename(o)[:-len(".c.o")]
        if name.startswith("sdnotify-"):
            name = "sdnotify"
        mods[name] = symbols(o)
    owner = {}
    for m, (defined, _) in mods.items():
        for s in defined:
            owner[s] = m
    edges = {}
    for m, (_, undefined) in mods.items():
        for s in undefined:
            t = owner.get(s)
            if t is not None and t != m:
                edges.setdefault((m, t), []).append(s)
    for (a, b), syms in sorted(edges.items()):
        print("%-9s -> %-9s %s" % (a, b, " ".join(sorted(syms))))
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    cycles = set()

    def walk(start, node, path):
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                cyc = path + [start]
                i = cyc.index(min(cyc[:-1]))
                cycles.add(tuple(cyc[i:-1] + cyc[:i + 1]))
            elif nxt not in path and nxt > start:
                walk(start, nxt, path + [nxt])
    for m in sorted(graph):
        walk(m, m, [m])
    if cycles:
        print("\ncycles:")
        for c in sorted(cycles, key=len):
            print("  " + " -> ".join(c))
        return 1
    print("\nno cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
