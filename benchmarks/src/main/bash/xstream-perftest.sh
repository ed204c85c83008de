#!/usr/bin/env bash
# The perftest side of scripts/bench's cases xstream, xstream_write, xstream_read (issue 33): ib_send_bw, ib_write_bw,
# ib_read_bw (duration mode, busy polling, perftest's defaults: tx depth 128, rx depth 512) and ib_send_lat, server on
# RDMA_DEVICE_B (RDMA_IP_B), client on RDMA_DEVICE_A, GID indexes RDMA_GID_INDEX_A/_B (scripts/softroce-vm
# --two-devices), one run per size. Prints the lines of bench_table.py (impl=c):
#   case=xstream_mbps|xstream_rate|xstream_cpu op=send|write|read size=N   MB/s and messages/s (perftest's MsgRate or
#                                                                       BW average, whichever has more digits) and the CPU time of
#                                                                       both perftest processes per message
#   case=xstream_lat op=send size=N                                      ib_send_lat's t_typical (min and max beside it)
# CPU per message: user+system time of the server and the client process over their whole run (bash's time; set-up
# included), divided by the messages of DURATION seconds at the measured rate (perftest measures from its 2 s margin
# to DURATION-2 s; both sides busy-poll throughout). Each run prints the hw_counters of both devices that grew
# (retransmissions: duplicate_request, rcvd_seq_err, completer_retry_err, ...).
#
#   xstream-perftest.sh OUTDIR DURATION OUTSTANDING_READS OPS(send,write,read,lat) SIZE...
# XSTREAM_PERFTEST_EVENTS=1: the tools sleep on completion events (-e) instead of busy-polling (ib_write_bw has no -e).
#   xstream-perftest.sh --around NAME COMMAND...          COMMAND, then the hw_counters that grew meanwhile
set -u
port=${XSTREAM_PERFTEST_PORT:-18900}
lat_iters=${XSTREAM_LAT_ITERS:-500}
for v in RDMA_DEVICE_A RDMA_DEVICE_B RDMA_GID_INDEX_A RDMA_GID_INDEX_B RDMA_IP_B; do
    [[ -n ${!v:-} ]] || { echo "# xstream perftest failed: $v is not set (scripts/softroce-vm --two-devices)"; exit 1; }
done
command -v ib_send_bw > /dev/null || { echo "# xstream perftest failed: no ib_send_bw (Debian package perftest)"; exit 1; }
iterations() { # iterations of an events run (perftest refuses -D with -e): about DURATION seconds at the rates of
               # the ordered link (runs 16-20: 13,000-20,000 messages/s at 64 B and 1 KiB, 3,100-6,700 at 4 KiB, 320-430
               # at 64 KiB; the counts of 6,000 / 2,500 / 150 used before measured a burst of 0.3-0.4 s there)
    case $1 in 64|1024) echo "${XSTREAM_ITERS_SMALL:-$((dur * 10000))}" ;; 4096) echo "${XSTREAM_ITERS_4K:-$((dur * 3000))}" ;; *) echo "${XSTREAM_ITERS_LARGE:-$((dur * 250))}" ;; esac
}
listening() { # $1: TCP port; true once a socket listens on it (read by the shell itself: no process per check)
    local x= y= hex
    printf -v hex '%04X' "$1"
    read -r -d '' x < /proc/net/tcp
    read -r -d '' y < /proc/net/tcp6
    [[ "$x$y" =~ :$hex\ [0-9A-F]+:0000\ 0A ]]
}
wait_listen() { # $1: TCP port, $2: the server's pid (gives up when it ended), $3: seconds between checks (0.1)
    for _ in $(seq 1 600); do
        [[ -n ${2:-} ]] && ! kill -0 "$2" 2>/dev/null && return 1
        listening "$1" && return 0
        sleep "${3:-0.1}"
    done
    return 1
}
line() { # case op size unit value [min max]
    echo "case=$1 op=$2 size=$3 impl=c unit=$4 median=$5 min=${6:-$5} max=${7:-$5} reps=1"
}
hw() { # every hw_counter of both devices, one process: "dev/counter value" lines; then where the kernel drops
       # packets on their way between the devices: the netdevs' dropped counters and the per-CPU backlog's
       # (/proc/net/softnet_stat, second column: a full netdev_max_backlog)
    grep -H . /sys/class/infiniband/{$RDMA_DEVICE_A,$RDMA_DEVICE_B}/ports/1/hw_counters/* 2>/dev/null \
        | sed -E 's#^/sys/class/infiniband/([^/]+)/ports/1/hw_counters/([^:]+):#\1/\2 #'
    grep -H . /sys/class/net/*/statistics/{rx,tx}_dropped 2>/dev/null \
        | sed -E 's#^/sys/class/net/([^/]+)/statistics/([^:]+):#net/\1/\2 #'
    local _c dropped rest total=0
    while read -r _c dropped rest; do total=$((total + 16#$dropped)); done < /proc/net/softnet_stat
    echo "softnet/dropped $total"
    awk '/^Udp:/ { if (!h) { for (i = 2; i <= NF; i++) n[i] = $i; h = 1 } else { for (i = 2; i <= NF; i++) print "udp/" n[i], $i } }' /proc/net/snmp
}
hw_delta() { # $1, $2: two hw outputs; the counters that grew, "dev/counter +N" (one pipe: the VM's /dev has no
              # /dev/fd for <(...))
    { echo "$1"; echo --; echo "$2"; } \
        | awk '$0 == "--" { second = 1; next } !second { a[$1] = $2; next } $2 - a[$1] > 0 { printf " %s +%d", $1, $2 - a[$1] }'
}
if [[ $1 == --around ]]; then
    # --around NAME COMMAND...: runs COMMAND, then prints the hw_counters of both devices that grew meanwhile
    name=$2
    shift 2
    h0=$(hw)
    "$@"
    rc=$?
    echo "# $name hw_counters:$(hw_delta "$h0" "$(hw)")"
    exit $rc
fi
guest_cpu() { # $1: the sampler's file, $2: when the client ended, $3, $4: iterations and rate of the measured part;
              # the machine's CPU by kind between the first sample 0.3 s into the measured part (it ends as the client
              # ends, and lasts iterations / rate) and the last one 0.3 s before its end, as XstreamClient prints it
    awk -v e="$2" -v n="$3" -v r="$4" '
        BEGIN { s = e - (r > 0 ? n / r : 0) + 0.3; e -= 0.3 }
        $1 >= s && $1 <= e && ($2 == "ctxt" || $2 == "intr") { if (!($2 in ev0)) ev0[$2] = $3; ev1[$2] = $3; next }
        $1 >= s && $1 <= e {
            if (!($2 in seen)) { seen[$2] = 1; cpus[n_c++] = $2; for (i = 3; i <= 10; i++) a[$2, i] = $i; if (!f) { f = 1; t0 = $1 } }
            for (i = 3; i <= 10; i++) b[$2, i] = $i; t1 = $1
        }
        END {
            if (!f || t1 - t0 < 0.5) { print "guest cpu: measured part too short for the sampler"; exit }
            for (i = 3; i <= 10; i++) { d[i] = b["cpu", i] - a["cpu", i]; tot += d[i] }
            if (tot <= 0) { print "guest cpu: no ticks"; exit }
            idle = d[6] + d[7]
            per = ""
            for (c = 0; c < n_c; c++) {
                k = cpus[c]; if (k == "cpu") continue
                all = 0; for (i = 3; i <= 10; i++) all += b[k, i] - a[k, i]
                id = b[k, 6] - a[k, 6] + b[k, 7] - a[k, 7]
                per = per sprintf("%s%s %.1f", per == "" ? "" : ", ", k, all > 0 ? 100 * (all - id) / all : 0)
            }
            printf "guest cpu: busy %.1f %% (user %.1f, system %.1f, irq %.1f, softirq %.1f; %s), idle %.1f %%, %.0f us busy per message, %.3f context switches and %.3f interrupts per message (over %.1f s)\n",
                100 * (tot - idle) / tot, 100 * (d[3] + d[4]) / tot, 100 * d[5] / tot, 100 * d[8] / tot, 100 * d[9] / tot,
                per, 100 * idle / tot, (tot - idle) * 10000 / (r * (t1 - t0)), (ev1["ctxt"] - ev0["ctxt"]) / (r * (t1 - t0)),
                (ev1["intr"] - ev0["intr"]) / (r * (t1 - t0)), t1 - t0
        }' "$1"
}
bw_insns() { # the instruction-count mode (BENCH_INSNS=1, BENCH_MARK_BIN): perftest cannot mark its measured loop, so
             # each run is whole between two marks, at a quarter of the iterations and at all of them; insns_table.py
             # divides the difference of the counts by the difference in messages (set-up and tear-down cancel out).
             # Nothing else runs meanwhile: no sampler, no hw_counters, no time(1)
    local op=$1 size=$2 tool=ib_${1}_bw n iters spid
    iters=$(iterations "$size")
    for n in $((iters / 4)) "$iters"; do
        port=$((port + 1))
        local args=(-s "$size" -n "$n" -F -p "$port")
        [[ $op == read ]] && args+=(-o "$outstanding")
        [[ -n ${XSTREAM_PERFTEST_EVENTS:-} && $op != write ]] && args+=(-e)
        "$BENCH_MARK_BIN" "B case=xstream_$op impl=perftest size=$size msgs=$n"
        "${pin[@]}" "$tool" -d "$RDMA_DEVICE_B" -x "$RDMA_GID_INDEX_B" "${args[@]}" > "$out/insns_${op}_${size}_$n.server" 2>&1 &
        spid=$!
        wait_listen "$port" "$spid" 0.05
        "${pin[@]}" "$tool" -d "$RDMA_DEVICE_A" -x "$RDMA_GID_INDEX_A" "${args[@]}" "$RDMA_IP_B" > "$out/insns_${op}_${size}_$n.client" 2>&1 \
            || echo "# xstream perftest failed: $tool client ($op $size B, -n $n) exited $?"
        wait "$spid" || echo "# xstream perftest failed: $tool server ($op $size B, -n $n) exited $?"
        "$BENCH_MARK_BIN" E
        echo "# xstream perftest insns $tool $size B -n $n: $(awk -v s="$size" '$1 == s && NF >= 5 && $2 ~ /^[0-9]+$/ { print $2 " iterations, BW average " $4 " MB/s"; exit }' "$out/insns_${op}_${size}_$n.client")"
    done
}
bw() { # $1 op, $2 size, $3 (internal): "again" on the second attempt
    local op=$1 size=$2 tool=ib_${1}_bw
    [[ ${BENCH_INSNS:-0} == 1 ]] && { bw_insns "$op" "$size"; return; }
    port=$((port + 1))
    local args=(-s "$size" -D "$dur" -F -p "$port") iters_mode=
    [[ $op == read ]] && args+=(-o "$outstanding")
    # completion events (-e) where the tool has them (ib_write_bw has none); perftest refuses duration mode with events
    # ("Duration mode doesn't work with events"): then a count of iterations, all of them measured
    if [[ -n ${XSTREAM_PERFTEST_EVENTS:-} && $op != write ]]; then
        iters_mode=$(iterations "$size")
        args=(-s "$size" -n "$iters_mode" -F -p "$port" -e)
        [[ $op == read ]] && args+=(-o "$outstanding")
    fi
    local f=$out/perftest_${op}_${size} h0 h1 sampler t_end
    h0=$(hw)
    # the machine's CPU time by kind, all CPUs and each (/proc/stat's cpu lines), and its context switches and
    # interrupts (ctxt, intr's total), every 0.25 s, for the measured part;
    # without a process per sample (a `sleep` per turn kept 16-19 % of the other CPU busy under emulation, runs 21-28;
    # a FIFO in $out, on the host's file system, did not block): the wait is bash's read timing out on the pipe of a
    # coprocess that never writes
    ( coproc TICK { exec sleep 2147483647; }
      trap 'kill "$TICK_PID" 2>/dev/null; exit 0' TERM
      while :; do
          t=$EPOCHREALTIME
          while read -r k rest; do
              case $k in cpu*) echo "$t $k $rest" ;; intr | ctxt) echo "$t $k ${rest%% *}" ;; btime) break ;; esac
          done < /proc/stat
          read -r -t 0.25 -u "${TICK[0]}" _
      done ) > "$f.stat" &
    sampler=$!
    # each side under bash's time: user and system seconds of the whole process
    ( TIMEFORMAT='%U %S'; time "${pin[@]}" "$tool" -d "$RDMA_DEVICE_B" -x "$RDMA_GID_INDEX_B" "${args[@]}" > "$f.server" 2>&1 ) 2> "$f.server.time" &
    local spid=$!
    if ! wait_listen "$port" "$spid"; then
        echo "# xstream perftest failed: $tool server not listening on $port"; kill "$spid"; return
    fi
    ( TIMEFORMAT='%U %S'; time "${pin[@]}" "$tool" -d "$RDMA_DEVICE_A" -x "$RDMA_GID_INDEX_A" "${args[@]}" "$RDMA_IP_B" > "$f.client" 2>&1 ) 2> "$f.client.time" &
    local cpid=$!
    wait "$cpid" || echo "# xstream perftest failed: $tool client ($op $size B) exited $?"
    t_end=$EPOCHREALTIME
    wait "$spid" || echo "# xstream perftest failed: $tool server ($op $size B) exited $?"
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    h1=$(hw)
    # the result line: #bytes #iterations BW-peak BW-average MsgRate; for send, the receiver's (server's) when it has one
    local r
    r=$(awk -v s="$size" '$1 == s && NF >= 5 && $2 ~ /^[0-9]+$/ { print $2, $4, $5; exit }' "$f.server")
    [[ $op != send || -z $r ]] && r=$(awk -v s="$size" '$1 == s && NF >= 5 && $2 ~ /^[0-9]+$/ { print $2, $4, $5; exit }' "$f.client")
    if [[ -z $r ]]; then
        echo "# xstream perftest failed: no result line from $tool ($op $size B); see $f.client / $f.server"
        return
    fi
    local iters mbps mpps rate cpu secs
    read -r iters mbps mpps <<< "$r"
    # perftest converts its cycle counts to seconds with a CPU clock it measures at start; under emulation that
    # measurement sometimes fails its own fit ("Correlation coefficient r^2: 0.69 < 0.9") and every figure is printed
    # as 0 (run 33, ib_read_bw 64 KiB): not a result. Run once more, saying so; a second failure is reported
    if [[ $mbps == 0.00 && $mpps == 0.000000 ]] && grep -q 'Correlation coefficient' "$f.client" "$f.server"; then
        if [[ ${3:-} != again ]]; then
            echo "# xstream perftest: $tool $size B printed 0 MB/s (its CPU clock fit did not converge: $(grep -ho 'Correlation coefficient[^<]*< [0-9.]*' "$f.client" "$f.server" | head -1)): run again"
            bw "$op" "$size" again
        else
            echo "# xstream perftest failed: $tool $size B printed 0 MB/s twice (its CPU clock measurement failed); see $f.client"
        fi
        return
    fi
    # both figures are printed with few digits (MB/s with 2 decimals, Mpps with 6): the rate from the one with more
    # significant digits (small messages: Mpps), and MB/s from that rate
    rate=$(awk -v b="$mbps" -v m="$mpps" -v s="$size" 'BEGIN { r = (m >= 0.001 ? m * 1e6 : b * 1048576 / s); printf "%.2f", r }')
    mbps=$(awk -v r="$rate" -v s="$size" 'BEGIN { printf "%.4f", r * s / 1048576 }')
    # CPU of both processes over their whole run (set-up included) per message of the run's DURATION at the rate
    secs=$(cat "$f.server.time" "$f.client.time" | awk '{ t += $1 + $2 } END { printf "%.2f", t }')
    if [[ -n $iters_mode ]]; then # every iteration measured: CPU / iterations
        cpu=$(awk -v c="$secs" -v n="$iters_mode" 'BEGIN { printf "%.2f", c / n * 1e6 }')
    else
        cpu=$(awk -v c="$secs" -v d="$dur" -v r="$rate" 'BEGIN { if (r > 0) printf "%.2f", c / (d * r) * 1e6; else print "0" }')
    fi
    echo "# xstream perftest $tool $size B: $iters iterations in the measured part, BW average $mbps MB/s; cpu of both processes ${secs} s; hw_counters:$(hw_delta "$h0" "$h1"); $(guest_cpu "$f.stat" "$t_end" "$iters" "$rate")"
    line xstream_mbps "$op" "$size" MB/s "$mbps"
    line xstream_rate "$op" "$size" msgs/s "$rate"
    line xstream_cpu "$op" "$size" us_per_message "$cpu"
}
lat() {
    local size=$1 f=$out/perftest_lat_$1
    port=$((port + 1))
    local args=(-s "$size" -n "$lat_iters" -F -p "$port")
    [[ -n ${XSTREAM_PERFTEST_EVENTS:-} ]] && args+=(-e)
    ib_send_lat -d "$RDMA_DEVICE_B" -x "$RDMA_GID_INDEX_B" "${args[@]}" > "$f.server" 2>&1 &
    local spid=$!
    wait_listen "$port" "$spid" || { echo "# xstream perftest failed: ib_send_lat server not listening on $port"; kill "$spid"; return; }
    ib_send_lat -d "$RDMA_DEVICE_A" -x "$RDMA_GID_INDEX_A" "${args[@]}" "$RDMA_IP_B" > "$f.client" 2>&1 \
        || echo "# xstream perftest failed: ib_send_lat client ($size B) exited $?"
    wait "$spid" || echo "# xstream perftest failed: ib_send_lat server ($size B) exited $?"
    # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    local r
    r=$(awk -v s="$size" '$1 == s && NF >= 7 && $2 ~ /^[0-9]+$/ { print $5, $3, $4; exit }' "$f.client")
    [[ -n $r ]] || { echo "# xstream perftest failed: no result line from ib_send_lat ($size B); see $f.client"; return; }
    line xstream_lat send "$size" us $r
}
out=$1 dur=$2 outstanding=$3 ops=$4
shift 4
# XSTREAM_TASKSET=CPUS: both perftest processes run on those CPUs (taskset -c), as the starter's JVM then does
pin=(env)
[[ -n ${XSTREAM_TASKSET:-} ]] && pin=(taskset -c "$XSTREAM_TASKSET")
sizes=("$@")
mkdir -p "$out"
echo "# xstream perftest: $RDMA_DEVICE_A -> $RDMA_DEVICE_B ($RDMA_IP_B), ops $ops, sizes ${sizes[*]}, -D $dur, read -o $outstanding, ib_send_lat -n $lat_iters, events ${XSTREAM_PERFTEST_EVENTS:-0}, CPUs ${XSTREAM_TASKSET:-any}; $(ib_send_bw --version 2>&1 | head -1)"
for op in ${ops//,/ }; do
    for size in "${sizes[@]}"; do
        if [[ $op == lat ]]; then
            [[ ${BENCH_INSNS:-0} == 1 ]] || lat "$size" # (insns_perftest counts ib_send_lat)
        else
            bw "$op" "$size"
        fi
    done
done
