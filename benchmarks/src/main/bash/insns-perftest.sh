#!/usr/bin/env bash
# scripts/bench's case insns_perftest (instruction-count mode, BENCH_INSNS=1; docs/benchmarks.md "Instructions per
# message"): perftest cannot mark its measured loop, so ib_send_lat -e (events, as the C twin xdev_pingpong) runs
# whole, server on rxeB and client on rxeA, between two marks (bench_mark), once per iteration count; the table
# (insns_table.py) divides the difference of the counts by the difference in messages: what set-up and tear-down
# cost cancels out.
#
#   insns-perftest.sh OUTDIR BENCH_MARK SIZE N1 N2...
#
# The server's listening socket is awaited by the shell itself (no process per check): every guest instruction
# between the marks counts.
set -u
out=$1 mark=$2 size=$3
shift 3
for v in RDMA_DEVICE_A RDMA_DEVICE_B RDMA_GID_INDEX_A RDMA_GID_INDEX_B RDMA_IP_B; do
    [[ -n ${!v:-} ]] || { echo "# insns_perftest failed: $v is not set (scripts/softroce-vm --two-devices)"; exit 1; }
done
port=18990
for n in "$@"; do
    port=$((port + 1))
    hex=$(printf '%04X' "$port")
    "$mark" "B case=perftest_lat impl=perftest rt=$n"
    ib_send_lat -d "$RDMA_DEVICE_B" -x "$RDMA_GID_INDEX_B" -s "$size" -n "$n" -F -e -p "$port" > "$out/insns_perftest_$n.server" 2>&1 &
    spid=$!
    for _ in $(seq 1 3000); do
        x= y=
        read -r -d '' x < /proc/net/tcp
        read -r -d '' y < /proc/net/tcp6
        [[ "$x$y" =~ :$hex\ [0-9A-F]+:0000\ 0A ]] && break
        sleep 0.05
    done
    ib_send_lat -d "$RDMA_DEVICE_A" -x "$RDMA_GID_INDEX_A" -s "$size" -n "$n" -F -e -p "$port" "$RDMA_IP_B" \
        > "$out/insns_perftest_$n.client" 2>&1 || echo "# insns_perftest failed: ib_send_lat client exited $?"
    wait "$spid" || echo "# insns_perftest failed: ib_send_lat server exited $?"
    "$mark" E
    # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    awk -v s="$size" -v n="$n" '$1 == s && NF >= 7 { print "# insns_perftest ib_send_lat -e -n " n ": " $0 }' "$out/insns_perftest_$n.client"
done
