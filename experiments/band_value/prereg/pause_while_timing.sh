#!/usr/bin/env bash
# Pause a process group while a timing benchmark runs: SIGSTOP to the whole group while LOCK exists, SIGCONT
# when it goes, checked every 2 s; ends when the group is gone (and resumes the group if killed while it had
# paused it). start_in_background.sh starts it beside run_in_order.sh.
#
#   pause_while_timing.sh PGID LOCK LOG
set -u
pgid="$1" lock="$2" log="$3"
paused=0
trap '[ "$paused" = 1 ] && kill -CONT -- "-$pgid" 2>/dev/null; exit 0' TERM INT HUP
while kill -0 -- "-$pgid" 2>/dev/null; do
  if [ -e "$lock" ]; then
    # again every tick while the lock is there: a process the group started just before the stop is caught too
    kill -STOP -- "-$pgid" 2>/dev/null || true
    [ "$paused" = 1 ] || echo "$(date -u +%FT%TZ) watcher: $lock exists, runner group $pgid paused" >>"$log"
    paused=1
  elif [ "$paused" = 1 ]; then
    kill -CONT -- "-$pgid" 2>/dev/null || true
    echo "$(date -u +%FT%TZ) watcher: $lock gone, runner group $pgid resumed" >>"$log"
    paused=0
  fi
  sleep 2
done
echo "$(date -u +%FT%TZ) watcher: runner group $pgid ended" >>"$log"
