# shellcheck shell=bash
# run_failed is read by the sourcing scripts; rdir is theirs.
# shellcheck disable=SC2034,SC2154
# lib/e2e.sh: the harness the end-to-end scripts share (sourced, never run). It gives:
#   - output: say (progress on fd 3, the script's stderr), die, detail, pass, fail, skip; every
#     check prints `ok - [TAG] ...` or `not ok - [TAG] ...` and counts in PASSED / FAILED;
#   - checks: check, check_v, check_here, refused; poll; now_ms, took;
#   - processes and the engine: dk (the docker CLI with a deadline), stop_pid;
#   - small predicates: link_absent, entries.
# What it reads from the sourcing script: tag (the run's label), rdir (a temp dir of the run, for
# check_here), CMD_TIMEOUT (seconds a docker command may take; default 90). It sets PASSED,
# FAILED, run_failed and t_start, and opens fd 3 on the script's stderr.

PASSED=0
FAILED=0
run_failed=""
t_start=$(date +%s)
tag=${tag:-setup}
CMD_TIMEOUT=${CMD_TIMEOUT:-90}

# Progress goes to fd 3, the script's stderr, also from steps whose output a check captures.
exec 3>&2
say() { printf '%s +%4ds [%s] %s\n' "$(date +%H:%M:%S)" "$(($(date +%s) - t_start))" "$tag" "$*" >&3; }
die() { say "error: $*"; exit 1; }

# detail prints its arguments as indented comment lines (at most 15 lines each).
detail() {
	local s
	for s in "$@"; do
		[[ -n $s ]] || continue
		printf '%s\n' "$s" | head -n 15 | sed 's/^/#   /'
	done
}
pass() { PASSED=$((PASSED + 1)); printf 'ok - [%s] %s\n' "$tag" "$1"; shift; detail "$@"; }
fail() { FAILED=$((FAILED + 1)); run_failed=1; printf 'not ok - [%s] %s\n' "$tag" "$1"; shift; detail "$@"; }
skip() { printf '# skip - [%s] %s\n' "$tag" "$*"; }

# check DESC CMD...: one check; the output of a failing CMD is shown under it. CMD runs in a
# subshell: use check_here for steps that record state (pids).
check() {
	local desc=$1 out t0
	shift
	t0=$(now_ms)
	if out=$("$@" 2>&1); then pass "$desc$(took "$t0")"; else fail "$desc$(took "$t0")" "$out"; fi
}

# check_v DESC CMD...: check, showing CMD's output under a pass too.
check_v() {
	local desc=$1 out t0
	shift
	t0=$(now_ms)
	if out=$("$@" 2>&1); then pass "$desc$(took "$t0")" "$out"; else fail "$desc$(took "$t0")" "$out"; fi
}

# check_here DESC CMD...: check, with CMD run in this shell (its output goes to $rdir/step.out).
check_here() {
	local desc=$1 t0
	shift
	t0=$(now_ms)
	if "$@" >"$rdir/step.out" 2>&1; then
		pass "$desc$(took "$t0")"
	else
		fail "$desc$(took "$t0")" "$(cat "$rdir/step.out")"
	fi
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# took T0 prints " (N.N s)" when more than a second passed since T0 (ms).
took() {
	local ms=$(($(now_ms) - $1))
	((ms < 1000)) || printf ' (%d.%d s)' $((ms / 1000)) $((ms % 1000 / 100))
}

# poll SECONDS CMD...: runs CMD every 0.2 s until it succeeds; fails at the deadline with CMD's
# last output on stdout.
poll() {
	local secs=$1 end out
	shift
	end=$(($(date +%s%N) / 1000000 + secs * 1000))
	while :; do
		if out=$("$@" 2>&1); then return 0; fi
		if (($(date +%s%N) / 1000000 >= end)); then
			printf '%s\n(still failing after %ss)\n' "$out" "$secs"
			return 1
		fi
		sleep 0.2
	done
}

# dk runs the docker CLI ($DOCKER_CLI, default docker from PATH) with a deadline, without its
# warning about IPv4 forwarding (disabled on purpose in the private engines).
dk() {
	timeout -k 5 "$CMD_TIMEOUT" "${DOCKER_CLI:-docker}" "$@" 2> >(grep -v 'IPv4 forwarding is disabled' >&2 || true)
}

# stop_pid PID SECONDS: SIGTERM, SIGKILL at the deadline; only for pids the script started.
stop_pid() {
	local pid=$1 secs=$2 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	say "pid $pid still there after ${secs}s: SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
}

# refused DESC WANT... -- CMD...: CMD fails and its output (the docker CLI's) contains every WANT.
refused() {
	local desc=$1 out w miss=""
	local -a want=()
	shift
	while [[ $1 != -- ]]; do want+=("$1"); shift; done
	shift
	if out=$("$@" 2>&1); then
		fail "$desc: accepted, want a refusal" "$out"
		return 0
	fi
	for w in "${want[@]}"; do grep -qF -- "$w" <<<"$out" || miss+=" '$w'"; done
	if [[ -z $miss ]]; then pass "$desc" "docker said: $out"; else fail "$desc: the CLI does not show$miss" "$out"; fi
}

link_absent() { ! ip link show dev "$1" 2>/dev/null; }

# entries DIR: the names in DIR, one a line, sorted; nothing when DIR is missing.
entries() { { find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null || true; } | sort; }

# restart_dockerd DIR stops the private dockerd of scripts/dockerd.sh in DIR by its pid
# (containerd keeps running) and starts the same command line again, in the same network
# namespace, keeping its data root; scripts/dockerd.sh stop finds the new pid.
restart_dockerd() {
	local dir=$1 pid path t0
	local -a argv pre=()
	pid=$(cat "$dir/dockerd.spawned")
	[[ $(readlink "/proc/$pid/exe") == */dockerd ]] || { echo "pid $pid is not our dockerd"; return 1; }
	mapfile -d '' -t argv <"/proc/$pid/cmdline"
	path=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^PATH=//p')
	[[ -s $dir/netns ]] && pre=(nsenter "--net=/run/netns/$(cat "$dir/netns")")
	t0=$(date +%s%N)
	stop_pid "$pid" 40
	say "dockerd stopped in $((($(date +%s%N) - t0) / 1000000)) ms; starting it again"
	PATH=$path setsid "${pre[@]}" "${argv[@]}" </dev/null >>"$dir/dockerd.log" 2>&1 &
	printf '%s\n' "$!" >"$dir/dockerd.spawned"
	poll 60 env DOCKER_HOST="unix://$dir/docker.sock" docker info --format '{{.ServerVersion}}' >/dev/null ||
		{ echo "dockerd did not answer again"; return 1; }
	say "dockerd answers again after $((($(date +%s%N) - t0) / 1000000)) ms"
}

# e2e_traps installs the exit handling of a suite: on any exit the sourcing script's teardown
# runs, $work (the suite's temp dir, if set) goes, and the summary (`# time` lines from the
# timings array, then `N passed, N failed`) is printed once; an interrupt or a step failing
# outside the checks counts as a failed check. The exit status is 1 when a check failed.
summary_done=""
timings=()
summary() {
	local t
	tag="summary"
	for t in "${timings[@]}"; do printf '# time %s\n' "$t"; done
	printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
	summary_done=1
}
on_exit() {
	local rc=$?
	trap - EXIT ERR
	if ((rc == 130)) && [[ -z $summary_done ]]; then
		fail "interrupted"
	elif ((rc != 0)) && [[ -z $summary_done ]]; then
		fail "aborted: a step outside the checks failed (exit $rc; see the lines above)"
	fi
	teardown
	[[ -n ${work:-} ]] && rm -rf --one-file-system "$work"
	[[ -n $summary_done ]] || summary
	((rc == 0)) || exit "$rc"
	((FAILED == 0)) || exit 1
}
# on_err says where a step outside the checks failed.
on_err() { say "command failed (exit $?): $BASH_COMMAND"; }
e2e_traps() {
	trap on_exit EXIT
	trap 'exit 130' INT TERM
	trap on_err ERR
}

# A local registry (Debian's docker-registry, on 127.0.0.1 only) for `docker plugin push/install`.
# registry_bin prints the path of a docker-registry binary: the one on PATH, or Debian's, fetched
# with apt-get download and unpacked into $RDMA_MACVLAN_CACHE/registry (default
# /var/cache/rdma-macvlan; the package is never installed, so no service and no user is made).
# Uses $work (the suite's temp dir) for the download.
registry_bin() {
	local cache=${RDMA_MACVLAN_CACHE:-/var/cache/rdma-macvlan} tmp deb bin
	bin=$cache/registry/docker-registry
	if command -v docker-registry >/dev/null; then command -v docker-registry; return 0; fi
	if [[ -x $bin ]]; then printf '%s\n' "$bin"; return 0; fi
	tmp=$(mktemp -d "$work/deb.XXXXXX")
	say "fetching Debian's docker-registry (unpacked into $cache/registry, not installed)"
	if ! (cd "$tmp" && apt-get download docker-registry >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && apt-get download docker-registry >/dev/null 2>&1; }); then
		rm -rf "$tmp"
		echo "apt-get download docker-registry failed"
		return 1
	fi
	deb=$(find "$tmp" -maxdepth 1 -name 'docker-registry_*.deb' | head -n 1)
	dpkg-deb -x "$deb" "$tmp/x"
	mkdir -p "$cache/registry"
	install -m 0755 "$tmp/x/usr/bin/docker-registry" "$bin.new"
	mv -f "$bin.new" "$bin"
	rm -rf "$tmp"
	printf '%s\n' "$bin"
}

# registry_start BIN DIR: a registry on a free port of 127.0.0.1 with its storage and log in DIR.
# Sets reg (127.0.0.1:PORT) and reg_pid; run it in the script's shell. registry_stop ends it.
reg=""
reg_pid=""
registry_start() {
	local bin=$1 dir=$2 port n
	for ((n = 0; n < 20; n++)); do
		port=$((20000 + RANDOM % 20000))
		ss -Hltn "sport = :$port" | grep -q . || break
	done
	mkdir -p "$dir/data"
	cat >"$dir/config.yml" <<EOC
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/data
http:
  addr: 127.0.0.1:$port
  secret: rmv-$RANDOM$RANDOM
EOC
	setsid "$bin" serve "$dir/config.yml" </dev/null >"$dir/log" 2>&1 &
	reg_pid=$!
	reg=127.0.0.1:$port
	poll 15 registry_up || { cat "$dir/log"; return 1; }
}

# registry_up: the registry answers its API root (bash's /dev/tcp; no curl needed).
registry_up() {
	local host=${reg%:*} port=${reg#*:} line
	exec 5<>"/dev/tcp/$host/$port" || return 1
	printf 'GET /v2/ HTTP/1.0\r\nHost: %s\r\n\r\n' "$reg" >&5
	read -r line <&5 || true
	exec 5<&- 5>&-
	[[ $line == *" 200 "* ]] || { echo "registry answered: $line"; return 1; }
}

registry_stop() {
	if [[ -n $reg_pid ]]; then
		stop_pid "$reg_pid" 10
		wait "$reg_pid" 2>/dev/null || true
		reg_pid=""
	fi
	return 0
}

# readme_block NAME: the lines of the README's code block that follows the line
# `<!-- e2e:NAME -->`, so that a test runs exactly what the README tells users.
readme_block() {
	awk -v m="<!-- e2e:$1 -->" '
		$0 == m { on = 1; next }
		on == 1 && /^```/ { on = 2; next }
		on == 2 && /^```/ { exit }
		on == 2 { print }' "${repo:?}/README.md"
}

# select_engines [ENGINE...]: sets engines to the engines named (debian, current), or by default to
# debian and, when scripts/engines.sh has built it, current.
engines=()
select_engines() {
	local e
	engines=("$@")
	if ((${#engines[@]} == 0)); then
		engines=(debian)
		if bash "$here/engines.sh" bindir >/dev/null 2>&1; then
			engines+=(current)
		else
			printf '# skip - the current engine is not built (scripts/engines.sh install current): debian only\n'
		fi
	fi
	for e in "${engines[@]}"; do
		[[ $e == debian || $e == current ]] || die "unknown engine '$e' (want: debian, current)"
	done
}
