# Sourced by vcuda-run, vcuda-launch and the device checks (bash): one place that starts
# a vcuda-server and learns its port, and stops one.
#   vcuda_start_server LOG TRIES SERVER [OPTIONS...]
# starts the server in the background with its stderr in LOG, appends its pid to the
# array `pids` and waits up to TRIES x 50 ms for the line it prints once it listens
# ("... listening on [ucx://]ADDR:PORT", port 0 asked, so the kernel chose it).  Sets
# `server_port` to that port, or to "" when the server exited or never listened (its
# last log line says why).
vcuda_start_server() {
  local log=$1 tries=$2
  shift 2
  # the log exists before the first look at it (the server's own redirection happens
  # in the background job, possibly after that look)
  : >"$log" || return 1
  "$@" 2>"$log" &
  pids+=($!)
  server_port=""
  for _ in $(seq "$tries"); do
    server_port=$(sed -n 's/.*listening on \(ucx:\/\/\)\{0,1\}[^ ]*:\([0-9]*\)$/\2/p' "$log")
    [ -n "$server_port" ] && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# Waits up to SECS seconds for PID to end, then kills it and its process group (a
# stopped one is continued first, so that it can take the signal).
#   vcuda_reap PID SECS
vcuda_reap() {
  local pid=$1 secs=$2 i
  for ((i = 0; i < secs * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -CONT -- "-$pid" "$pid" 2>/dev/null
    kill -KILL -- "-$pid" "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
}

# A server started in a process group of its own (setsid: the supervisor, or the network
# loop, and its serving processes): asked to stop, then reaped within SECS seconds.
#   vcuda_stop_group PID SECS
vcuda_stop_group() {
  kill -CONT -- "-$1" 2>/dev/null
  kill -TERM -- "-$1" 2>/dev/null
  vcuda_reap "$1" "$2"
}
