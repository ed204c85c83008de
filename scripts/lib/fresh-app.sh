#!/usr/bin/env bash
# The fresh application of README "Using it in your own application": built outside the reactor as a new user
# builds it, and run as an executable jar with --illegal-native-access=deny and no other JVM flag of its own (in the
# Soft-RoCE VM it gets the emulator's $RXE_VM_JAVA_OPTS, as every guest JVM does: C1 only, much faster to start a
# Spring Boot application under emulation, and the crash-log path the VM checks). scripts/test runs one application
# exactly so (Spring Boot 4.1.x, the README's `java -jar`) and the other (4.0.x) the way Boot documents for efficient
# deployment: extracted and started with an AOT cache ("fresh-app.sh aot"), which also proves that way works.
#
#   fresh-app.sh build <boot-version> <dir>   (host) copy scripts/fresh-app to <dir>, add the README's application.yml
#                                             and listener (the blocks marked <!-- fresh-app: PATH --> in README.md),
#                                             set spring-boot-starter-parent to <boot-version>, build <dir>/target/demo.jar
#                                             against the starter in the local Maven repository (./mvnw install first)
#   fresh-app.sh boot3 <boot-version> <dir>   (host) the same application on Spring Boot 3.x: startup must fail naming
#                                             the required Spring Boot version
#   fresh-app.sh aot <dir>                    (host) extract <dir>/target/demo.jar and make its AOT cache in <dir>/aot
#                                             (scripts/lib/aot-cache.sh): the next run starts it the way Spring Boot
#                                             documents for efficient deployment, extracted with the cache
#   fresh-app.sh run <jar> <port> <log>       (device tier) start the jar on the device, wait until the README's
#                                             listener got the test traffic's completions, then check over HTTP that
#                                             /actuator/health shows rdma UP and /actuator/metrics/rdma.completions
#                                             counts them; stop the application. Prints one PASS or FAIL line; exit 0
#                                             only on PASS.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

build() {
    local boot=$1 dir=$2 web=${3:-}
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r "$ROOT/scripts/fresh-app/." "$dir/"
    # every README block preceded by <!-- fresh-app: PATH --> becomes the file PATH of the application
    awk -v dir="$dir" '
        /^<!-- fresh-app: .* -->$/ { path = $3; next }
        path != "" && /^```/ && !inblock {
            inblock = 1; out = dir "/" path; d = out; sub(/\/[^\/]*$/, "", d); system("mkdir -p \"" d "\"")
            printf "" > out; next
        }
        inblock && /^```/ { inblock = 0; close(out); path = ""; next }
        inblock { print >> out }
    ' "$ROOT/README.md"
    sed -i "s|<version>[^<]*</version><!-- fresh-app: boot version -->|<version>$boot</version>|" "$dir/pom.xml"
    grep -q "<version>$boot</version>" "$dir/pom.xml" || { echo "fresh-app: could not set Boot $boot" >&2; return 1; }
    [[ -n $web ]] && sed -i "s|<artifactId>spring-boot-starter-webmvc</artifactId>|<artifactId>$web</artifactId>|" "$dir/pom.xml"
    "$ROOT/mvnw" -B -q --no-transfer-progress -f "$dir/pom.xml" package -DskipTests
}

run() {
    local jar=$1 port=$2 log=$3 java=${JAVA_HOME:?}/bin/java
    local name
    name=$(basename "$(dirname "$(dirname "$jar")")")
    local -a launch=(--illegal-native-access=deny -jar "$jar")
    local flags
    # next to target/: the AOT cache of "fresh-app.sh aot", if one was made (flags end with -jar <extracted jar>)
    if flags=$("$ROOT/scripts/lib/aot-cache.sh" flags "$(dirname "$(dirname "$jar")")/aot"); then
        mapfile -t launch <<< "$flags"
    fi
    echo "fresh-app: java ${launch[*]}" > "$log.launch"
    # shellcheck disable=SC2086
    # FRESH_APP_PREFIX: how the device tier runs it as a service (an unprivileged user, a memlock limit; words that
    # exec the JVM, so that $! stays its pid)
    ${FRESH_APP_PREFIX:-} "$java" ${RXE_VM_JAVA_OPTS:-} "${launch[@]}" --server.port="$port" > "$log" 2>&1 &
    local pid=$! verdict="" health="" metric=""
    local deadline=$((SECONDS + ${FRESH_APP_TIMEOUT:-900}))
    while (( SECONDS < deadline )); do
        if ! kill -0 "$pid" 2>/dev/null; then verdict="the application exited"; break; fi
        if grep -q "fresh-app: traffic FAILED" "$log"; then verdict="$(grep -m1 'traffic FAILED' "$log")"; break; fi
        grep -q "fresh-app: .* completions received by the listener" "$log" && break
        sleep 2
    done
    if [[ -z $verdict ]] && ! grep -q "fresh-app: .* completions received by the listener" "$log"; then
        verdict="no completions within ${FRESH_APP_TIMEOUT:-900}s"
    fi
    if [[ -z $verdict ]]; then
        # the first requests initialise the dispatcher servlet: minutes under emulation
        health=$(curl -s --max-time 180 "http://127.0.0.1:$port/actuator/health")
        metric=$(curl -s --max-time 180 "http://127.0.0.1:$port/actuator/metrics/rdma.completions")
        local count expected
        count=$(sed -n 's/.*"statistic":"COUNT","value":\([0-9.]*\).*/\1/p' <<< "$metric")
        expected=$(sed -n 's/.*fresh-app: \([0-9]*\) completions received by the listener.*/\1/p' "$log" | head -1)
        if [[ $health != *'"rdma":{"status":"UP"'* ]]; then
            verdict="/actuator/health does not show rdma UP: $health"
        elif [[ -z $count || ${count%.*} != "$expected" ]]; then
            verdict="/actuator/metrics/rdma.completions counts '${count}', the listener got $expected: $metric"
        elif grep -q -e "Native access is not enabled" -e "WARNING: A restricted method" "$log"; then
            verdict="native access warning: $(grep -m1 -e 'Native access' -e 'restricted method' "$log")"
        fi
    fi
    # on failure, where the application was (under emulation, a start that is only slow is told from one that hangs)
    [[ -n $verdict ]] && kill -0 "$pid" 2>/dev/null && "${JAVA_HOME}/bin/jcmd" "$pid" Thread.print 2>/dev/null \
        | sed -n '/^"main"/,/^$/p' | head -40 > "$log.main-thread"
    kill "$pid" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    if [[ -z $verdict ]]; then
        local how="an executable jar"
        [[ ${launch[*]} == *AOTCache=* ]] && how="the extracted jar with an AOT cache"
        echo "FRESH-APP $name: PASS (started as $how with --illegal-native-access=deny, listener got ${count%.*} completions," \
            "rdma UP, rdma.completions=${count%.*})"
        return 0
    fi
    echo "FRESH-APP $name: FAIL: $verdict"
    tail -30 "$log"
    cat "$log.main-thread" 2>/dev/null
    return 1
}

# Spring Boot 3.x is not supported: the same application (web starter under its 3.x name) must fail at startup with
# the starter's message naming the required version, before anything native (no device needed: runs on the host)
boot3() {
    local boot=$1 dir=$2
    build "$boot" "$dir" spring-boot-starter-web || { echo "FRESH-APP boot-$boot: FAIL: the build failed"; return 1; }
    timeout 120 "${JAVA_HOME:?}/bin/java" -jar "$dir/target/demo.jar" --server.port=0 > "$dir/run.log" 2>&1
    local rc=$?
    local expected="rdma-spring-boot-starter needs Spring Boot 4.0.x and 4.1.x, but this application runs Spring Boot $boot"
    if [[ $rc != 0 && $rc != 124 ]] && grep -qF "$expected" "$dir/run.log"; then
        echo "FRESH-APP boot-$boot: PASS (startup fails, exit status $rc: $expected)"
        return 0
    fi
    echo "FRESH-APP boot-$boot: FAIL: exit status $rc, without '$expected'"
    tail -30 "$dir/run.log"
    return 1
}

aot() {
    local dir=$1
    "$ROOT/scripts/lib/aot-cache.sh" train "$dir/target/demo.jar" "$dir/aot" --illegal-native-access=deny
}

case "${1:-}" in
    build) build "${2:?boot version}" "${3:?directory}" ;;
    aot) aot "${2:?directory}" ;;
    boot3) boot3 "${2:?boot version}" "${3:?directory}" ;;
    run) run "${2:?jar}" "${3:?port}" "${4:?log}" ;;
    *) echo "usage: fresh-app.sh build|boot3 <boot-version> <dir> | aot <dir> | run <jar> <port> <log>" >&2; exit 2 ;;
esac
