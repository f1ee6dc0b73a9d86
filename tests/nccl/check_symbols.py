#!/usr/bin/env python3
"""Checks that libnccl.so.2 defines every function a nccl.h declares, and
each one's pncclX alias, and exports nothing but nccl*/pnccl* names.

    check_symbols.py --header /usr/local/cuda/include/nccl.h --lib build/lib/libnccl.so.2

The header is parsed for declarations of the form `<type> [p]nccl<Name>(`.
Functions NCCL added after the header's version (2.29/2.30) are listed below
and checked too.
"""
import argparse
import re
import subprocess
import sys

# Added by NCCL 2.29/2.30 after the 2.28 header the CUDA 13.0 toolkit ships.
LATER_FUNCTIONS = [
    "ncclCommGetUniqueId", "ncclCommGrow", "ncclCommSuspend", "ncclCommResume",
    "ncclCommMemStats", "ncclWinGetUserPtr", "ncclPutSignal", "ncclSignal", "ncclWaitSignal",
]

DECL = re.compile(r"^\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?"
                  r"(?:const\s+)?(?:ncclResult_t|char\s*\*|void)\s*\*?\s*p?(nccl[A-Za-z0-9_]+)\s*\(",
                  re.M)


def header_functions(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # comments may mention names
    return sorted({m.group(1) for m in DECL.finditer(text)})


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    names = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            names[parts[2].split("@")[0]] = parts[1]
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--header", required=True)
    ap.add_argument("--lib", required=True)
    args = ap.parse_args()

    declared = header_functions(args.header)
    if len(declared) < 30:
        print(f"FAIL: parsed only {len(declared)} functions from {args.header}; parser broken?")
        return 1
    wanted = sorted(set(declared) | set(LATER_FUNCTIONS))
    syms = exported(args.lib)
    missing = []
    for name in wanted:
        for sym in (name, "p" + name):
            if syms.get(sym) not in ("T", "W"):
                missing.append(sym)
    stray = sorted(s for s in syms if not re.match(r"p?nccl", s))
    print(f"{len(declared)} functions in {args.header}, {len(LATER_FUNCTIONS)} later ones; "
          f"{len(wanted)} checked with their pnccl aliases in {args.lib}")
    if missing:
        print("FAIL: missing from the library: " + " ".join(missing))
    if stray:
        print("FAIL: exported beside NCCL's names: " + " ".join(stray[:20]))
    return 1 if missing or stray else 0


if __name__ == "__main__":
    sys.exit(main())
