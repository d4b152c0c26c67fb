#!/usr/bin/env bash
# Start run_in_order.sh in the background, at the lowest CPU priority, in its own session (so its process group
# holds the runner and everything it starts: dvc, vLLM, the verify workers, the trainer), logging to a file
# outside the repository; and beside it a watcher that pauses that whole group while a timing benchmark runs
# (the file timing.lock exists: SIGSTOP) and resumes it when the file goes (SIGCONT), checking every 2 s.
# A run is never measured beside a timing benchmark (../PREREGISTRATION.md); a paused run loses nothing.
#
#   experiments/band_value/prereg/start_in_background.sh [LOG] [LOCK] [RUNNER]
#   (defaults: /work/notes/band_value_runs.log, /work/notes/timing.lock, this folder's run_in_order.sh; the gated
#   design's runner is ../gated/run_in_order.sh)
#
# Prints the runner's process group and the watcher's pid. Stop both: kill -- -<runner pgid>; the watcher
# (pause_while_timing.sh) ends by itself once the group is gone (and sends SIGCONT first if it had paused it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
log="${1:-/work/notes/band_value_runs.log}"
lock="${2:-/work/notes/timing.lock}"
runner="$(cd "$(dirname "${3:-$here/run_in_order.sh}")" && pwd)/$(basename "${3:-$here/run_in_order.sh}")"
pidfile="$(mktemp)"
cd "$repo"
export PATH="$repo/.venv/bin:$PATH"
unset PYTHONPATH  # run_in_order.sh puts the pinned passband on the path itself
echo "$(date -u +%FT%TZ) start_in_background: $runner from $repo" >>"$log"
# setsid: a new session and process group whose id is this bash's pid (written before exec)
# nice alone is not enough where the kernel groups CPU time by session (sched_autogroup_enabled = 1): the new
# session is an autogroup that gets an equal share beside every other session whatever its processes' nice, so the
# autogroup itself is niced too
setsid bash -c 'echo $$ >"$1"; echo 19 >/proc/self/autogroup 2>/dev/null || true; exec nice -n 19 bash "$2"' _ \
  "$pidfile" "$runner" \
  >>"$log" 2>&1 </dev/null &
for _ in $(seq 50); do [ -s "$pidfile" ] && break; sleep 0.1; done
pgid="$(cat "$pidfile")"
rm -f "$pidfile"

# the watcher in a session of its own too: it outlives the shell that started it, and is not in the group it stops
setsid bash "$here/pause_while_timing.sh" "$pgid" "$lock" "$log" </dev/null >/dev/null 2>&1 &
watcher=$!
disown -a
echo "runner process group: $pgid  watcher pid: $watcher  log: $log"
echo "$(date -u +%FT%TZ) start_in_background: runner process group $pgid, watcher pid $watcher" >>"$log"
