#!/usr/bin/env python3
"""Where an operator's CPU goes, by part, from a `perf` profile of its process.

    perf record -F 499 --call-graph dwarf,8192 -o host.data -p <pid>     # while bench/run.sh runs
    perf script -i host.data --no-inline -F tid,ip,sym > host.script
    python3 bench/cpu_parts.py --objects 1000 --hz 499 floor.script orchard.script

Each sample goes to the first part (in the order below) one of whose patterns a frame of its
stack matches, so that an external API call made from inside a Wasm call counts as the call's
HTTP, not as Wasm. Per object: samples / hz / objects (create and delete together).
"""
import argparse
import re
import sys

PARTS = [
    ("external API calls over HTTP (connect, request, response)",
     r"wasmtime_wasi_http|orchard::runtime::egress|HttpConnector|reqwest|TcpSocket::connect"),
    ("Wasm: instantiate, calls, guest code", r"wasmtime|wasm\["),
    ("the watch: receive, TLS, decode", r"kube_runtime::watcher|WatchEvent|watcher::"),
    ("kube writes: request, TLS, response", r"kube_client|KubeOps|ObjectOps"),
    ("logs and spans (tracing)", r"tracing_subscriber|tracing_core"),
    ("idle workers parking and waking (futex, epoll)", r"park_internal|Unparker::unpark|Waker::wake"),
    ("the operator's own logic (Orchard: cache, queue, flow, claims, index)", r"orchard::|orchard_floor::"),
    ("other (TLS, tokio, allocator, kernel)", r"."),
]


def stacks(path):
    """The stacks of a `perf script -F tid,ip,sym` output, leaf first."""
    stack = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                if stack is not None:
                    yield stack
                stack = None
            elif not line[0].isspace():
                stack = []
            elif stack is not None:
                parts = line.strip().split(" ", 1)
                if len(parts) == 2:
                    stack.append(parts[1])
    if stack is not None:
        yield stack


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, required=True)
    ap.add_argument("--hz", type=int, required=True, help="perf record's -F")
    ap.add_argument("scripts", nargs="+")
    args = ap.parse_args()
    compiled = [(name, re.compile(pat)) for name, pat in PARTS]
    columns = []
    for path in args.scripts:
        counts = dict.fromkeys(name for name, _ in PARTS)
        for name in counts:
            counts[name] = 0
        total = 0
        for stack in stacks(path):
            total += 1
            for name, pat in compiled:
                if any(pat.search(frame) for frame in stack):
                    counts[name] += 1
                    break
        columns.append((path, total, counts))
    scale = 1000.0 / args.hz / args.objects  # samples -> ms per object
    print("| part | " + " | ".join(f"{p} (ms/object)" for p, _, _ in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, _ in PARTS:
        print(f"| {name} | " + " | ".join(f"{c[name] * scale:.2f}" for _, _, c in columns) + " |")
    print("| **total** | " + " | ".join(f"**{t * scale:.2f}**" for _, t, _ in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
