#!/usr/bin/env python3
"""Include-direction check (run by .ci/run): the layers of docs/architecture.md, lowest first.

A file in layer L (include/distcrown/L/ or src/L/) may include headers of L and of the layers
below it, never above. Within a layer, modules (x.hpp + x.cpp) must not include each other in a
cycle. Installed headers (cmake/DistcrownInstall.cmake, DISTCROWN_PUBLIC_HEADERS) may include
installed headers only. Exits 1 with one line per violation.
"""
import pathlib
import re
import sys

LAYERS = ["util", "collective", "bounds", "graph", "ops", "methods", "sharding", "io", "bab", "cli"]
RANK = {name: i for i, name in enumerate(LAYERS)}
ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def module_of(path):
    """(layer, stem) of a project file, or None when it is outside the layers."""
    rel = path.relative_to(ROOT).parts
    if rel[:2] == ("include", "distcrown") and len(rel) == 4:
        return rel[2], pathlib.Path(rel[3]).stem
    if rel[0] == "src" and len(rel) == 3:
        return rel[1], pathlib.Path(rel[2]).stem
    return None


def target_of(include, including):
    """(layer, stem) an include names: "distcrown/L/x.hpp", "cli/x.hpp" or a sibling "x.hpp"."""
    parts = include.split("/")
    if parts[0] == "distcrown" and len(parts) == 3:
        return parts[1], pathlib.Path(parts[2]).stem
    if len(parts) == 2 and parts[0] in RANK:
        return parts[0], pathlib.Path(parts[1]).stem
    if len(parts) == 1:
        return including[0], pathlib.Path(parts[0]).stem
    return None


def public_headers():
    text = (ROOT / "cmake" / "DistcrownInstall.cmake").read_text()
    block = re.search(r"set\(DISTCROWN_PUBLIC_HEADERS(.*?)\)", text, re.S)
    return set(block.group(1).split()) if block else set()


def main():
    errors = []
    edges = {}
    files = sorted(ROOT.glob("include/distcrown/*/*.hpp")) + sorted(ROOT.glob("src/*/*.[ch]pp"))
    for f in files:
        mod = module_of(f)
        if mod is None:
            continue
        if mod[0] not in RANK:
            errors.append(f"{f.relative_to(ROOT)}: folder '{mod[0]}' is not a layer of {LAYERS}")
            continue
        for inc in INCLUDE.findall(f.read_text()):
            tgt = target_of(inc, mod)
            if tgt is None or tgt[0] not in RANK:
                continue
            if RANK[tgt[0]] > RANK[mod[0]]:
                errors.append(f"{f.relative_to(ROOT)}: includes \"{inc}\": layer '{tgt[0]}' is above "
                              f"'{mod[0]}' (order: {' < '.join(LAYERS)})")
            if tgt != mod:
                edges.setdefault(mod, set()).add(tgt)
    # Module cycles (x.cpp includes y.hpp while y.cpp includes x.hpp, or longer).
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                errors.append("include cycle: " + " -> ".join(f"{l}/{s}" for l, s in cycle))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    public = public_headers()
    if not public:
        errors.append("cmake/DistcrownInstall.cmake: no DISTCROWN_PUBLIC_HEADERS list")
    for h in sorted(public):
        path = ROOT / h
        if not path.exists():
            errors.append(f"{h}: listed as public but missing")
            continue
        for inc in INCLUDE.findall(path.read_text()):
            if inc.startswith("distcrown/") and f"include/{inc}" not in public:
                errors.append(f"{h}: installed, but includes the internal header \"{inc}\"")
    for e in errors:
        print("check_layers:", e)
    if errors:
        return 1
    print(f"check_layers: {len(files)} files, includes point down ({' < '.join(LAYERS)}), "
          f"no cycles, {len(public)} public headers self-contained")
    return 0


if __name__ == "__main__":
    sys.exit(main())
