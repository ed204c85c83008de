#!/bin/busybox sh
# softroce-vm guest /init (PID 1 in the initramfs, busybox ash).
#
# 1. insmod the modules the root needs (list built on the host: /etc/rxe-vm/modules)
# 2. mount the ctl share, the host root (9p, read-only) under an overlayfs with a
#    tmpfs upper layer, the work dir (9p, read-write) at its host path
# 3. chroot into the result and run stage 2 (ctl/stage2.sh, with the host's bash)
# 4. write stage 2's exit status to ctl/rc, save dmesg, power off.
#
# Kernel command line parameters read here:
#   rxevm.probe=1      only report "reached /init" (KVM probe) and power off
#   rxevm.msize=N      9p msize
/bin/busybox mkdir -p /bin /sbin /proc /sys /dev
/bin/busybox --install -s /bin
export PATH=/sbin:/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
# Without a /dev/console node in the cpio the kernel gave us no stdio.
[ -c /dev/console ] && exec </dev/console >/dev/console 2>&1

log() { echo "rxe-vm: $*"; }

halt_now() {
    sync
    poweroff -f
    sleep 5
    echo o >/proc/sysrq-trigger
}

for arg in $(cat /proc/cmdline); do
    case "$arg" in
        rxevm.probe=1) log "probe: reached /init"; halt_now ;;
        rxevm.msize=*) MSIZE=${arg#rxevm.msize=} ;;
    esac
done
MSIZE=${MSIZE:-512000}

# Root modules, in dependency order.
while read -r m; do
    [ -n "$m" ] && { insmod "/lib/modules/$m" || log "insmod $m failed"; }
done </etc/rxe-vm/modules

P9="trans=virtio,version=9p2000.L,msize=$MSIZE"
mkdir -p /ctl /lower /upper /newroot
if ! mount -t 9p -o "$P9" ctl /ctl; then
    log "FATAL: cannot mount the ctl share"
    halt_now
fi

fail() {
    log "FATAL: $*"
    echo "$*" >/ctl/setup-failed
    echo 125 >/ctl/rc
    dmesg >/ctl/dmesg.log 2>/dev/null
    halt_now
}

# ctl/meta is a sh fragment written by the host: WORKDIR, KVER, MODDIR, ...
. /ctl/meta || fail "cannot read ctl/meta"

mount -t 9p -o "$P9,ro,cache=loose" hostroot /lower || fail "cannot mount the host root (9p)"
mount -t tmpfs -o mode=0755 tmpfs /upper || fail "cannot mount tmpfs"
mkdir -p /upper/u /upper/w
mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w overlay /newroot \
    || fail "cannot mount the overlay root"

R=/newroot
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
mount -t tmpfs -o mode=0755 tmpfs $R/run
mkdir -p $R/run/rxe-vm $R/run/lock
mount --bind /ctl $R/run/rxe-vm
# The cached module tree (with modules.dep) is visible through the host root.
mkdir -p "$R/lib/modules/$KVER"
mount --bind "$R$MODDIR" "$R/lib/modules/$KVER" || fail "cannot bind the module tree $MODDIR"
# The work dir, read-write, at the same path as on the host.
mkdir -p "$R$WORKDIR"
mount -t 9p -o "$P9,cache=mmap" work "$R$WORKDIR" || fail "cannot mount the work dir $WORKDIR"

chroot $R /bin/bash /run/rxe-vm/stage2.sh
rc=$?

dmesg >/ctl/dmesg.log 2>/dev/null
echo "$rc" >/ctl/rc.tmp && mv /ctl/rc.tmp /ctl/rc
sync
umount "$R$WORKDIR" 2>/dev/null
halt_now
