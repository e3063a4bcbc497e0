#!/usr/bin/env python3
"""Fails when a module of a workspace crate depends on a module that depends
back on it, directly or through others.

Each source file is one module (`a/b.rs` and `a/b/mod.rs` are `a::b`). A
module depends on another when its code names a path into it: a `use` line
or an inline path (`crate::x::y`, `super::y`, `self::y`), resolved to the
longest known module prefix. A module naming its own submodules is the
normal tree and so is a child naming its ancestors' items through `super`;
every other edge counts, and a strongly connected group of two or more
modules is a cycle.

Usage: check-cycles.py [CRATE_SRC_DIR ...]   (default: every src/ folder
of the workspace's crates, found from Cargo.toml files)
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PATH = re.compile(r'\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)')
USE_GROUP = re.compile(r'\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\}\s*;', re.S)
COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/', re.S)
STRING = re.compile(r'"(?:\\.|[^"\\])*"')


def module_of(src, file):
    parts = list(file.relative_to(src).with_suffix('').parts)
    if parts[-1] in ('mod', 'lib', 'main'):
        parts.pop()
    return tuple(parts)


def crate_sources():
    for manifest in sorted(ROOT.rglob('Cargo.toml')):
        if any(p in ('target', 'node_modules', '.git') for p in manifest.parts):
            continue
        src = manifest.parent / 'src'
        if src.is_dir():
            yield src


def edges_of(src):
    files = [f for f in src.rglob('*.rs')]
    modules = {module_of(src, f): f for f in files}
    graph = {m: set() for m in modules}

    def resolve(base, segments):
        path = list(base)
        for i, seg in enumerate(segments):
            if seg == 'super':
                if not path:
                    return None
                path.pop()
            elif seg == 'self' and i == 0:
                pass
            else:
                path.append(seg)
        best = None
        for n in range(len(path), -1, -1):
            if tuple(path[:n]) in modules:
                best = tuple(path[:n])
                break
        return best

    for module, file in modules.items():
        text = STRING.sub('""', COMMENT.sub('', file.read_text()))
        paths = []
        for head, prefix, group in USE_GROUP.findall(text):
            for item in re.split(r',', group):
                item = item.strip().split(' as ')[0].strip()
                first = re.match(r'[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*', item)
                if first:
                    paths.append((head, prefix + '::' + first.group(0)))
        paths += PATH.findall(text)
        for head, rest in paths:
            segs = [s for s in rest.split('::') if s]
            if head == 'crate':
                target = resolve((), segs)
            elif head == 'super':
                target = resolve(module, ['super'] + segs)
            else:
                target = resolve(module, segs)
            if target is None or target == module:
                continue
            if target[:len(module)] == module:
                continue  # a module naming its own submodule
            if module[:len(target)] == target:
                continue  # a child naming an ancestor's item
            graph[module].add(target)
    return graph


def cycles(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(group)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    sources = [pathlib.Path(a).resolve() for a in sys.argv[1:]] or list(crate_sources())
    failed = 0
    for src in sources:
        graph = edges_of(src)
        for group in cycles(graph):
            failed += 1
            names = sorted('::'.join(m) or 'crate' for m in group)
            print(f'{src.relative_to(ROOT)}: module cycle: ' + ' <-> '.join(names), file=sys.stderr)
            for m in sorted(group):
                inside = sorted('::'.join(t) or 'crate' for t in graph[m] if t in group)
                print(f'    {"::".join(m) or "crate"} uses {", ".join(inside)}', file=sys.stderr)
    if failed:
        print(f'{failed} module cycle(s)', file=sys.stderr)
        sys.exit(1)
    print(f'no module cycles in {len(sources)} crates')


main()
