#!/usr/bin/env bash
# An AOT cache (JDK 25: JEP 483 and 514, `-XX:AOTCacheOutput`) for a Spring Boot executable jar, made on the host and
# used by the JVMs the device tier starts in the Soft-RoCE VM. Under emulation a Spring Boot JVM spends minutes loading,
# verifying and linking classes; the cache holds them loaded and linked. The guest runs the host's own root and the
# work tree at the same paths (scripts/softroce-vm), so a cache made on the host matches the guest's JDK and class path.
# This is Spring Boot's documented way to run an application efficiently (extract the jar, train once, run with the
# cache), not a test shortcut: the application, its flags and its class path are the same, only startup is cheaper.
#
#   aot-cache.sh train <jar> <dir> [flag...]
#                                    extract <jar> into <dir>/app (java -Djarmode=tools extract), run it once here up
#                                    to the application context's refresh (-Dspring.context.exit=onRefresh; a host
#                                    without an RDMA device stops earlier, at the starter's device check, after most
#                                    classes are loaded) and write <dir>/app.aot. The flags are the JVM flags of the
#                                    runs (module options such as --enable-native-access are recorded in the cache).
#                                    Exit 0 when the cache was written.
#   aot-cache.sh flags <dir>         the JVM flags that run the extracted jar with the cache, one per line, ending
#                                    with -jar and the extracted jar; exit 1 when <dir> holds no cache
#   aot-cache.sh dump-flags          the flags every JVM that writes a cache for the guest adds (one per line; below)
#   aot-cache.sh no-code <cache> <flag...>
#                                    exit 0 when the cache holds no compiled code; the flags open it as its runs do
#                                    (class path, module options); prints why not otherwise
#
# **No host code in a cache the guest opens.** JDK 25 stores the interpreter's call adapters in the cache
# (AOTAdapterCaching, on by default with a cache) compiled for the CPU that wrote it, and does not check the CPU that
# opens it: a host with AVX-512 writes adapters that save xmm16-31 with EVEX instructions, which the guest's emulated
# CPU (QEMU's TCG `max`: AVX2, no AVX-512) cannot run. Run 32 (2026-11-29, a host with AVX-512): the autoconfigure
# lane's test JVM died of SIGILL in `~AdapterBlob` at `62 e1 ff 08 11 44 24 1a` (vmovsd to xmm16) a minute in. Every
# cache the host writes for the guest is therefore written without adapters (-XX:-AOTAdapterCaching: the cache holds
# classes only, as on JDK 24) and checked for it before use (no-code): a cache with code is removed, its JVMs start
# without one (slower, never wrong).
#
# A cache that does not match the JVM that opens it is ignored with a warning (-XX:AOTMode=auto): the run is slower,
# never wrong. Measured in the VM (qemu's own CPU time to the context refresh of the sample, 2026-11-29): 89 s as an
# executable jar, 65 s with the cache and SerialGC, 59 s adding spring.backgroundpreinitializer.ignore.
set -uo pipefail

# flags of both the training and the runs (the cache records the GC): SerialGC also starts cheaper under emulation
AOT_COMMON=(-XX:+UseSerialGC)
# flags of every JVM that writes a cache for the guest: no compiled code in it (above)
AOT_DUMP=(-XX:+UnlockDiagnosticVMOptions -XX:-AOTAdapterCaching)

no_code() { # $1: the cache, then the flags that open it as its runs do
    local cache=$1 java=${JAVA_HOME:?}/bin/java out
    shift
    # AOTMode=on: a cache that cannot be mapped fails the JVM. "not used": a cache without linked classes (a JVM with
    # --illegal-native-access=deny has no archived module graph) never runs cached code either
    out=$("$java" "$@" -XX:AOTCache="$cache" -XX:AOTMode=on -Xlog:aot+codecache+init=info -version 2>&1) \
        && grep -qE "AOT Code Cache is (empty|not used)" <<< "$out" && return 0
    echo "aot-cache: $cache holds code compiled for this host's CPU, or could not be opened:" >&2
    grep -E "aot" <<< "$out" | head -5 >&2
    return 1
}

train() {
    local jar=$1 dir=$2 java=${JAVA_HOME:?}/bin/java name
    shift 2
    name=$(basename "$jar")
    rm -rf "$dir"
    mkdir -p "$dir"
    "$java" -Djarmode=tools -jar "$jar" extract --destination "$dir/app" > "$dir/extract.log" 2>&1 \
        || { echo "aot-cache: extracting $jar failed (see $dir/extract.log)" >&2; return 1; }
    # the training's exit status is the application's (non-zero on a host without a device): the cache is what counts
    printf '%s\n' "$@" > "$dir/run-flags"
    timeout -k 10 180 "$java" "${AOT_COMMON[@]}" "${AOT_DUMP[@]}" "$@" -XX:AOTCacheOutput="$dir/app.aot" \
        -Dspring.context.exit=onRefresh -Dspring.backgroundpreinitializer.ignore=true -jar "$dir/app/$name" \
        --server.port=0 > "$dir/train.log" 2>&1
    [[ -s $dir/app.aot ]] || { echo "aot-cache: no cache written for $jar (see $dir/train.log)" >&2; return 1; }
    no_code "$dir/app.aot" "${AOT_COMMON[@]}" "$@" -cp "$dir/app/$name" \
        || { rm -f "$dir/app.aot"; return 1; }
    echo "$name" > "$dir/jar-name"
}

flags() {
    local dir=$1
    [[ -s $dir/app.aot && -s $dir/jar-name ]] || return 1
    cat "$dir/run-flags"
    printf '%s\n' "${AOT_COMMON[@]}" -XX:AOTCache="$dir/app.aot" -Dspring.backgroundpreinitializer.ignore=true \
        -jar "$dir/app/$(cat "$dir/jar-name")"
}

case "${1:-}" in
    train) shift; train "${1:?jar}" "${2:?directory}" "${@:3}" ;;
    flags) flags "${2:?directory}" ;;
    dump-flags) printf '%s\n' "${AOT_DUMP[@]}" ;;
    no-code) shift; no_code "${1:?cache}" "${@:2}" ;;
    *) echo "usage: aot-cache.sh train <jar> <dir> | flags <dir> | dump-flags | no-code <cache> <flag...>" >&2; exit 2 ;;
esac
