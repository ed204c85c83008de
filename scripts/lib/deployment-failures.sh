#!/usr/bin/env bash
# The three failing starts of docs/deployment.md, run by scripts/lib/device-tests.sh in the VM after the sample (as
# root: it switches to the service user itself). Arguments: the sample's JVM flags and jar. Environment: DT_OUT (the
# logs, deployment.result), DT_JOPTS (the VM's JVM flags), JAVA_HOME. Exit status 0; scripts/test reads the result.
set -u
: "${DT_OUT:?}" "${JAVA_HOME:?}"
. "$(dirname "$0")/deployment.env"
JOPTS=${DT_JOPTS:-}
say() { echo "== $(date -u +%H:%M:%S) ${DT_LANE:+lane $DT_LANE: }$*"; }
service_prefix() { # $1: the memlock limit in bytes; prlimit and setpriv exec the command (same pid)
    echo "prlimit --memlock=$1:$1 setpriv --reuid=$DEPLOY_USER --regid=$(id -g "$DEPLOY_USER") --clear-groups --"
}
# three short failing starts of the sample's jar, as the service user, at once: a limit of 8 MiB under a configuration
# that needs more, 64 KiB under the server profile's defaults, and the device files closed to the user; each must
# exit non-zero within its bound (DT_DEPLOYMENT_BOUND, 600 s: three JVMs at once under emulation) and print the numbers and the fix (scripts/test reads deployment.result)
bound=${DT_DEPLOYMENT_BOUND:-600} started=$SECONDS pids=()
uverbs=(/dev/infiniband/uverbs*)
sample_jvm=("$@")
fail_start() { # $1: name, $2: memlock bytes, then the sample's arguments
    local name=$1 memlock=$2 t0=$SECONDS
    shift 2
    # shellcheck disable=SC2086,SC2046
    timeout -k 5 "$bound" $(service_prefix "$memlock") "$JAVA_HOME/bin/java" $JOPTS $DEPLOY_JVM_FLAGS \
        "${sample_jvm[@]}" "$@" > "$DT_OUT/deployment-$name.log" 2>&1
    echo "$? $((SECONDS - t0))" > "$DT_OUT/deployment-$name.rc"
}
fail_start memlock-8m 8388608 --spring.profiles.active=server --rdma.connections.pingpong.max-peers=8 \
    --rdma.connections.pingpong.message-size=16384 &
pids+=($!)
fail_start memlock-64k 65536 --spring.profiles.active=server &
pids+=($!)
chmod 0600 "${uverbs[@]}"
fail_start device-files "$DEPLOY_MEMLOCK_BYTES" --sample.messages=10 &
pids+=($!)
wait "${pids[@]}"
chmod "$DEPLOY_DEVICE_MODE" "${uverbs[@]}"
: > "$DT_OUT/deployment.result"
check() { # $1: name, then the texts its log must hold
    local name=$1 text verdict=""
    shift
    read -r rc secs < "$DT_OUT/deployment-$name.rc"
    if [[ $rc == 0 || $rc == 124 || $rc == 137 || $rc == 143 ]]; then verdict="exit status $rc (must fail at startup)"; fi
    for text in "$@"; do
        grep -qF -- "$text" "$DT_OUT/deployment-$name.log" || verdict+="${verdict:+; }no '$text' in its log"
    done
    if [[ -z $verdict ]]; then
        echo "DEPLOYMENT $name: PASS (failed at startup in ${secs}s, exit status $rc)" >> "$DT_OUT/deployment.result"
    else
        echo "DEPLOYMENT $name: FAIL: $verdict" >> "$DT_OUT/deployment.result"
        tail -30 "$DT_OUT/deployment-$name.log"
    fi
}
check memlock-8m "APPLICATION FAILED TO START" "of locked memory, more than the 8388608 bytes (8 MiB, RLIMIT_MEMLOCK)" \
    "Property: rdma.connections.pingpong.message-size" "docker run --ulimit memlock=-1" "LimitMEMLOCK=infinity"
check memlock-64k "APPLICATION FAILED TO START" "of locked memory, more than the 65536 bytes (64 KiB, RLIMIT_MEMLOCK)" \
    "docker run --ulimit memlock=-1"
check device-files "APPLICATION FAILED TO START" "failed: no access to its device file" "/dev/infiniband/uverbs" \
    "cannot be opened by user $DEPLOY_USER" "--device=/dev/infiniband/uverbsN"
cat "$DT_OUT/deployment.result"
say "deployment failures: three starts at once in $((SECONDS - started))s"

