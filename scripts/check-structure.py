#!/usr/bin/env python3
"""Checks the shape of the code that the compiler does not:
- within each crate no two files import each other (a file names another with `crate::a::b`,
  `super::x`, also in doc links, outside `#[cfg(test)]` modules: every strongly connected set
  of files larger than one is listed);
- no two of a crate's folders (its top-level modules: the engine's layers os < exec < measure
  < kinds < run) import each other, directly or around a circle;
- no function outside tests is longer than 150 lines (a long function is a set of phases
  waiting for names), and no file longer than 800 lines outside its tests (a long file is
  several subjects waiting for their own files).
Exit 1 when any is found.

    scripts/check-structure.py [CRATES_DIR ...]   (default: crates benches)
"""
import os, re, sys

LIMIT = 150
FILE_LIMIT = 800
def strip_tests(text):
    lines = text.split("\n")
    out, skip, depth = [], False, 0
    i = 0
    while i < len(lines):
        l = lines[i]
        if l.strip() == "#[cfg(test)]" and i + 1 < len(lines) and re.match(r"\s*(pub(\(crate\))?\s+)?mod \w+\s*\{", lines[i + 1]):
            depth = 0
            j = i + 1
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth <= 0 and "{" in "".join(lines[i + 1:j + 1]):
                    break
                j += 1
            i = j + 1
            continue
        out.append(l)
        i += 1
    return "\n".join(out)

def crate_files(src):
    files = {}
    for dp, dn, fns in os.walk(src):
        for f in fns:
            if f.endswith(".rs"):
                p = os.path.join(dp, f)
                rel = os.path.relpath(p, src)[:-3].split(os.sep)
                if rel[-1] == "mod":
                    rel = rel[:-1]
                if rel == ["lib"] or rel == ["main"]:
                    rel = []
                files[tuple(rel)] = p
    return files

def resolve(files, path):
    # deepest prefix that is a file
    for k in range(len(path), 0, -1):
        if tuple(path[:k]) in files:
            return tuple(path[:k])
    return None

def circles(root, top=False):
    """Strongly connected sets of files (or, with `top`, of a crate's top-level modules: its
    folders and loose files, the engine's layers) larger than one, printed; their count."""
    bad = 0
    for crate in sorted(os.listdir(root)):
        src = os.path.join(root, crate, "src")
        if not os.path.isdir(src):
            continue
        files = crate_files(src)
        edges = {k: set() for k in files}
        for mod, p in files.items():
            text = strip_tests(open(p).read())
            for m in re.finditer(r"\bcrate((?:::\w+)+)", text):
                target = resolve(files, m.group(1).split("::")[1:])
                if target is not None and target != mod and target != ():
                    edges[mod].add(target)
            # super:: from a file module
            parent = mod[:-1]
            for m in re.finditer(r"\bsuper((?:::\w+)+)", text):
                target = resolve(files, list(parent) + m.group(1).split("::")[1:])
                if target is not None and target != mod and target != ():
                    edges[mod].add(target)
            # `use crate::{a, b::c}` groups
            for m in re.finditer(r"\bcrate::\{([^}]*)\}", text):
                for item in m.group(1).split(","):
                    item = item.strip().split(" as ")[0]
                    if not item or item == "self":
                        continue
                    target = resolve(files, item.split("::"))
                    if target is not None and target != mod and target != ():
                        edges[mod].add(target)
        if top:
            folded = {}
            for a, targets in edges.items():
                if not a:
                    continue
                folded.setdefault(a[:1], set()).update(b[:1] for b in targets if b and b[:1] != a[:1])
            edges = folded
        # Tarjan
        index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]
        sys.setrecursionlimit(10000)
        def strong(v):
            index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
            for w in edges[v]:
                if w not in index:
                    strong(w); low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v: break
                if len(comp) > 1:
                    sccs.append(comp)
        for v in edges:
            if v not in index:
                strong(v)
        for comp in sccs:
            bad += 1
            names = sorted("/".join(c) + ".rs" for c in comp)
            pairs = [f"{'/'.join(a)}->{'/'.join(b)}" for a in comp for b in edges[a] if b in comp]
            what = "folders" if top else "files"
            print(f"{crate} ({what}): {' , '.join(names)}   [{'; '.join(sorted(pairs))}]")
    return bad


FN = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"C"\s+)?fn\s+(\w+)')


def long_functions(root, limit=LIMIT):
    out = []
    for dp, _, fns in os.walk(root):
        if "/tests" in dp or dp.endswith("tests") or "target" in dp:
            continue
        for f in fns:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(dp, f)
            lines = strip_tests(open(p).read()).split("\n")
            for i, line in enumerate(lines):
                m = FN.match(line)
                if not m or line.rstrip().endswith(";"):
                    continue
                depth, started, j = 0, False, i
                while j < len(lines):
                    s = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j])
                    s = re.sub(r"'(\\.|[^'\\])'", "''", s).split("//")[0]
                    depth += s.count("{") - s.count("}")
                    started = started or "{" in s
                    if started and depth <= 0:
                        break
                    j += 1
                if j - i + 1 > limit:
                    out.append((j - i + 1, p, i + 1, m.group(7)))
    return out


def long_files(root, limit=FILE_LIMIT):
    out = []
    for dp, _, fns in os.walk(root):
        if "/tests" in dp or dp.endswith("tests") or "target" in dp:
            continue
        for f in fns:
            if f.endswith(".rs"):
                p = os.path.join(dp, f)
                n = len(strip_tests(open(p).read()).split("\n"))
                if n > limit:
                    out.append((n, p))
    return out


def main(roots):
    bad = 0
    for root in roots:
        bad += circles(root) + circles(root, top=True) if os.path.isdir(root) and any(os.path.isdir(os.path.join(root, c, "src")) for c in os.listdir(root)) else 0
        for n, p, line, name in sorted(long_functions(root), reverse=True):
            print(f"{p}:{line}: fn {name} is {n} lines (over {LIMIT})")
            bad += 1
        for n, p in sorted(long_files(root), reverse=True):
            print(f"{p}: {n} lines outside tests (over {FILE_LIMIT})")
            bad += 1
    return bad


if __name__ == "__main__":
    roots = sys.argv[1:] or ["crates", "benches"]
    found = main(roots)
    if found:
        print(f"check-structure: {found} problem(s)", file=sys.stderr)
    sys.exit(1 if found else 0)
