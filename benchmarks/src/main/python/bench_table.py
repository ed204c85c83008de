#!/usr/bin/env python3
"""Reads the case=... lines of cq_bench (C) and CqBench (Java) and prints the comparison table (markdown).

usage: bench_table.py RESULTS_FILE [HOST_RESULTS_FILE]   (exit status 0; the verdict per row is in the table)

RESULTS_FILE: the run on the device (C and Java, same machine, same run); HOST_RESULTS_FILE: the device-less cases
(diag_call, diag_read, ring_*) run on the host CPU without emulation (scripts/bench writes it).
"""
import re
import sys

LINE = re.compile(r"^case=(\S+)(.*?) impl=(c|java) unit=(\S+) median=(\S+) min=(\S+) max=(\S+) reps=(\d+)")

# (java case, c case, kind, limit, description)
ROWS = [
    ("batch_poll", "batch_poll", "time", 1.10, "legacy poll(buffer), read wr_id+status"),
    ("batch_handler", "batch_poll", "time", 1.10, "legacy poll(buffer, handler)"),
    ("ext_iter", "ext_iter", "time", 1.15, "extended iterator, handler reads wr_id+status+byte_len"),
    ("ext_copy", "ext_copy", "time", 1.15, "extended poll(buffer): every standard field copied"),
    ("empty_poll", "empty_poll", "time", 1.30, "one poll of an empty legacy CQ"),
    ("empty_ext", "empty_ext", "time", 1.30, "one start_poll (ENOENT) of an empty extended CQ"),
    ("e2e", "e2e", "rate", 0.90, "ping-pong msgs/s with events (binding event loop)"),
    ("e2e_events", "e2e_events", "rate", 0.90, "ping-pong msgs/s, one completion event per message"),
    ("e2e_starter", "e2e", "rate", 0.90, "ping-pong msgs/s, @RdmaCompletionListener poller"),
    ("e2e_starter_metrics", "e2e", "rate", 0.90, "the same with a Micrometer registry (meters per poll batch)"),
    ("e2e_starter_batch", "e2e", "rate", 0.90, "the starter with a batch listener (CompletionBatch)"),
    ("e2e_starter_ext", "e2e", "rate", 0.90, "the starter on an extended CQ, single listener"),
    ("e2e_starter_ext_batch", "e2e", "rate", 0.90, "the starter on an extended CQ, batch listener"),
    ("xdev_rate", "xdev_rate", "rate", 0.95, "cross-device RC ping-pong rxeA->rxeB msgs/s (ibv_rc_pingpong -e)"),
    ("xdev_p50", "xdev_p50", "time", 1 / 0.95, "cross-device round trip p50 (us)"),
    ("xdev_p99", "xdev_p99", "time", 1 / 0.95, "cross-device round trip p99 (us)"),
    ("xdev_poll_rate", "xdev_poll_rate", "rate", 0.95, "the same with busy polling (ibv_rc_pingpong without -e)"),
    ("xdev_poll_p50", "xdev_poll_p50", "time", 1 / 0.95, "cross-device round trip p50, busy polling (us)"),
    ("xdev_poll_p99", "xdev_poll_p99", "time", 1 / 0.95, "cross-device round trip p99, busy polling (us)"),
]


# diagnosis rows, no target: (java case, c case, what it isolates)
DIAG = [
    ("diag_call", "diag_call", "an empty C function: C calls it through a function pointer, Java with a critical downcall"),
    ("diag_raw_empty", "empty_poll", "the binding's poll_cq downcall alone on an empty CQ (no binding bookkeeping)"),
    ("diag_raw_batch", "batch_poll", "the binding's poll_cq downcall + plain segment reads of wr_id/status"),
    ("diag_read", "diag_read", "reading wr_id+status of 32 ibv_wc in memory: C struct reads vs the binding's view"),
    # the same polls without a device: libcqbench_ring.so, whose poll functions do what a user-space provider does
    ("ring_batch_poll", "ring_batch_poll", "batch_poll on the device-less ring (target 1.10x on the device)"),
    ("ring_batch_handler", "ring_batch_poll", "batch_handler on the ring"),
    ("ring_raw_batch", "ring_batch_poll", "the bare poll_cq downcall + plain reads on the ring (the FFM floor)"),
    ("ring_ext_iter", "ring_ext_iter", "ext_iter on the ring (target 1.15x on the device)"),
    ("ring_ext_copy", "ring_ext_copy", "ext_copy on the ring (target 1.15x on the device)"),
    ("ring_empty_poll", "ring_empty_poll", "empty_poll on the ring (target 1.30x on the device)"),
    ("ring_raw_empty", "ring_empty_poll", "the bare poll_cq downcall on the empty ring (the FFM floor)"),
    ("ring_empty_ext", "ring_empty_ext", "empty_ext on the ring (target 1.30x on the device)"),
]


def parse(path):
    res = {}
    for line in open(path, errors="replace"):
        m = LINE.match(line.strip())
        if not m:
            continue
        case, extra, impl, unit, med, lo, hi, reps = m.groups()
        key = (case, extra.strip(), impl)
        r = dict(unit=unit, median=float(med), min=float(lo), max=float(hi), reps=int(reps), medians=[float(med)])
        if key in res:
            # the same case measured again in the run (perftest before and after the starter's streams,
            # BENCH_XSTREAM_PERFTEST_AFTER): the median of the runs' medians, the range of both
            p = res[key]
            ms = sorted(p["medians"] + r["medians"])
            mid = len(ms) // 2
            r = dict(unit=unit, median=ms[mid] if len(ms) % 2 else (ms[mid - 1] + ms[mid]) / 2,
                     min=min(p["min"], r["min"]), max=max(p["max"], r["max"]), reps=p["reps"] + r["reps"],
                     medians=ms)
        res[key] = r
    return res


def spread(r):
    return 100.0 * (r["max"] - r["min"]) / r["median"] if r["median"] else 0.0


def main():
    res = parse(sys.argv[1])
    out = ["| case | params | C median | Java median | spread C / Java | Java/C | target | result |",
           "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    misses = 0
    # adjacent C/Java pairs of the cross-device case (rows tagged "pin=P pair=K"): each pair's ratio is shown, the
    # target is judged on the median of the pairs of the first placement in the run (scripts/bench BENCH_XDEV_PINS)
    pair_ratios = {}
    for jcase, ccase, kind, limit, _ in ROWS:
        for (case, extra, impl), j in sorted(res.items(), key=lambda kv: kv[0][1]):
            if case != jcase or impl != "java":
                continue
            c = res.get((ccase, extra, "c"))
            if c is None:
                continue
            ratio = j["median"] / c["median"] if c["median"] else float("inf")
            if kind == "time":
                ok = ratio <= limit
                target = f"<= {limit:.2f}x"
                unit = " " + j["unit"]
            else:
                ok = ratio >= limit
                target = f">= {limit:.2f}x of C msgs/s"
                unit = "/s"
            if "pair=" in extra:
                placement = re.sub(r"\s*pair=\S+", "", extra)
                pair_ratios.setdefault((jcase, kind, limit, placement), []).append(ratio)
                target, ok = "(a pair)", None
            else:
                misses += 0 if ok else 1
            fmt = (lambda v: f"{v:,.0f}{unit}") if kind == "rate" else (lambda v: f"{v:,.1f}{unit}")
            name = jcase if jcase == ccase else f"{jcase} (vs C {ccase})"
            verdict = "-" if ok is None else "pass" if ok else "MISS"
            out.append(f"| {name} | {extra or '-'} | {fmt(c['median'])} | {fmt(j['median'])} | "
                       f"{spread(c):.0f}% / {spread(j):.0f}% | {ratio:.2f}x | {target} | {verdict} |")
    # the placements of each pair case in the order of the run (xdev_*: xdev_rate's, xdev_poll_*: xdev_poll_rate's);
    # the target is judged on the first
    placements = {}
    for (case, extra, impl) in res:
        if case.endswith("_rate") and impl == "java" and "pair=" in extra:
            seen = placements.setdefault(case[:-len("_rate")], [])
            placement = re.sub(r"\s*pair=\S+", "", extra)
            if placement not in seen:
                seen.append(placement)
    for (jcase, kind, limit, placement), ratios in pair_ratios.items():
        ratios = sorted(ratios)
        k = len(ratios)
        med = ratios[k // 2] if k % 2 else (ratios[k // 2 - 1] + ratios[k // 2]) / 2
        listed = ", ".join(f"{r:.2f}x" for r in ratios)
        first = placements.get(jcase.rsplit("_", 1)[0], [])
        if first and placement == first[0]:
            ok = med <= limit if kind == "time" else med >= limit
            target = f"<= {limit:.2f}x" if kind == "time" else f">= {limit:.2f}x of C msgs/s"
            verdict = "pass" if ok else "MISS"
            misses += 0 if ok else 1
        else:
            target, verdict = "(shown beside)", "-"
        out.append(f"| {jcase}, median of {k} adjacent C/Java pairs | {placement} | - | - | pairs: {listed} | "
                   f"{med:.2f}x | {target} | {verdict} |")
    for (case, extra, impl), j in sorted(res.items()):
        if case != "alloc" or impl != "java":
            continue
        ok = j["max"] == 0
        misses += 0 if ok else 1
        out.append(f"| alloc | {extra} | - | {j['median']:.2f} {j['unit'].replace('_', '/')} (max {j['max']:.2f}) | "
                   f"- | - | 0 B | {'pass' if ok else 'MISS'} |")
    groups, gmisses = group_table(res)
    misses += gmisses
    xstarter, xmisses = xstarter_table(res)
    misses += xmisses
    xstream, smisses = xstream_table(res)
    misses += smisses
    peers, pmisses = peers_table(sys.argv[1])
    misses += pmisses
    print("\n".join(out))
    print(f"\n{misses} target(s) missed")
    if groups:
        print("\n".join(groups))
    if xstarter:
        print("\n".join(xstarter))
    if xstream:
        print("\n".join(xstream))
    if peers:
        print("\n".join(peers))
    sources = [("device run", res)]
    if len(sys.argv) > 2:
        try:
            sources.append(("host CPU, no emulation", parse(sys.argv[2])))
        except OSError:
            pass
    diag = ["", "Where the time goes (diagnosis, no target):", "",
            "| case | params | measured on | C median | Java median | Java - C | Java/C | what it isolates |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for where, r in sources:
        for jcase, ccase, what in DIAG:
            for (case, extra, impl), j in sorted(r.items(), key=lambda kv: kv[0][1]):
                if case != jcase or impl != "java":
                    continue
                c = r.get((ccase, extra, "c"))
                if c is None:
                    continue
                name = jcase if jcase == ccase else f"{jcase} (vs C {ccase})"
                diag.append(f"| {name} | {extra or '-'} | {where} | {c['median']:,.2f} ns | {j['median']:,.2f} ns | "
                            f"{j['median'] - c['median']:+,.2f} ns | {j['median'] / c['median']:.2f}x | {what} |")
    if len(diag) > 5:
        print("\n".join(diag))


def group_table(res):
    """Poller groups (issue 16): every group_*/dedicated_* row of the Java run beside the C twin's row with the same
    N and thread count (dedicated pollers beside the C twin's group of 1); target: the group's aggregate rate at
    N = 512 >= 0.90x of the C twin's, idle CPU < 1 % of a core."""
    rows = ["", "Poller groups (issue 16): N completion queues, one loopback QP each, one message in flight per QP:", "",
            "| case | params | C twin median | Java median | spread C / Java | Java/C | target | result |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    misses = 0
    def n_of(extra):
        m = re.search(r"n=(\d+)", extra)
        return int(m.group(1)) if m else 0
    def threads_of(extra):
        m = re.search(r"threads=(\w+)", extra)
        return m.group(1) if m else "-"
    # adjacent C/Java pairs (scripts/bench step groups_pairs, rows tagged pair=K): the ratio of each pair, and the
    # N = 512 target judged on their median where pairs exist (C moves between boots and within one)
    pair_ratios = {}
    for (case, extra, impl), j in res.items():
        if impl != "java" or case != "group_rate" or "pair=" not in extra or j["reps"] == 0:
            continue
        c = res.get((case, extra, "c"))
        if c is not None and c["median"] and c["reps"]:
            pair_ratios.setdefault((n_of(extra), threads_of(extra)), []).append(j["median"] / c["median"])
    keys = sorted((k for k in res if k[2] == "java" and (k[0].startswith("group_") or k[0].startswith("dedicated_"))),
                  key=lambda k: (k[0].split("_", 1)[1], k[0], n_of(k[1]), k[1]))
    for case, extra, _ in keys:
        j = res[(case, extra, "java")]
        kind = case.split("_", 1)[1]
        cextra = re.sub(r"threads=dedicated", "threads=1", extra)
        c = res.get(("group_" + kind, cextra, "c"))
        unit = j["unit"].replace("msgs_per_s", "/s").replace("pct_of_core", "% of a core")
        if "error" in extra or j["reps"] == 0:
            rows.append(f"| {case} | {extra} | - | did not finish | - | - | - | reported |")
            continue
        target, result, ratio = "-", "-", "-"
        if c is not None and c["median"]:
            ratio = f"{j['median'] / c['median']:.2f}x"
        if case == "group_rate" and n_of(extra) == 512 and c is not None:
            if "pair=" in extra:
                target = "(a pair)"
            elif (512, threads_of(extra)) in pair_ratios:
                target = "(judged on the pairs)"
            else:
                ok = j["median"] >= 0.90 * c["median"]
                target, result = ">= 0.90x of C", "pass" if ok else "MISS"
                misses += 0 if ok else 1
        if kind == "idle_cpu":
            ok = j["median"] < 1.0
            target, result = "< 1 % of a core", "pass" if ok else "MISS"
            misses += 0 if ok else 1
        cmed = f"{c['median']:,.2f} {unit}" if c is not None else "-"
        cspread = f"{spread(c):.0f}%" if c is not None else "-"
        rows.append(f"| {case} | {extra} | {cmed} | {j['median']:,.2f} {unit} | {cspread} / {spread(j):.0f}% | "
                    f"{ratio} | {target} | {result} |")
    for (n, threads), ratios in sorted(pair_ratios.items()):
        ratios = sorted(ratios)
        k = len(ratios)
        med = ratios[k // 2] if k % 2 else (ratios[k // 2 - 1] + ratios[k // 2]) / 2
        listed = ", ".join(f"{r:.2f}x" for r in ratios)
        if n == 512:
            ok = med >= 0.90
            target, result = ">= 0.90x of C", "pass" if ok else "MISS"
            misses += 0 if ok else 1
        else:
            target, result = "-", "-"
        rows.append(f"| group_rate, median of {k} adjacent C/Java pairs | n={n} threads={threads} | - | - | "
                    f"pairs: {listed} | {med:.2f}x | {target} | {result} |")
    return (rows if len(rows) > 5 else []), misses


def xstarter_table(res):
    """Connections through the starter (issue 17): each xstarter_* row of XdevStarterPingPong (mode=event|busy,
    driver=thread|listener) beside the C twin of the same run (xstarter_c_*: xdev_pingpong, same devices and
    arguments; busy rows beside xstarter_c_poll_*, the C twin busy-polling, when the run has it); target: msgs/s >=
    0.90x of C (the allocation rows, 0 B, are in the main table)."""
    rows = ["", "Connections through the starter (issue 17): rxeA -> rxeB ping-pong, one message in flight, "
            "C twin vs the starter's server and client applications:", "",
            "| case | params | C twin median | Java median | spread C / Java | Java/C | target | result |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    misses = 0
    for what, unit in (("rate", "/s"), ("p50", " us"), ("p99", " us")):
        for (case, extra, impl), j in sorted(res.items()):
            if case != f"xstarter_{what}" or impl != "java":
                continue
            # busy polling is measured against the C twin busy-polling (xstarter_c_poll_*) when the run has it
            c = res.get((f"xstarter_c_poll_{what}", "", "c")) if "mode=busy" in extra else None
            if c is not None:
                extra += " (C twin busy-polling)"
            else:
                c = res.get((f"xstarter_c_{what}", "", "c"))
                extra += " (C twin: events)" if "mode=busy" in extra else ""
            fmt = (lambda v: f"{v:,.0f}{unit}") if what == "rate" else (lambda v: f"{v:,.1f}{unit}")
            if c is None or not c["median"]:
                rows.append(f"| {case} | {extra} | - | {fmt(j['median'])} | - / {spread(j):.0f}% | - | - | no C twin |")
                continue
            ratio = j["median"] / c["median"]
            target, result = "-", "-"
            if what == "rate":
                ok = ratio >= 0.90
                misses += 0 if ok else 1
                target, result = ">= 0.90x of C msgs/s", "pass" if ok else "MISS"
            rows.append(f"| {case} | {extra} | {fmt(c['median'])} | {fmt(j['median'])} | "
                        f"{spread(c):.0f}% / {spread(j):.0f}% | {ratio:.2f}x | {target} | {result} |")
    return (rows if len(rows) > 5 else []), misses


def xstream_table(res):
    """Streaming through one connection (issue 33): per operation and size, perftest (impl=c: ib_send_bw, ib_write_bw,
    ib_read_bw on the same two devices) beside the starter (XstreamBench): MB/s (2^20 bytes, as perftest), msgs/s,
    Java/perftest, CPU per message of each (all their processes' threads), bytes allocated per message by all the JVM's
    threads; target: MB/s >= 0.90x of perftest's (the allocation rows, 0 B, are in the main table too). Then
    ib_send_lat."""
    rows = ["", "Streaming through one connection (issue 33): rxeA -> rxeB, perftest vs the starter "
            "(MB/s = 2^20 bytes/s as perftest's; CPU: both sides' processes per message):", "",
            "| op | size | perftest MB/s | Java MB/s | perftest msgs/s | Java msgs/s | Java/perftest | "
            "CPU/msg perftest | CPU/msg Java | alloc B/msg (max) | target | result |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    misses = 0

    def size_of(extra):
        m = re.search(r"size=(\d+)", extra)
        return int(m.group(1)) if m else 0

    for op in ("send", "write", "read"):
        keys = sorted({extra for (case, extra, impl) in res if case == "xstream_mbps" and f"op={op} " in extra + " "},
                      key=size_of)
        for extra in keys:
            size = size_of(extra)
            c = res.get(("xstream_mbps", extra, "c"))
            j = res.get(("xstream_mbps", extra, "java"))
            cr = res.get(("xstream_rate", extra, "c"))
            jr = res.get(("xstream_rate", extra, "java"))
            cc = res.get(("xstream_cpu", extra, "c"))
            jc = res.get(("xstream_cpu", extra, "java"))
            a = res.get(("alloc", f"of=xstream_{op}_{size}", "java"))
            f = lambda r, fmt: "-" if r is None else fmt.format(r["median"])
            ratio, target, result = "-", ">= 0.90x", "no pair"
            if c and j and c["median"]:
                # from the rates when both have them (same size: the same ratio, with more digits than MB/s)
                q = jr["median"] / cr["median"] if jr and cr and cr["median"] else j["median"] / c["median"]
                ok = q >= 0.90
                misses += 0 if ok else 1
                ratio, result = f"{q:.2f}x", "pass" if ok else "MISS"
            alloc = "-" if a is None else f"{a['median']:.2f} ({a['max']:.2f})"
            rows.append(f"| {op} | {size} | {f(c, '{:,.2f}')} | {f(j, '{:,.2f}')} | {f(cr, '{:,.0f}')} | "
                        f"{f(jr, '{:,.0f}')} | {ratio} | {f(cc, '{:,.1f} us')} | {f(jc, '{:,.1f} us')} | {alloc} | "
                        f"{target} | {result} |")
    lat = sorted(((extra, r) for (case, extra, impl), r in res.items() if case == "xstream_lat"),
                 key=lambda kv: size_of(kv[0]))
    if lat:
        rows += ["", "| ib_send_lat | size | t_typical | t_min | t_max |", "| --- | ---: | ---: | ---: | ---: |"]
        rows += [f"| send | {size_of(e)} | {r['median']:.2f} us | {r['min']:.2f} us | {r['max']:.2f} us |"
                 for e, r in lat]
    return (rows if len(rows) > 5 else []), misses


def peers_table(path):
    """A server with many peers (issue 33, PeersBench): per mode (srq: the shared receive queue; nosrq: receive
    buffers per peer) the time to accept all N, messages delivered/expected and routed, the server's pinned memory:
    the starter's computation (rdma.memory.pinned.configured), its registered memory regions (rdma.memory.pinned),
    the kernel's VmPin, rdma resource show; target: pinned with the SRQ <= 1/8 of pinned without it."""
    rows = {}
    for line in open(path, errors="replace"):
        if line.startswith("case=peers "):
            kv = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
            rows[kv.get("mode")] = kv
    if not rows:
        return [], 0
    mib = lambda v: f"{int(v) / 2**20:,.2f} MiB" if v not in (None, "-1") else "-"
    out = ["", "A server with many peers (issue 33): rxeA -> rxeB, one starter server, N client connections in "
           "another JVM (the server's pinned memory with and without the shared receive queue):", "",
           "| mode | N | accept first..all | listen..all | delivered / expected | routed | configured (computed) | "
           "registered MRs | VmPin | MRs / QPs on the device |",
           "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for mode in ("srq", "nosrq"):
        r = rows.get(mode)
        if r is None:
            continue
        out.append(f"| {mode} | {r['accepted']} of {r['n']} | {int(r['accept_first_to_all_ms']) / 1e3:.1f} s | "
                   f"{int(r['listen_to_all_ms']) / 1e3:.1f} s | {r['delivered']} / {r['expected']} | {r['routed']} | "
                   f"{mib(r['configured'])} | {mib(r['registered'])} | {int(r['vm_pin_kb']) / 1024:,.2f} MiB | "
                   f"{r.get('device_mrs', '-')} / {r.get('device_qps', '-')} |")
    misses = 0
    if "srq" in rows and "nosrq" in rows:
        s, n = rows["srq"], rows["nosrq"]
        out.append("")
        for what in ("configured", "registered", "vm_pin_kb"):
            if int(n[what]) > 0 and int(s[what]) >= 0:
                q = int(s[what]) / int(n[what])
                ok = q <= 1 / 8
                misses += 0 if ok or what != "configured" else 1
                out.append(f"SRQ/no-SRQ {what}: {q:.3f} (1/{1 / q if q else float('inf'):.1f}); target <= 1/8 = "
                           f"0.125: {'pass' if ok else 'MISS'}")
        out.append(f"(message-size {s['message_size']} B, receive-depth {s['receive_depth']}, send-depth "
                   f"{s['send_depth']}, SRQ depth {s['srq_depth']}, {s['m']} messages per peer)")
    return out, misses


if __name__ == "__main__":
    main()
