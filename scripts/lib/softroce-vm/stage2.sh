#!/bin/bash
# softroce-vm guest stage 2: runs with the host's own bash inside the overlay root.
#
# Brings up rxe0, then runs the caller's command with the caller's environment and
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
