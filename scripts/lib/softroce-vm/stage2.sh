#!/bin/bash
# softroce-vm guest stage 2: runs with the host's own bash inside the overlay root.
#
# Brings up rxe0 (and with --two-devices rxeA/rxeB on a veth pair), then runs the caller's command with the caller's environment and
# working directory, stdin /dev/null, stdout/stderr on the virtio-serial ports.
# Exit status: the command's, or 125 when the RDMA setup failed (ctl/setup-failed).
set -u
CTL=/run/rxe-vm
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# shellcheck source=/dev/null
. "$CTL/meta"

log() { echo "rxe-vm: $*"; }
now() { local u; read -r u _ </proc/uptime; echo "$u"; }
setup_fail() {
    log "FATAL: $*"
    echo "$*" >"$CTL/setup-failed"
    {
        echo "--- ip addr"; ip addr 2>&1
        echo "--- rdma link"; rdma link 2>&1
        echo "--- lsmod"; cat /proc/modules 2>&1
    } >"$CTL/setup-debug.log" 2>&1
    exit 125
}
echo "stage2_start $(now)" >>"$CTL/timings"

hostname rxe-vm 2>/dev/null

# --- the clock -------------------------------------------------------------------------
# Under TCG the guest's TSC ticks at the host's rate, but the kernel calibrates its frequency at boot (against the
# HPET: PIT calibration fails under TCG), and a host that is busy during those milliseconds can make it wrong by a
# factor (seen once: the guest clock ran about 4x fast, so every timeout in the guest fired early). The refinement a
# second later corrects only within 1 %, and tsc=reliable keeps the clocksource watchdog from noticing. So compare the
# guest's clock with the host's over 2 s (a file created on the ctl share gets the host's time as its mtime) and fall
# back to the HPET clocksource (slower to read, right) when they disagree by more than 10 %.
clock_ratio() {
    local a=$CTL/clock.a b=$CTL/clock.b g0 g1
    rm -f "$a" "$b"
    read -r g0 _ </proc/uptime
    : >"$a"
    sleep 2
    read -r g1 _ </proc/uptime
    : >"$b"
    awk -v g0="$g0" -v g1="$g1" -v h0="$(stat -c %.9Y "$a")" -v h1="$(stat -c %.9Y "$b")" \
        'BEGIN { if (h1 - h0 <= 0) print "nan"; else printf "%.3f\n", (g1 - g0) / (h1 - h0) }'
}
clock_ok() { awk -v r="$1" 'BEGIN { exit !(r != "nan" && r >= 0.9 && r <= 1.1) }'; }
ratio=$(clock_ratio)
cs=/sys/devices/system/clocksource/clocksource0/current_clocksource
if ! clock_ok "$ratio"; then
    log "WARNING: the guest clock ran ${ratio}x the host's over 2 s (clocksource $(cat "$cs"): TSC calibrated wrongly at boot); switching to hpet" |
        tee -a "$CTL/warnings"
    echo hpet >"$cs" 2>/dev/null || setup_fail "guest clock at ${ratio}x the host's, and the hpet clocksource cannot be selected"
    ratio=$(clock_ratio)
    clock_ok "$ratio" || setup_fail "guest clock still at ${ratio}x the host's with clocksource $(cat "$cs")"
fi
echo "clock_ratio $ratio $(cat "$cs") $(now)" >>"$CTL/timings"

# --- RDMA: rxe0 on the chosen netdev --------------------------------------------------
modprobe rdma_rxe || setup_fail "modprobe rdma_rxe failed"
case "$NETDEV" in
    lo)
        ip link set lo up || setup_fail "ip link set lo up failed"
        dev=lo
        ;;
    nic)
        modprobe virtio_net || setup_fail "modprobe virtio_net failed"
        dev=
        for _ in $(seq 100); do
            for n in /sys/class/net/*; do
                [ "$(readlink -f "$n/device/driver" 2>/dev/null)" != "" ] \
                    && [ "$(basename "$(readlink -f "$n/device/driver")")" = virtio_net ] && dev=${n##*/}
            done
            [ -n "$dev" ] && break
            sleep 0.05
        done
        [ -n "$dev" ] || setup_fail "no virtio-net interface appeared"
        ip link set lo up
        ip link set "$dev" up || setup_fail "ip link set $dev up failed"
        # /32: no subnet route, only the guest's own address exists on the NIC.
        ip addr add "$NIC_IPV4/32" dev "$dev" || setup_fail "ip addr add failed"
        ;;
    *) setup_fail "unknown netdev mode $NETDEV" ;;
esac
rdma link add rxe0 type rxe netdev "$dev" || setup_fail "rdma link add rxe0 type rxe netdev $dev failed"

# Wait for port 1 ACTIVE and an IPv4-mapped GID (pitfall: it appears a few ms after the address).
port=/sys/class/infiniband/rxe0/ports/1
gid_index=
for _ in $(seq 300); do
    if [ -r "$port/state" ] && grep -q ACTIVE "$port/state"; then
        for g in "$port"/gids/*; do
            if grep -q '^0000:0000:0000:0000:0000:ffff:' "$g" 2>/dev/null; then
                gid_index=${g##*/}
                break
            fi
        done
        [ -n "$gid_index" ] && break
    fi
    sleep 0.05
done
[ -n "$gid_index" ] || setup_fail "rxe0 port 1 did not become ACTIVE with an IPv4 GID within 15 s"
# rdma_cm users (rping, perftest -R): not needed by plain verbs, loaded for convenience.
modprobe rdma_ucm 2>/dev/null || log "modprobe rdma_ucm failed (rdma_cm unavailable)"

# --- two devices (--two-devices): rxeA on vethA (10.0.0.1), rxeB on vethB (10.0.0.2) -------
# The commands of /work/shared/notes/cross-host.md ("What works"), except that rxe0 stays on lo for the
# single-device tests: nothing in the rules below routes 10.0.0.x through lo, and rxe0's GID table holds no
# 10.0.0.x address, so a packet that did fall through to lo would be dropped there, not carried. Both devices in
# the initial namespace (rxe in 6.1 transmits from it only), and policy routing so that 10.0.0.1 <-> 10.0.0.2 goes
# over the veth pair instead of lo.
# Reads only the first 8 GID entries with the shell's own read: the table has 1024 and a process per entry costs
# 0.1-0.3 s under emulation.
ipv4_gid_index() { # $1: device; prints the index of its IPv4-mapped GID on port 1, nothing if none yet
    local n g
    for n in 0 1 2 3 4 5 6 7; do
        g=
        read -r g <"/sys/class/infiniband/$1/ports/1/gids/$n" 2>/dev/null || true
        case "$g" in 0000:0000:0000:0000:0000:ffff:*) echo "$n"; return ;; esac
    done
}
if [ "${TWO_DEVICES:-0}" = 1 ]; then
    echo "two_devices_start $(now)" >>"$CTL/timings"
    modprobe rdma_ucm || setup_fail "modprobe rdma_ucm failed (rdma_cm is needed for --two-devices)"
    modprobe veth || setup_fail "modprobe veth failed"
    ip link add vethA type veth peer name vethB || setup_fail "ip link add vethA type veth peer name vethB failed"
    ip addr add 10.0.0.1/24 dev vethA || setup_fail "ip addr add 10.0.0.1/24 dev vethA failed"
    ip addr add 10.0.0.2/24 dev vethB || setup_fail "ip addr add 10.0.0.2/24 dev vethB failed"
    # up before the routes ("Device for nexthop is not up")
    ip link set vethA up && ip link set vethB up || setup_fail "ip link set vethA/vethB up failed"
    # In order, as on a wire: a veth hands each packet to the backlog of the CPU that sent it, and rxe sends a QP's
    # packets from whichever CPU runs its requester (the posting thread, or a tasklet resumed elsewhere), so with two
    # vCPUs the two backlogs reordered one QP's packets; RC takes a gap for a loss (NAK, go-back-N). Measured
    # (docs/softroce-vm.md "Two devices"): sends of 4 KiB in chains of 16, 9 % of the packets sent twice, none with
    # every received packet steered to CPU 0's backlog (RPS), which keeps the order they were sent in.
    for q in /sys/class/net/vethA/queues/rx-*/rps_cpus /sys/class/net/vethB/queues/rx-*/rps_cpus; do
        echo 1 >"$q" || setup_fail "steering $q to CPU 0 (RPS) failed"
    done
    for d in all default vethA vethB; do echo 0 >"/proc/sys/net/ipv4/conf/$d/rp_filter"; done
    ip route add 10.0.0.2 dev vethA src 10.0.0.1 table 100 || setup_fail "route 10.0.0.2 table 100 failed"
    ip route add 10.0.0.1 dev vethB src 10.0.0.2 table 101 || setup_fail "route 10.0.0.1 table 101 failed"
    # rxe's own route lookup names its netdev as oif; unbound sockets (rdma_cm without a source, TCP) come from lo
    ip rule add pref 100 oif vethA lookup 100 && ip rule add pref 101 oif vethB lookup 101 &&
        ip rule add pref 102 to 10.0.0.2 iif lo lookup 100 && ip rule add pref 103 to 10.0.0.1 iif lo lookup 101 ||
        setup_fail "ip rule add failed"
    # the local table after these rules, else 10.0.0.1 <-> 10.0.0.2 goes through lo
    ip rule add pref 1000 lookup local && ip rule del pref 0 lookup local || setup_fail "moving the local rule failed"
    rdma link add rxeA type rxe netdev vethA || setup_fail "rdma link add rxeA type rxe netdev vethA failed"
    rdma link add rxeB type rxe netdev vethB || setup_fail "rdma link add rxeB type rxe netdev vethB failed"
    gid_a=; gid_b=
    for _ in $(seq 300); do
        st_a=; st_b=
        read -r st_a <"/sys/class/infiniband/rxeA/ports/1/state" 2>/dev/null
        read -r st_b <"/sys/class/infiniband/rxeB/ports/1/state" 2>/dev/null
        if [ "$st_a" = "4: ACTIVE" ] && [ "$st_b" = "4: ACTIVE" ]; then
            gid_a=$(ipv4_gid_index rxeA); gid_b=$(ipv4_gid_index rxeB)
            [ -n "$gid_a" ] && [ -n "$gid_b" ] && break
        fi
        sleep 0.05
    done
    [ -n "$gid_a" ] && [ -n "$gid_b" ] ||
        setup_fail "rxeA/rxeB port 1 did not become ACTIVE with an IPv4-mapped GID within 15 s"
    echo "two_devices_end $(now)" >>"$CTL/timings"
fi

# --- output ports --------------------------------------------------------------------
out=; err=
for p in /sys/class/virtio-ports/*; do
    case "$(cat "$p/name" 2>/dev/null)" in
        rxevm.out) out=/dev/${p##*/} ;;
        rxevm.err) err=/dev/${p##*/} ;;
    esac
done
[ -n "$out" ] && [ -n "$err" ] || setup_fail "virtio-serial ports rxevm.out/rxevm.err not found"

# --- the caller's environment --------------------------------------------------------
while IFS= read -r -d '' kv; do
    name=${kv%%=*}
    [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
    case "$name" in
        PWD | OLDPWD | SHLVL | _ | BASH* | SHELLOPTS | UID | EUID | PPID | GROUPS | HOSTNAME) continue ;;
    esac
    # shellcheck disable=SC2163  # exports NAME=VALUE, as intended
    export "$kv" 2>/dev/null
done <"$CTL/env"
export RXE_VM=1 RXE_VM_DEVICE=rxe0 RXE_VM_PORT=1 RXE_VM_GID_INDEX="$gid_index" \
    RXE_VM_IPV4="$GUEST_IPV4" RXE_VM_NETDEV="$dev" RXE_VM_JAVA_OPTS="$JAVA_OPTS_VALUE"
if [ "${TWO_DEVICES:-0}" = 1 ]; then
    export RDMA_DEVICE_A=rxeA RDMA_NETDEV_A=vethA RDMA_IP_A=10.0.0.1 RDMA_GID_INDEX_A="$gid_a" \
        RDMA_DEVICE_B=rxeB RDMA_NETDEV_B=vethB RDMA_IP_B=10.0.0.2 RDMA_GID_INDEX_B="$gid_b"
fi
if [ "$SET_JTO" = 1 ]; then
    export JAVA_TOOL_OPTIONS="${JAVA_TOOL_OPTIONS:+$JAVA_TOOL_OPTIONS }$JAVA_OPTS_VALUE"
fi

mapfile -d '' -t cmd <"$CTL/cmd"
cd -- "$CALLER_PWD" 2>/dev/null || {
    echo "softroce-vm(guest): cannot cd to $CALLER_PWD" >"$err"
    exit 126
}

marker=/run/rxe-vm-marker
touch "$marker"
echo "command_start $(now)" >>"$CTL/timings"
"${cmd[@]}" </dev/null >"$out" 2>"$err"
rc=$?
echo "command_end $(now)" >>"$CTL/timings"

# --- hs_err files that were written outside the work dir (overlay: lost at power off) ----
# The host checks the work dir itself; here, copy new ones from the throw-away overlay.
mkdir -p "$CTL/hs_err"
for d in /tmp /root "${HOME:-/root}" "$CALLER_PWD" /; do
    case "$d/" in "$WORKDIR"/*) continue ;; esac
    for f in "$d"/hs_err_pid*.log; do
        [ -f "$f" ] && [ "$f" -nt "$marker" ] || continue
        f=$(readlink -f -- "$f")
        cp -- "$f" "$CTL/hs_err/guest$(echo "$f" | tr / _)" 2>/dev/null
    done
done
exit "$rc"
