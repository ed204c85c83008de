#!/usr/bin/env python3
"""The instruction-count mode of scripts/bench (BENCH_INSNS=1): reads the lines that the QEMU plugin
benchmarks/src/main/c/insn_plugin.c wrote (one file per VM boot) and prints guest instructions per message of C and
Java side by side (markdown), with the spread over the measured windows and over the boots.

usage: insns_table.py INSNS_FILE...      (one file per boot, in boot order)

A group of windows is the marks from "B case=NAME impl=c|java rt=ROUND_TRIPS [PARAMS]" to "E" (bench_mark.h):
"N" closes the window opened by the previous N or R and opens the next, "P" closes, "R" opens. A group without
window marks is one window from B to E. Instructions per message = the window's instructions / (2 x ROUND_TRIPS): a
round trip is two messages, as in the msgs/s rows. A stream counts messages instead: "msgs=N" in the B label (a group
without window marks: N messages), or a mark "C N1 N2 ..." after its E (the messages of each window, known only once
they are over: XstreamClient). Every guest instruction counts (both processes, the kernel, rxe,
the JVM's other threads, other guest processes): the whole machine's work per message, as the wall-clock figures.
"""
import re
import statistics
import sys

MARK = re.compile(r"^mark (\d+) total=(\d+) user=(\d+) kernel=(\d+) vcpu=(\d+) label=(.*)$")
PROF = re.compile(r"^prof (\d+) ([0-9a-f]+) (\d+)$")
# Java case -> its C yardstick
YARDSTICK = {
    "xdev": "xdev",
    "xdev_poll": "xdev_poll",
    "xstarter_event_thread": "xstarter_c",
    "xstarter_event_listener": "xstarter_c",
    "xstarter_busy_listener": "xstarter_c_poll",
}


def groups(path):
    """[(case, impl, params, rt, [window (total, user, kernel)])] in the file's order."""
    out, cur, opened, last = [], None, None, None
    for line in open(path, errors="replace"):
        m = MARK.match(line.rstrip("\n"))
        if not m:
            continue
        c = tuple(int(m.group(i)) for i in (2, 3, 4))
        label = m.group(6).strip()
        if label.startswith("B "):
            attrs, params = {}, []
            for w in label[2:].split():
                k, _, v = w.partition("=")
                if k in ("case", "impl", "rt", "msgs"):
                    attrs[k] = v
                else:
                    params.append(w)
            cur = dict(case=attrs.get("case", "?"), impl=attrs.get("impl", "?"), rt=int(attrs.get("rt", "1")),
                       params=" ".join(params), windows=[], begin=c, marked=False)
            if "msgs" in attrs:
                cur["msgs"] = [int(attrs["msgs"])]
            opened = None
        elif label.startswith("C ") and out:
            # the messages of each window of the group that just ended
            out[-1]["msgs"] = [int(x) for x in label[2:].split()]
        elif cur is None:
            continue
        elif label in ("N", "R", "P"):
            cur["marked"] = True
            if label in ("N", "P") and opened is not None:
                cur["windows"].append(tuple(b - a for a, b in zip(opened, c)))
            opened = c if label in ("N", "R") else None
        elif label == "E":
            if not cur["marked"]:
                cur["windows"].append(tuple(b - a for a, b in zip(cur["begin"], c)))
            out.append(cur)
            cur, opened = None, None
    return out


def per_msg(g):
    if "msgs" in g:
        return [tuple(x / n for x in w) for w, n in zip(g["windows"], g["msgs"]) if n > 0]
    return [tuple(x / (2 * g["rt"]) for x in w) for w in g["windows"]]


def fmt(v):
    return f"{v:,.0f}"


def trim(vals):
    return sorted(vals)[1:-1] if len(vals) >= 5 else vals


def spread(vals):
    med = statistics.median(vals)
    return med, (max(vals) - min(vals)) / med * 100 if med else 0.0


def check(boots):
    """The self-check (case insns_check: bench_mark --loop N, a loop of 2 instructions): user instructions between
    its marks against 2N, per run; deterministic when the constant is the same in every run and boot."""
    rows = [(b, g) for b, gs in enumerate(boots, 1) for g in gs if g["impl"] == "check"]
    if not rows:
        return
    print("Self-check (bench_mark --loop N: user instructions between the marks = 2N + a constant):")
    print()
    print("| boot | N | user | user - 2N | kernel | total |")
    print("|---|---|---|---|---|---|")
    for b, g in rows:
        t, u, k = g["windows"][0]
        print(f"| {b} | {g['rt']:,} | {u:,} | {u - 2 * g['rt']:,} | {k:,} | {t:,} |")
    print()


def perftest(gs):
    """The perftest groups (whole processes at two or more iteration counts, insns-perftest.sh) replaced by one
    group per case whose one window is the difference between the most and the fewest iterations."""
    pt = {}
    for g in gs:
        if g["impl"] == "perftest" and g["windows"]:
            pt.setdefault((g["case"], g["params"]), []).append(g)
    gs[:] = [g for g in gs if g["impl"] != "perftest"]
    for (case, params), runs in pt.items():
        # a round-trip count (ib_send_lat: rt=N, 2 messages each) or a message count (the streams: msgs=N)
        n = (lambda g: g["msgs"][0]) if all("msgs" in g for g in runs) else (lambda g: g["rt"])
        runs.sort(key=n)
        lo, hi = runs[0], runs[-1]
        if n(hi) == n(lo):
            continue
        w = tuple(b - a for a, b in zip(lo["windows"][0], hi["windows"][0]))
        diff = dict(case=case, impl="perftest", rt=hi["rt"] - lo["rt"], windows=[w], params=params,
                    note=f"(n {n(lo)} -> {n(hi)}, difference)")
        if "msgs" in hi:
            diff["msgs"] = [n(hi) - n(lo)]
        gs.append(diff)


def main(paths):
    boots = [groups(p) for p in paths]
    check(boots)
    for gs in boots:
        gs[:] = [g for g in gs if g["impl"] != "check"]
        perftest(gs)
    if not any(boots):
        return
    print("Guest instructions per message (insn_plugin.c; whole guest: both sides, kernel, rxe; median of the"
          " windows, [min-max], spread = (max-min)/median of the windows without the highest and"
          " the lowest, of the total and of the user instructions):")
    print()
    print("| boot | case | impl | windows | total/msg | spread | user/msg | spread | kernel/msg | Java/C total | Java/C user | Java/C kernel |")  # C: the C twin, or perftest for the streams
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    summary = {}  # (case, params, impl) -> [median total per boot]
    for b, gs in enumerate(boots, 1):
        cmed = {}
        for g in gs:
            w = per_msg(g)
            if not w:
                continue
            med = tuple(statistics.median(x[i] for x in w) for i in range(3))
            g["med"] = med
            if g["impl"] in ("c", "perftest"):
                cmed[(g["case"], g["params"])] = med
        for g in gs:
            if "med" not in g:
                print(f"| {b} | {g['case']} {g['params']} {g.get('note', '')} | {g['impl']} | 0 | - | - | - | - | - | | | |")
                continue
            w = per_msg(g)
            tot = [x[0] for x in w]
            # the spreads without the highest and the lowest window (one JIT compilation or GC in a window
            # of the JVM's would be all a plain spread shows); [min-max] keeps them
            _, sp = spread(trim(tot))
            _, usp = spread(trim([x[1] for x in w]))
            ratio = ["", "", ""]
            if g["impl"] == "java":
                c = cmed.get((YARDSTICK.get(g["case"], g["case"]), g["params"]))
                if c:
                    ratio = [f"{j / cc:.2f}x" if cc else "-" for j, cc in zip(g["med"], c)]
            med = g["med"]
            name = " ".join(x for x in (g["case"], g["params"], g.get("note", "")) if x)
            print(f"| {b} | {name} | {g['impl']} | {len(w)} | "
                  f"{fmt(med[0])} [{fmt(min(tot))}-{fmt(max(tot))}] | {sp:.1f} % | {fmt(med[1])} | {usp:.1f} % | {fmt(med[2])} | "
                  + " | ".join(ratio) + " |")
            summary.setdefault((g["case"], g["params"], g["impl"]), []).append(med)
    if len(boots) > 1:
        print()
        print("Over the boots (median of each boot's window medians; spread = (max-min)/median of the boots):")
        print()
        print("| case | impl | boots | total/msg | spread | user/msg | spread | kernel/msg | spread |")
        print("|---|---|---|---|---|---|---|---|---|")
        for (case, params, impl), meds in summary.items():
            cols = []
            for i in range(3):
                m, s = spread([x[i] for x in meds])
                cols += [fmt(m), f"{s:.2f} %"]
            print(f"| {case}{' ' + params if params else ''} | {impl} | {len(meds)} | " + " | ".join(cols) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1:])
