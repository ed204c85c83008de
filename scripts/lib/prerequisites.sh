# Shared by the project's scripts: find JDK 25 and install missing Debian packages.

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

# Installs the given Debian packages when any is missing (apt-get, as root).
ensure_debian_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    (( ${#missing[@]} == 0 )) && return 0
    if ! command -v apt-get > /dev/null; then
        echo "missing packages: ${missing[*]}; this script installs them with apt-get (Debian/Ubuntu) only" >&2
        exit 1
    fi
    local sudo=()
    (( EUID == 0 )) || sudo=(sudo)
    echo "installing: ${missing[*]}"
    "${sudo[@]}" apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" > /dev/null
}
