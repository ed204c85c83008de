#!/usr/bin/env python3
"""Where a group's guest instructions go (scripts/bench BENCH_INSNS=1 BENCH_INSNS_PROFILE=1): the plugin's
"prof SEQ VADDR INSNS" lines written at the group's end mark, named by the guest kernel's /proc/kallsyms, the JVM's
/proc/self/maps and its JIT code list (dev.rdma.benchmarks.InsnMark.saveProfileContext), and by the shared objects'
own symbols (nm, on the host: the guest runs the host's root file system). Per message, as insns_table.py.

usage: insns_profile.py INSNS_FILE CASE[:IMPL] PROFILE_DIR [BOOT] [TOP]     (the last group of that case)

User addresses outside the JVM's maps are another process's ("other process"); user addresses of different processes
that coincide are counted as the JVM's (the JVM is nearly alone in the guest during xstarter).
"""
import bisect
import collections
import os
import re
import subprocess
import sys

MARK = re.compile(r"^mark (\d+) total=(\d+) user=(\d+) kernel=(\d+) vcpu=(\d+) label=(.*)$")
PROF = re.compile(r"^prof (\d+) ([0-9a-f]+) (\d+)$")
# Compiler.codelist: "ID LEVEL STATE METHOD [START, CODE_BEGIN - END]"
CODE = re.compile(r"^\d+\s+(\d+)\s+\d+\s+(\S+)\s+\[(0x[0-9a-f]+),\s*(0x[0-9a-f]+)\s*-\s*(0x[0-9a-f]+)\]")
# libjvm.so's symbols of the JIT compilers and of the GC (by name; the rest stays "libjvm.so")
JIT_COMPILER = re.compile(r"^(Phase|Node|LinearScan|LIR_|Compile|ci[A-Z]|Matcher|RegMask|IndexSet|ValueStack|Block|"
                          r"GraphBuilder|Interval|DebugInformation|Parse|Canonicalizer|IR|Optimizer|Instruction|Type|"
                          r"NullCheck|Range|LoopTree|Ideal|ConnectionGraph|PhaseChaitin|LRG|MachNode|Dependencies|"
                          r"CodeBuffer|Assembler|MacroAssembler|C1|C2|Compilation|ValueMap|GVN|PhiNode|Unique_Node|"
                          r"Arena|Chunk|resource_allocate|ResourceArea|Dict|VectorSet|Relocation|CodeSection|nmethod|"
                          r"OopMap|ScopeDesc|Scope|BCEscape|MethodLiveness|ciEnv|CompileBroker|LinearScanWalker|Label)")
GC = re.compile(r"^(G1|HeapRegion|ParallelScav|PS|Serial|Card|BarrierSet|WorkerThread|Epsilon|ZGC|Z[A-Z])")


class Symbols:
    def __init__(self, pairs):  # [(start, name)]
        pairs.sort()
        self.starts = [a for a, _ in pairs]
        self.names = [n for _, n in pairs]

    def find(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        return self.names[i] if i >= 0 else None


def kallsyms(path):
    pairs = []
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) >= 3 and f[1].lower() in ("t", "w"):
            pairs.append((int(f[0], 16), f[2]))
    return Symbols(pairs)


_nm_cache = {}


def so_symbols(path):
    if path not in _nm_cache:
        pairs = []
        for args in (["nm", "--defined-only", "-C", path], ["nm", "-D", "--defined-only", "-C", path]):
            try:
                out = subprocess.run(args, capture_output=True, text=True, timeout=60).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            for line in out.splitlines():
                f = line.split(" ", 2)
                if len(f) == 3 and f[1] in "tTwWiI":
                    pairs.append((int(f[0], 16), f[2]))
        _nm_cache[path] = Symbols(pairs)
    return _nm_cache[path]


def main(ins, case, pdir, boot="1", top="40"):
    case, _, impl = case.partition(":")  # CASE or CASE:IMPL (xdev:c, xdev:java)
    # the group: B case=CASE ... to its E; its windows' messages
    seq_e, rt, windows, in_group, n_marks, p_marks = None, 1, 0, False, 0, 0
    for line in open(ins, errors="replace"):
        m = MARK.match(line.rstrip("\n"))
        if not m:
            continue
        label = m.group(6)
        if label.startswith("B ") and f"case={case} " in label + " " and (not impl or f"impl={impl} " in label + " "):
            in_group, n_marks, p_marks = True, 0, 0
            rt = int(re.search(r"rt=(\d+)", label).group(1))
        elif in_group and label == "N":
            n_marks += 1
        elif in_group and label == "P":
            p_marks += 1
        elif in_group and label == "E":
            seq_e, in_group = int(m.group(1)), False
            windows = p_marks + max(n_marks - 1, 0)  # N marks: windows + 1 boundaries
    if seq_e is None:
        sys.exit(f"no group {case} in {ins}")
    # the profile covers the whole group (B to E), the C twin's bookkeeping between its windows included
    msgs = 2 * rt * max(windows, 1)
    prof = [(int(m.group(2), 16), int(m.group(3))) for m in map(PROF.match, open(ins)) if m and int(m.group(1)) == seq_e]
    ks = kallsyms(os.path.join(pdir, f"kallsyms-boot{boot}.txt"))
    maps = []
    mpath = os.path.join(pdir, f"{case}.maps") if impl != "c" else ""
    for line in open(mpath) if os.path.exists(mpath) else []:
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        maps.append((lo, hi, int(f[2], 16), f[5] if len(f) > 5 else "[anon]"))
    code = []
    cl = os.path.join(pdir, f"{case}.codelist")
    if os.path.exists(cl):
        for line in open(cl, errors="replace"):
            m = CODE.match(line.strip())
            if m:
                code.append((int(m.group(3), 16), int(m.group(5), 16), f"{m.group(2)} (tier {m.group(1)})"))
    code.sort()
    cstarts = [c[0] for c in code]
    by_sym, by_area = collections.Counter(), collections.Counter()
    for va, n in prof:
        if va >> 63:
            area, sym = "kernel", "k " + (ks.find(va) or "?")
        else:
            i = bisect.bisect_right(cstarts, va) - 1
            if i >= 0 and va < code[i][1]:
                area, sym = "JIT code", "j " + code[i][2]
            else:
                mp = next((x for x in maps if x[0] <= va < x[1]), None)
                if mp is None:
                    area = sym = "user, another process" if maps else "user (no maps of the process)"
                elif mp[3].startswith("/"):
                    area = os.path.basename(mp[3])
                    s = so_symbols(mp[3]).find(va - mp[0] + mp[2]) if mp[3].endswith((".so",)) or ".so." in mp[3] else None
                    sym = f"{area}: {s or '?'}"
                    if area == "libjvm.so" and s and JIT_COMPILER.search(s):
                        area = "libjvm.so: the JIT compilers (C1, C2)"
                    elif area == "libjvm.so" and s and GC.search(s):
                        area = "libjvm.so: GC"
                else:
                    area = sym = f"JVM {mp[3]} (stubs, interpreter)"
        by_sym[sym] += n
        by_area[area] += n
    total = sum(by_area.values())
    print(f"Profile of {case} (boot {boot}): {total / msgs:,.0f} instructions per message over {msgs:,} messages")
    print()
    print("| where | insns/msg | share |")
    print("|---|---:|---:|")
    for a, n in by_area.most_common():
        print(f"| {a} | {n / msgs:,.0f} | {n / total * 100:.1f} % |")
    print()
    print(f"| top {top} symbols | insns/msg | share |")
    print("|---|---:|---:|")
    for s, n in by_sym.most_common(int(top)):
        print(f"| {s} | {n / msgs:,.0f} | {n / total * 100:.1f} % |")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
