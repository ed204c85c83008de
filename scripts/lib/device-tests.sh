#!/usr/bin/env bash
# The device tier, run by scripts/test inside the Soft-RoCE VM (or on a host with its own RDMA device): every test
# tagged "device" of the tested modules in one JVM, then the sample application and the fresh applications. Its
# inputs come from scripts/test through the environment (the VM passes the caller's environment on):
#   DT_OUT             the output directory (reports, sample.log, sample.rc; the two-process mode:
#                      sample-server.log, sample-server2.log, sample-client.log, sample-two-process.rc)
#   DT_REPORTS         where the device tests' JUnit report goes (default $DT_OUT/reports)
#   DT_LANE            this run's name in scripts/test's lanes (several run at once, each in a VM of its own)
#   DT_LAUNCHER        junit-platform-console-standalone.jar
#   DT_CLASSPATH       the tests' class path (test classes, classes, dependencies); empty: this lane runs no
#                      device tests (only the sample, fresh applications: scripts/test checks every lane's report)
#   DT_SCAN_ROOTS      the directories whose tests run, ':'-separated (the tested modules' test classes); unset:
#                      every directory and jar of DT_CLASSPATH (which holds rdma-bindings' test-jar for the other
#                      modules: a lane of those modules would run the bindings' tests too)
#   DT_HS_ERR          the -XX:ErrorFile pattern for JVM crash logs
#   DT_SAMPLE_JAR      the sample's executable jar (skipped when missing or RDMA_TEST_SKIP_SAMPLE=1)
#   DT_SAMPLE_MESSAGES how many messages the sample exchanges
#   DT_SAMPLE_TWO_PROCESS_MESSAGES how many the sample's two-process mode exchanges (default 1200)
#   DT_SAMPLE_TWO_PROCESS_TIMEOUT  seconds each of its processes may run before it is killed (default 600)
#   DT_FRESH_APPS      the fresh application's jars (scripts/lib/fresh-app.sh), space-separated; none when empty
#   DT_INCLUDE_CLASSNAME  when set, only the device test classes matching this regex run (--include-classname)
#   DT_FRESH_READY     a file scripts/test creates once it has built those jars and the AOT caches (it builds them on
#                      the host while the device tests run); waited for, 900 s at most, before the sample and the
#                      fresh applications start
#   DT_AOT_DIR         the lane's AOT cache directory (scripts/test: lane.aot, classpath, scan; ../ready once the host is
#                      done with it, waited for 300 s at most): when it holds a cache, the device tests run from jars
#                      of the same classes with it; else (or unset) from the directories of DT_CLASSPATH
#   DT_DEPLOYMENT_JAR  the sample's jar when this lane runs the three failing starts of docs/deployment.md (in the VM,
#                      on the two-device tier); unset or empty: it does not
#   DT_SAMPLE_AOT      a directory of scripts/lib/aot-cache.sh for the sample's jar: when it holds a cache, every
#                      sample JVM runs the extracted jar with it (same application, cheaper startup); else the jar
# Exit status: the device tests'.
set -u
: "${DT_OUT:?}" "${DT_LAUNCHER:?}" "${JAVA_HOME:?}"
export RDMA_TEST_DEVICE=${RDMA_TEST_DEVICE:-${RXE_VM_DEVICE:-}}
JOPTS="${RXE_VM_JAVA_OPTS:--XX:ErrorFile=${DT_HS_ERR:-hs_err_pid%p.log}}"
# phase lines carry the wall clock, the guest uptime and the CPU the guest used since the previous line (where the
# time goes under emulation: a phase that waits more than it computes shows busy well under 100 % of its span)
cpu_busy() { # jiffies the guest's CPUs were not idle, and all jiffies (/proc/stat: idle and iowait are idle)
    local _cpu u n s i w q sq st
    read -r _cpu u n s i w q sq st _ < /proc/stat 2>/dev/null || { echo "0 0"; return; }
    echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}
read -r BUSY0 ALL0 <<< "$(cpu_busy)" # (no process substitution: the guest has no /dev/fd)
say() {
    local busy all share=""
    read -r busy all <<< "$(cpu_busy)"
    (( all > ALL0 )) && share=", busy $(( 100 * (busy - BUSY0) / (all - ALL0) ))% since the last line"
    BUSY0=$busy ALL0=$all
    echo "== $(date -u +%H:%M:%S) (up $(cut -d' ' -f1 /proc/uptime 2>/dev/null)s$share) ${DT_LANE:+lane $DT_LANE: }$*"
}
say "device tests on: $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')"

scan=(--scan-class-path)
if [[ -n "${DT_SCAN_ROOTS:-}" ]]; then
    scan=()
    IFS=: read -r -a roots <<< "$DT_SCAN_ROOTS"
    for root in "${roots[@]}"; do scan+=("--scan-class-path=$root"); done
fi
# device tests are the classes named *DeviceTest (DeviceTestNamingTests checks it): the launcher loads no other test
# class to read its tags (loading the host tests' classes cost minutes under emulation)
scan+=(--include-classname "${DT_INCLUDE_CLASSNAME:-^.*DeviceTest\$}")

# the JVM and class path: with the lane's AOT cache (DT_AOT_DIR, made by the host while this VM booted: the same tests
# from jars of the same classes, loaded and linked ahead of time), else the launcher's --class-path over the directories
launch=(-jar "$DT_LAUNCHER" execute --class-path "$DT_CLASSPATH")
if [[ -n "${DT_AOT_DIR:-}" && -n "${DT_CLASSPATH:-}" ]]; then
    waited=0
    while [[ ! -f $DT_AOT_DIR/../ready ]] && (( waited < 300 )); do sleep 1; waited=$((waited + 1)); done
    if [[ -s $DT_AOT_DIR/lane.aot && -s $DT_AOT_DIR/classpath && -s $DT_AOT_DIR/scan ]]; then
        launch=(-XX:AOTCache="$DT_AOT_DIR/lane.aot" -cp "$DT_LAUNCHER:$(cat "$DT_AOT_DIR/classpath")"
            org.junit.platform.console.ConsoleLauncher execute)
        scan=()
        while read -r jar; do scan+=("--scan-class-path=$jar"); done < "$DT_AOT_DIR/scan"
        scan+=(--include-classname "${DT_INCLUDE_CLASSNAME:-^.*DeviceTest\$}")
        say "device tests start with the AOT cache the host made ($DT_AOT_DIR/lane.aot, waited ${waited} s for it)"
    else
        say "NOTE: no AOT cache for this lane's test JVM ($DT_AOT_DIR): it starts without (slower)"
    fi
fi

# device tests are Jupiter tests: only that engine runs (jqwik's, on the class path for the host's property tests,
# would write its own report, TEST-jqwik.xml, which the verdict would read first)
run_tests() { # $1: tag, $2: reports dir, then extra launcher arguments
    local tag=$1 reports=$2
    shift 2
    # shellcheck disable=SC2086  # JOPTS holds several JVM flags
    "$JAVA_HOME/bin/java" $JOPTS --enable-native-access=ALL-UNNAMED "${launch[@]}" \
        "${scan[@]}" --include-engine junit-jupiter --include-tag "$tag" "$@" --fail-if-no-tests \
        --reports-dir "$reports" --details tree --disable-banner --disable-ansi-colors
}

# tests tagged device-admin take the link down: only on a throw-away device (the VM, or RDMA_TEST_ALLOW_DEVICE_ADMIN=1)
admin=()
if [[ "${RXE_VM:-0}" != 1 && "${RDMA_TEST_ALLOW_DEVICE_ADMIN:-0}" != 1 ]]; then
    admin=(--exclude-tag device-admin)
    echo "NOTE: tests tagged device-admin (link down/up, device removal) are not run on this host's own device;"
    echo "      they run in the Soft-RoCE VM, or here with RDMA_TEST_ALLOW_DEVICE_ADMIN=1"
fi
tests=0
if [[ -n "${DT_CLASSPATH:-}" ]]; then
    say "device tests (tag device)"
    run_tests device "${DT_REPORTS:-$DT_OUT/reports}" "${admin[@]}"
    tests=$?
    say "device tests: exit status $tests"
fi

wait_for_host() { # the host's part (fresh applications, AOT caches), built while the device tests ran
    [[ -n "${DT_FRESH_READY:-}" ]] || return 0
    local waited=0
    while [[ ! -f $DT_FRESH_READY ]] && (( waited < 900 )); do sleep 2; waited=$((waited + 2)); done
    [[ -f $DT_FRESH_READY ]] || say "the host's part (fresh applications, AOT caches) was not ready within 900 s ($DT_FRESH_READY)"
}

# docs/deployment.md's settings (scripts/lib/deployment.env, the one source the document is checked against): in the
# VM the sample and the fresh applications run as an unprivileged user with a memlock limit that fits, the device
# files opened up as udev's rule would; on a host's own device they run as the caller (nothing is changed there)
. "$(dirname "$0")/deployment.env"
SERVICE_PREFIX=""
if [[ "${RXE_VM:-0}" == 1 && $(id -u) == 0 ]]; then
    # shellcheck disable=SC2086  # a list of globs
    chmod "$DEPLOY_DEVICE_MODE" $DEPLOY_DEVICE_FILES
    # shellcheck disable=SC2086
    dpkg-query -W $DEPLOY_PACKAGES > /dev/null || say "WARNING: not every package of $DEPLOY_PACKAGES is installed"
    service_prefix() { # $1: the memlock limit in bytes; prlimit and setpriv exec the command (same pid)
        echo "prlimit --memlock=$1:$1 setpriv --reuid=$DEPLOY_USER --regid=$(id -g "$DEPLOY_USER") --clear-groups --"
    }
    SERVICE_PREFIX=$(service_prefix "$DEPLOY_MEMLOCK_BYTES")
    export FRESH_APP_PREFIX=$SERVICE_PREFIX
    say "the sample and the fresh applications run as: $SERVICE_PREFIX"
fi

if [[ -f "${DT_SAMPLE_JAR:-}" && "${RDMA_TEST_SKIP_SAMPLE:-0}" != 1 ]]; then
    wait_for_host
    # the sample's JVM flags and jar: the extracted jar with its AOT cache when the host made one
    sample_run=()
    if [[ -n "${DT_SAMPLE_AOT:-}" ]] && flags=$("$(dirname "$0")/aot-cache.sh" flags "$DT_SAMPLE_AOT"); then
        mapfile -t sample_run <<< "$flags"
    fi
    if (( ${#sample_run[@]} > 0 )); then
        echo "the sample runs extracted with an AOT cache made on the host: ${sample_run[*]}"
    else
        sample_run=(--enable-native-access=ALL-UNNAMED -jar "$DT_SAMPLE_JAR")
        echo "NOTE: no AOT cache for the sample ($DT_SAMPLE_AOT): it runs as an executable jar (slower startup)"
    fi
    say "sample application (scripts/sample), ${DT_SAMPLE_MESSAGES:-5000} messages"
    # shellcheck disable=SC2086
    $SERVICE_PREFIX "$JAVA_HOME/bin/java" $JOPTS "${sample_run[@]}" \
        --sample.messages="${DT_SAMPLE_MESSAGES:-5000}" > "$DT_OUT/sample.log" 2>&1
    echo $? > "$DT_OUT/sample.rc"
    sed -n '/== RDMA ping-pong summary ==/,$p' "$DT_OUT/sample.log"
    say "sample application: exit status $(cat "$DT_OUT/sample.rc")"
    # two-process mode (README quick start): the same jar as a server on device B and a client on device A,
    # connected through application-server.yml / application-client.yml only, with two events on the way: the
    # server stops after a third of the messages (sample.stop-after) and a second server echoes the rest; the
    # client closes its connection and opens it again with a message in flight after two thirds
    # (sample.reconnect-after). The client resends what was not echoed and fails on any missing, duplicated,
    # out-of-order or corrupt echo; every process must exit 0, within its timeout (killed after it).
    if [[ -n "${RDMA_DEVICE_A:-}" && -n "${RDMA_DEVICE_B:-}" ]]; then
        two=${DT_SAMPLE_TWO_PROCESS_MESSAGES:-1200}
        stop_after=$((two / 3)) reconnect_after=$((2 * two / 3))
        two_limit=${DT_SAMPLE_TWO_PROCESS_TIMEOUT:-600}
        say "sample application, two processes: server on $RDMA_DEVICE_B (restarted after $stop_after echoes)," \
            "client on $RDMA_DEVICE_A (reconnects after message $reconnect_after), $two messages"
        hw() { # device counter: the packets a device sent or received
            cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2" 2>/dev/null || echo 0
        }
        declare -A pkts0
        for d in "$RDMA_DEVICE_A" "$RDMA_DEVICE_B"; do
            for c in sent_pkts rcvd_pkts; do pkts0[$d.$c]=$(hw "$d" $c); done
        done
        sample_two() { # $1: log, then the sample's arguments; bounded: TERM at the limit, KILL 10 s later
            local log=$1
            shift
            # shellcheck disable=SC2086
            timeout -k 10 "$two_limit" $SERVICE_PREFIX "$JAVA_HOME/bin/java" $JOPTS "${sample_run[@]}" --sample.messages="$two" --sample.timeout="$((two_limit - 30))s" "$@" \
                > "$log" 2>&1
        }
        sample_two "$DT_OUT/sample-server.log" --spring.profiles.active=server --sample.stop-after="$stop_after" &
        server_pid=$!
        sample_two "$DT_OUT/sample-client.log" --spring.profiles.active=client \
            --sample.reconnect-after="$reconnect_after" &
        client_pid=$!
        wait "$server_pid"
        server_rc=$?
        say "sample application, two processes: the first server exited ($server_rc); starting the second"
        sample_two "$DT_OUT/sample-server2.log" --spring.profiles.active=server &
        server2_pid=$!
        wait "$client_pid"
        client_rc=$?
        # the second server ends once the client is gone (having had the last message); if the client failed
        # before that, the server would wait for its timeout: 60 s, then TERM (timeout passes it on)
        ( sleep 60 && kill "$server2_pid" ) 2>/dev/null &
        grace_pid=$!
        wait "$server2_pid"
        server2_rc=$?
        pkill -P "$grace_pid" sleep 2>/dev/null # its sleep ends early: no kill
        wait "$grace_pid" 2>/dev/null
        # the devices that carried the traffic: each sent and received at least one packet per message
        traffic_rc=0
        for d in "$RDMA_DEVICE_A" "$RDMA_DEVICE_B"; do
            line="$d:"
            for c in sent_pkts rcvd_pkts; do
                delta=$(( $(hw "$d" $c) - ${pkts0[$d.$c]} ))
                line+=" $c +$delta"
                (( delta >= two )) || traffic_rc=1
            done
            echo "$line (hw_counters, at least $two each expected)"
        done
        echo "client $client_rc server $server_rc server2 $server2_rc traffic $traffic_rc" \
            > "$DT_OUT/sample-two-process.rc"
        sed -n '/== RDMA two-process summary/,$p' "$DT_OUT/sample-server.log" "$DT_OUT/sample-server2.log" \
            "$DT_OUT/sample-client.log"
        say "sample application, two processes: $(cat "$DT_OUT/sample-two-process.rc")"
    else
        echo "client missing server missing server2 missing traffic missing (no RDMA_DEVICE_A/_B: not the two-device tier)" \
            > "$DT_OUT/sample-two-process.rc"
    fi
fi

# the three failing starts of docs/deployment.md (DT_DEPLOYMENT_JAR: the sample's jar, in the lane scripts/test gives
# them to; with the sample's AOT cache when the host made one)
if [[ -n $SERVICE_PREFIX && -n "${RDMA_DEVICE_B:-}" && -f "${DT_DEPLOYMENT_JAR:-}" ]]; then
    wait_for_host
    deploy_run=()
    if [[ -n "${DT_SAMPLE_AOT:-}" ]] && flags=$("$(dirname "$0")/aot-cache.sh" flags "$DT_SAMPLE_AOT"); then
        mapfile -t deploy_run <<< "$flags"
    else
        deploy_run=(--enable-native-access=ALL-UNNAMED -jar "$DT_DEPLOYMENT_JAR")
    fi
    say "deployment failures (docs/deployment.md): memlock 8 MiB, memlock 64 KiB, device files closed, at once"
    DT_JOPTS=$JOPTS "$(dirname "$0")/deployment-failures.sh" "${deploy_run[@]}"
fi

# the fresh application of README "Using it in your own application", one jar per Spring Boot version, started
# together with --illegal-native-access=deny (scripts/lib/fresh-app.sh run); scripts/test reads the results
if [[ -n "${DT_FRESH_APPS:-}" ]]; then
    wait_for_host
    say "fresh applications (README quick start): $DT_FRESH_APPS"
    port=18080
    fresh=()
    for jar in $DT_FRESH_APPS; do
        name=$(basename "$(dirname "$(dirname "$jar")")")
        # the port is counted here: an expansion in the backgrounded command would happen in its subshell
        app_port=$port
        port=$((port + 1))
        "$(dirname "$0")/fresh-app.sh" run "$jar" "$app_port" "$DT_OUT/fresh-app-$name.log" \
            > "$DT_OUT/fresh-app-$name.result" 2>&1 &
        fresh+=($!)
    done
    wait "${fresh[@]}"
    for jar in $DT_FRESH_APPS; do cat "$DT_OUT/fresh-app-$(basename "$(dirname "$(dirname "$jar")")").result"; done
    say "fresh applications done"
fi

exit $tests
