#!/usr/bin/env bash
# Issue 22's bar: `bash .ci/run` on a fresh clone passes N times in a row while another process
# keeps every core busy.
#
#   benchmarks/stress_ci.sh [REV] [RUNS]      (defaults: HEAD of this clone, 5 runs)
#
# Each run clones this repository at REV into a fresh directory, makes a fresh venv and runs
# .ci/run inside it, while `stress -c $(nproc)` (Debian's `stress` package) keeps the cores
# busy. It stops at the first red run. One line per run goes to stress_ci.log in the work
# directory (STRESS_WORK, default /tmp/rageval-stress): revision, exit code, seconds, load; each
# run's output to run-N.out beside it. The real judge's build is cached outside the clones
# (~/.cache/rageval-real-judge), so only the first run on a new machine pays for it.
set -u
repo="$(cd "$(dirname "$0")/.." && pwd)"
rev=${1:-HEAD}
runs=${2:-5}
work=${STRESS_WORK:-/tmp/rageval-stress}
mkdir -p "$work"
log="$work/stress_ci.log"
command -v stress >/dev/null || { echo "needs stress (apt-get install stress)" >&2; exit 2; }
echo "start $(date -Is) rev=$(git -C "$repo" rev-parse --short "$rev") runs=$runs" >>"$log"
stress -c "$(nproc)" >/dev/null 2>&1 &
load_pid=$!
trap 'kill "$load_pid" 2>/dev/null' EXIT
status=0
for i in $(seq "$runs"); do
    rm -rf "$work/clone" "$work/venv"
    git clone -q "$repo" "$work/clone" && git -C "$work/clone" checkout -q "$rev"
    python3 -m venv "$work/venv"
    began=$(date +%s)
    (source "$work/venv/bin/activate" && cd "$work/clone" && bash .ci/run) >"$work/run-$i.out" 2>&1
    status=$?
    echo "run $i rev=$(git -C "$work/clone" rev-parse --short HEAD) rc=$status" \
        "seconds=$(($(date +%s) - began)) load=$(cut -d' ' -f1-3 /proc/loadavg) $(date -Is)" >>"$log"
    [ "$status" -eq 0 ] || break
done
echo "end $(date -Is)" >>"$log"
exit "$status"
