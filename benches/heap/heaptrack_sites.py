#!/usr/bin/env python3
"""Live bytes per connection by allocation site, from a heaptrack flamegraph file.

Usage: heaptrack_sites.py STACKS N [DEPTH|crate] [TOP]

STACKS is `heaptrack_print -f FILE.zst -F STACKS --flamegraph-cost-type leaked` of a
server killed while it held N idle connections: what was still allocated, by stack. Each
site is named by its DEPTH (default 3) innermost frames outside std/core/alloc; with
`crate` instead, bytes are summed by the crate of the innermost such frame (a task's box
counted apart from the rest of fibr). Bytes are as requested (glibc adds 8 and rounds each chunk up to 16, 32 at least). See README.md.
"""
import collections
import re
import subprocess
import sys

path, n = sys.argv[1], int(sys.argv[2])
by_crate = len(sys.argv) > 3 and sys.argv[3] == "crate"
depth = 3 if by_crate or len(sys.argv) <= 3 else int(sys.argv[3])
top = int(sys.argv[4]) if len(sys.argv) > 4 else 40

stacks, frames = [], set()
for line in open(path):
    if not line.strip():
        continue
    st, cost = line.rstrip("\n").rsplit(" ", 1)
    fs = [f for f in st.split(";") if f]
    stacks.append((fs, int(cost)))
    frames.update(fs)
frames = sorted(frames)
names = [re.sub(r" \([^)]*\)$", "", f) for f in frames]
out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
LEGACY = [("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$u7b$", "{"), ("$u7d$", "}"),
          ("$LP$", "("), ("$RP$", ")"), ("$C$", ","), ("$RF$", "&"), ("$BP$", "*"), ("..", "::")]


def clean(d):
    d = re.sub(r"\[[0-9a-f]+\]", "", d)
    for a, b in LEGACY:
        d = d.replace(a, b)
    return re.sub(r"::h[0-9a-f]{16}$", "", d).lstrip("_")


dm = {f: clean(d) for f, d in zip(frames, out.stdout.split("\n"))}
skip = re.compile(r"^(alloc::|core::|std::|<alloc::|<core::|<std::|hashbrown|__rust|_?malloc"
                  r"|<T as |<\[|<&|<Q as|<I as|<F as|<A as|<B as|<\(|<usize|<u8)")


def crate(own):
    """The crate of the innermost frame outside std and the containers (`own` is outermost
    first); a spawned task's box is its own group."""
    for x in reversed(own):
        m = re.match(r"<?([a-z_][a-z0-9_]*)::", x)
        if not m or m.group(1) in ("slab", "bytes", "smallvec", "rustc"):
            continue
        if m.group(1) == "fibr" and "::task::spawn_on" in x:
            return "fibr (a task's box: its future)"
        return m.group(1)
    return "other"


sites = collections.Counter()
for fs, cost in stacks:
    own = [x for x in (dm[f] for f in fs) if not skip.match(x)]
    key = crate(own) if by_crate else " <- ".join(reversed(own[-depth:]))[:400]
    sites[key] += cost
total = sum(c for _, c in stacks)
print(f"total {total} B, {total / n:.1f} B per connection")
for site, c in sites.most_common(top):
    if c / n < 1:
        break
    print(f"{c / n:8.1f}  {site}")
