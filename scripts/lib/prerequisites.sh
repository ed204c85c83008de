# Shared by the project's scripts (test, sample, bench, softroce-vm): find JDK 25 and install missing Debian packages.
# The one place that runs apt-get install.

# Exports JAVA_HOME pointing at a JDK 25+ (the current JAVA_HOME, Temurin 25 under /usr/lib/jvm, or any JDK 25+ there).
ensure_jdk25() {
    local candidate v
    for candidate in "${JAVA_HOME:-}" /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/*; do
        [[ -n $candidate && -x $candidate/bin/javac ]] || continue
        v=$("$candidate/bin/java" -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2}')
        if [[ ${v%%.*} =~ ^[0-9]+$ ]] && (( ${v%%.*} >= 25 )); then
            export JAVA_HOME=$candidate
            return 0
        fi
    done
    echo "rdma-spring-boot needs a JDK 25 or newer (java.lang.foreign final API); none found in JAVA_HOME or /usr/lib/jvm." >&2
    echo "Install one (e.g. Temurin 25) and set JAVA_HOME." >&2
    exit 1
}

prerequisites_die() {
    echo "$*" >&2
    exit 1
}

# Runs a command as root (directly, or through sudo -n).
as_root() {
    if (( EUID == 0 )); then
        "$@"
    elif command -v sudo > /dev/null 2>&1; then
        sudo -n "$@"
    else
        prerequisites_die "need root to run: $* (no sudo)"
    fi
}

# librdmacm and the C peers of the cross-device tests (issue 15): the runtime, its headers (layout probes of
# rdma/rdma_cma.h), ibv_rc_pingpong (ibverbs-utils) and rdma_server/rdma_client/rping (rdmacm-utils). The Soft-RoCE
# VM runs the host's own root, so these are the guest's programs too.
RDMA_CM_PACKAGES=(librdmacm1 librdmacm-dev ibverbs-utils rdmacm-utils)

APT_UPDATED=0
# apt-get update, once per script run.
apt_update_once() {
    (( APT_UPDATED )) && return 0
    echo "apt-get update" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || prerequisites_die "apt-get update failed"
    APT_UPDATED=1
}

# Installs the given Debian packages when any is missing: without an update first when package lists exist (fast,
# and works offline for a cached package), with one when that fails.
ensure_debian_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    (( ${#missing[@]} == 0 )) && return 0
    if ! [[ -f /etc/debian_version ]] || ! command -v apt-get > /dev/null; then
        prerequisites_die "missing packages: ${missing[*]}; the project's scripts install them with apt-get (Debian/Ubuntu) only"
    fi
    compgen -G '/var/lib/apt/lists/*_Packages*' > /dev/null || apt_update_once
    echo "installing: ${missing[*]}" >&2
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null; then
        apt_update_once
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null ||
            prerequisites_die "apt-get install ${missing[*]} failed"
    fi
}
