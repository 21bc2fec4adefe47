# shellcheck shell=bash
# Sourced by the compare scripts: CPU time per operation, measured the same way for netblast
# and the tool beside it.
#
#   pinned_cost NAME CMD...   runs CMD; writes "CLIENT_S SERVER_S" to $WORK/NAME.cost: the busy
#                             seconds (user, system, interrupts; not idle) of CPU $CCPU and CPU
#                             $SCPU over the run (/proc/stat). For tests pinned to those CPUs:
#                             it holds each end's system calls and the softirq work the
#                             loopback does on its behalf, which a process's own CPU time misses
#                             in part.
#   window_cost NAME CMD...   the same busy seconds, but sampled only over the middle of the
#                             run: from COST_LEAD seconds (default 0.5) after CMD starts to
#                             COST_LEAD before $SECS end; writes "CLIENT_S SERVER_S WINDOW_S".
#                             Start-up, connection set-up and a tool's last partial interval
#                             fall outside, so a per-operation figure (divide by the tool's
#                             steady rate times WINDOW_S) charges neither tool for its
#                             fixed costs. Needs SECS >= 2 * COST_LEAD + 1.
#   process_cost NAME PIDS CMD...
#                             runs CMD under /usr/bin/time; writes "CLIENT_S SERVER_S": CMD's
#                             CPU time and that of the server processes PIDS (space-separated)
#                             over the run (/proc/PID/stat).

cpu_busy_ticks() { # CPU
  awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat
}
pinned_cost() { # name cmd...
  local name=$1; shift
  local c0 s0 c1 s1 hz
  hz=$(getconf CLK_TCK)
  c0=$(cpu_busy_ticks "$CCPU"); s0=$(cpu_busy_ticks "$SCPU")
  "$@"
  c1=$(cpu_busy_ticks "$CCPU"); s1=$(cpu_busy_ticks "$SCPU")
  echo "$c0 $c1 $s0 $s1 $hz" | awk '{ print ($2 - $1) / $5, ($4 - $3) / $5 }' >"$WORK/$name.cost"
}
window_cost() { # name cmd...
  local name=$1; shift
  local lead=${COST_LEAD:-0.5} hz c0 s0 c1 s1 t0 t1 pid rc=0
  hz=$(getconf CLK_TCK)
  "$@" &
  pid=$!
  sleep "$lead"
  c0=$(cpu_busy_ticks "$CCPU"); s0=$(cpu_busy_ticks "$SCPU"); t0=$(date +%s.%N)
  sleep "$(awk -v s="$SECS" -v l="$lead" 'BEGIN { print s - 2 * l }')"
  c1=$(cpu_busy_ticks "$CCPU"); s1=$(cpu_busy_ticks "$SCPU"); t1=$(date +%s.%N)
  wait "$pid" || rc=$?
  echo "$c0 $c1 $s0 $s1 $hz $t0 $t1" | awk '{ print ($2 - $1) / $5, ($4 - $3) / $5, $7 - $6 }' >"$WORK/$name.cost"
  return "$rc"
}
pids_cpu_s() { # pids...
  local t=0 pid
  for pid in "$@"; do
    [ -r "/proc/$pid/stat" ] && t=$((t + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$t $(getconf CLK_TCK)" | awk '{ print $1 / $2 }'
}
process_cost() { # name "pids" cmd...
  local name=$1 pids=$2; shift 2
  local s0 s1
  # shellcheck disable=SC2086 # a list of pids
  s0=$(pids_cpu_s $pids)
  /usr/bin/time -f "%U %S" -o "$WORK/$name.time" "$@"
  # shellcheck disable=SC2086
  s1=$(pids_cpu_s $pids)
  echo "$(cat "$WORK/$name.time") $s0 $s1" | awk '{ print $1 + $2, $4 - $3 }' >"$WORK/$name.cost"
}
