# Sourced by the .ci/device_* scripts (not run by CI: CI has no GPU).  Sections of one device call kept
# under the device tool's 10 minutes: `run LIMIT NAME COMMAND...` runs COMMAND under `timeout LIMIT` with its
# output in $OUT/NAME.log, only while LIMIT still fits in $BUDGET seconds from the start (else it names the
# section as skipped, for the next call: name those sections on its command line, `selected`); `show NAME
# COMMAND...` runs COMMAND when NAME's log exists.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/.out}
BUDGET=${BUDGET:-570}
mkdir -p "$OUT"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/env.txt"

# the sections a call runs: every one when SECTIONS (the caller's arguments) is empty, else those it names
selected() { [ ${#SECTIONS[@]} -eq 0 ] || [[ " ${SECTIONS[*]} " == *" $1 "* ]]; }

run() {
    local limit=$1 name=$2
    shift 2
    selected "$name" || return 0
    if [ $(( $(elapsed) + limit )) -gt "$BUDGET" ]; then
        echo "skipped $name (${limit} s would pass the ${BUDGET} s budget at $(elapsed) s)"
        return
    fi
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "$name rc=$? ($(tail -1 "$OUT/$name.log" | cut -c1-80)), $(elapsed) s"
}

show() { [ -f "$OUT/$1.log" ] && shift && "$@"; }
