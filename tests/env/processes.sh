# Process bookkeeping shared by tests/env/testenv.sh and tests/demo.sh (sourced, not run).
# The caller sets PIDS and LOGS (directories), STOP_TIMEOUT (seconds) and defines log and die.
#
# Every daemon is started as the leader of its own process group (setsid) and recorded in
# $PIDS/<name>.pid as "<pid> <starttime>"; only a process group whose leader still has that pid
# *and* that start time is ever signalled, so nothing that was not started here is touched.

starttime_of() { # pid -> start time in clock ticks since boot (field 22 of /proc/pid/stat)
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) } # the command name may contain spaces; cut up to the closing paren
  # shellcheck disable=SC2086
  set -- $stat
  echo "${20}"
}

# Start "$@" as a new process-group leader with output to logs/<name>.log; record the pid.
spawn() {
  local name=$1; shift
  setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
  local pid=$!
  local st
  st=$(starttime_of "$pid") || die "$name exited immediately; see $LOGS/$name.log"
  echo "$pid $st" >"$PIDS/$name.pid"
}

# Is the process recorded in pids/<name>.pid still the one we started?
recorded_alive() {
  local f=$PIDS/$1.pid pid st now
  [ -f "$f" ] || return 1
  read -r pid st <"$f" || return 1
  now=$(starttime_of "$pid") || return 1
  [ "$now" = "$st" ]
}

recorded_pid() { local pid _; read -r pid _ <"$PIDS/$1.pid"; echo "$pid"; }

# TERM the recorded process groups of the given services, wait for them with a deadline, then KILL.
stop_group() {
  local name pid pids=() deadline
  for name in "$@"; do
    if recorded_alive "$name"; then
      pid=$(recorded_pid "$name")
      log "stopping $name (pid $pid)"
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  deadline=$((SECONDS + STOP_TIMEOUT))
  for pid in "${pids[@]+"${pids[@]}"}"; do
    while kill -0 -- "-$pid" 2>/dev/null; do
      if ((SECONDS >= deadline)); then
        log "process group $pid did not stop within ${STOP_TIMEOUT}s; sending KILL"
        kill -KILL -- "-$pid" 2>/dev/null || true
        local killed=$((SECONDS + 5))
        while kill -0 -- "-$pid" 2>/dev/null && ((SECONDS < killed)); do sleep 0.1; done
        break
      fi
      sleep 0.1
    done
  done
}
