# shellcheck shell=bash
# lib/proc.sh: stopping a process the script started (sourced by scripts/dockerd.sh and
# test/e2e/lib/e2e.sh). The sourcing script defines say.

# stop_pid PID SECONDS [WHAT]: SIGTERM, SIGKILL at the deadline; only for pids the script started.
stop_pid() {
	local pid=$1 secs=$2 what=${3:-pid $1} i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	say "$what still there after ${secs}s: SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	say "warning: $what still there after SIGKILL"
}
