#!/usr/bin/env bash
# e2e-reliability.sh: reliability of the managed rdma-macvlan plugin against real Docker engines:
# concurrency, a dockerd restart with --live-restore and a plugin upgrade (issue 7). The restart
# without live-restore and plugin disable/enable are in scripts/e2e.sh and not repeated here.
#
# For each engine: a veth pair in the host netns as the RoCE parent (unique names, both ends up),
# a fake mlx5 sysfs tree for it with 255 GID slots (rdma/rdmatest/fakesysfs: admission allows 126
# IPv4 containers at 2 entries each), a private dockerd started with --live-restore
# (scripts/dockerd.sh), the busybox image (scripts/mkimage.sh) and the plugin built from the working
# tree and installed as a managed plugin (scripts/plugin.sh). Then:
#   1. concurrency: E2E_CONCURRENT (50) `docker run -d` at once on one network, then as many
#      `docker rm -f` at once: no error, unique addresses, exactly one macvlan link (eth0) in each
#      container's netns and none left in the host netns, /v1/status and the state dir agree;
#      nothing left after the removals. Wall times are reported.
#   2. dockerd restarted with --live-restore under two containers pinging each other: they keep
#      running (same pids) and pinging while dockerd is down and after, the network takes a new
#      container, the old ones stop and go, nothing leaks.
#   3. plugin upgrade from one build to the next (each build a new rootfs with a marker file) with
#      a network and a running container: (a) `docker plugin upgrade` from a registry on 127.0.0.1
#      (Debian's docker-registry, unpacked into the cache, never installed), after recording that
#      the engine refuses it while enabled and from a plugin that exists only locally; (b) remove
#      and re-create under the same name with the same settings (what `make install` does). After
#      each the old container still pings, a new one gets an address and pings it, the old one can
#      be removed, /v1/status still lists the network.
# The dockerd runs with --live-restore for the whole run, so 1. and 3. hold on such an engine too.
# Every check prints `ok - ...` or `not ok - ...`; the last line is `N passed, N failed`.
#
# What the engines do (Docker 20.10.24 and moby v2.0.0-beta.24 alike; each one a check here):
#   - `docker plugin upgrade` needs the plugin disabled ("the plugin must be disabled before
#     upgrading") and pulls from a registry: a plugin the engine has locally under that reference
#     is not used. From another repository name the CLI asks "Plugin images do not match, are you
#     sure? [y/N]" and, with no answer, upgrades nothing and exits 0: pass --skip-remote-check.
#   - After `docker plugin upgrade` the engine runs the plugin with the new manifest's mount
#     sources (the defaults), although `docker plugin inspect` still shows the set ones under
#     .Settings; id, name and env settings stay. Set state.source, cdi.source and sysfs.source
#     again before `docker plugin enable`, or the plugin starts on /var/lib/rdma-macvlan.
#   - Remove and re-create under the same name (`docker plugin rm -f`, `make install`, the same
#     `docker plugin set`, enable) works: new id and socket, the networks and running containers
#     carry over through the state dir.
#   - `docker plugin disable` or `rm` without -f refuse a plugin a network uses ("... is in use")
#     only until dockerd restarts; after a restart both are accepted.
#   - With --live-restore the plugin's process runs on through a dockerd restart.
#
# Needs: root, Go, apt (scripts/engines.sh installs Debian's engine; the current one must have been
#   built by `scripts/engines.sh install current`), iproute2, nsenter, busybox-static, ss.
# Leaves behind: nothing of a run (links, processes, mounts, sockets, plugin dirs, temp dirs), also
#   when a step fails; only what scripts/engines.sh installs and, on purpose, the docker-registry
#   binary cached under $RDMA_MACVLAN_CACHE/registry (default /var/cache/rdma-macvlan).
#
# Usage: e2e-reliability.sh [debian] [current]   (default: both if the current engine is built,
#                                                 else debian)
# Environment:
#   E2E_CONCURRENT        containers started and removed at once (default 50)
#   E2E_UPGRADE_REGISTRY  auto (default): fetch docker-registry when not cached; no: skip 3a
#   E2E_CMD_TIMEOUT       seconds any single docker command may take (default 90; the concurrent
#                         ones get three times as long)
#   E2E_LOG_LINES         lines of daemon logs shown after a failed run (default 40)
#   RDMA_MACVLAN_CACHE    where docker-registry is cached (default /var/cache/rdma-macvlan); it is
#                         fetched with `apt-get download` (after `apt-get update` if needed)
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
IMAGE=rdma-macvlan-test/busybox:latest
CMD_TIMEOUT=${E2E_CMD_TIMEOUT:-90}
LOG_LINES=${E2E_LOG_LINES:-40}
CONC=${E2E_CONCURRENT:-50}
UPGRADE_REGISTRY=${E2E_UPGRADE_REGISTRY:-auto}
HCA=mlx5_0
PLUGIN=rdma-macvlan:latest
MARKER=rdma-macvlan-build
# A sleep that exits at once on SIGTERM (a plain sleep as PID 1 ignores it).
SLEEPER=(sh -c 'trap "exit 0" TERM; sleep 3600 & wait')
# PINGER PEER: pings PEER every 0.2 s forever, one line per try in /tmp/ping.log:
# "<unix seconds> ok|fail"; exits at once on SIGTERM.
# shellcheck disable=SC2016 # expanded by the container's shell
PINGER=(sh -c 'trap "exit 0" TERM
(while :; do
	if ping -c 1 -W 1 "$0" >/dev/null 2>&1; then echo "$(date +%s) ok"; else echo "$(date +%s) fail"; fi
	sleep 0.2
done) >/tmp/ping.log 2>&1 &
wait')

# keeps the script's stdout for the summary of a run interrupted inside such a step.
# shellcheck source=scripts/lib/e2e.sh
source "$here/lib/e2e.sh"
exec 4>&1

# secs MS prints MS milliseconds as seconds with one decimal.
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }

# ---------------------------------------------------------------------------------------------
# State of the current run; teardown undoes exactly what is recorded here.
work=""         # temp dir of the whole suite (binaries, plugin builds)
rdir=""         # temp dir of one run
ddir=""         # the private dockerd's dir (scripts/dockerd.sh)
links=()        # host links this run created (one end of each veth pair)
reg_pid=""      # the registry this run started
plugin_ids=()   # every plugin id this run had (their /run/docker/plugins dirs must go)
apt_policy=""   # /usr/sbin/policy-rc.d while this script runs apt
run_failed=""

# teardown removes everything of the current run, whatever state it is in. Idempotent.
teardown() {
	local l ids
	set +e
	trap - ERR
	[[ -n $rdir ]] && say "teardown of $rdir"
	export DOCKER_HOST=unix://$ddir/docker.sock
	if [[ -n $ddir && -S $ddir/docker.sock ]] && timeout 10 docker info >/dev/null 2>&1; then
		ids=$(timeout 30 docker ps -aq 2>/dev/null)
		# shellcheck disable=SC2086 # one word per container
		[[ -n $ids ]] && timeout 120 docker rm -f $ids >/dev/null 2>&1
		ids=$(timeout 30 docker network ls -q --filter type=custom 2>/dev/null)
		# shellcheck disable=SC2086 # one word per network
		[[ -n $ids ]] && timeout 60 docker network rm $ids >/dev/null 2>&1
	fi
	registry_stop
	if [[ -n $ddir ]]; then
		say "stopping the private dockerd"
		bash "$here/dockerd.sh" stop "$ddir" 2>/dev/null || say "warning: dockerd.sh stop $ddir failed"
		ddir=""
	fi
	unset DOCKER_HOST
	for l in "${links[@]}"; do
		ip link del "$l" 2>/dev/null
	done
	links=()
	if [[ -n $rdir ]]; then
		rm -rf --one-file-system "$rdir"
		say "teardown done"
	fi
	rdir=""
	trap on_err ERR
	set -e
}

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
	exec 1>&4 2>&3
	if ((rc == 130)) && [[ -z $summary_done ]]; then
		fail "interrupted"
	elif ((rc != 0)) && [[ -z $summary_done ]]; then
		fail "aborted: a step outside the checks failed (exit $rc; see the lines above)"
		[[ -n $rdir ]] && show_logs
	fi
	teardown
	[[ -n $apt_policy ]] && rm -f "$apt_policy"
	[[ -n $work ]] && rm -rf --one-file-system "$work"
	[[ -n $summary_done ]] || summary
	((rc == 0)) || exit "$rc"
	((FAILED == 0)) || exit 1
}
summary_done=""
timings=()
trap on_exit EXIT
trap 'exit 130' INT TERM
# on_err says where a step outside the checks failed.
on_err() { say "command failed (exit $?): $BASH_COMMAND"; }
trap on_err ERR

# ---------------------------------------------------------------------------------------------
# Helpers of a run.

# status prints the plugin's /v1/status as lines (see e2e/rmvstatus).
status() { "$work/bin/rmvstatus" -socket "$sock"; }

# net_line NID prints the status line of network NID.
net_line() { status | awk -v id="$1" '$1 == "network" && $2 == id'; }

# ep_lines NID prints the status lines of the endpoints of network NID.
ep_lines() { status | awk -v id="$1" '$1 == "endpoint" && $2 == id'; }

# field NAME LINE prints the value of NAME=... in LINE.
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -n 1; }

# net_endpoints NID N: network NID is listed with N endpoints.
net_endpoints() {
	local l
	l=$(net_line "$1")
	[[ -n $l ]] || { echo "network $1 not in /v1/status:"; status; return 1; }
	[[ $(field endpoints "$l") == "$2" ]] || { echo "want $2 endpoints: $l"; return 1; }
}

cpid() { dk inspect -f '{{.State.Pid}}' "$1"; }

# cip NAME: the container's address on the run's network, from docker inspect.
cip() { dk inspect -f "{{(index .NetworkSettings.Networks \"$net\").IPAddress}}" "$1"; }

pings() { dk exec "$1" ping -c 2 -W 2 "$2"; }

# running NAME: the container runs.
running() { [[ $(dk inspect -f '{{.State.Running}}' "$1" 2>&1) == true ]]; }

# run_c NAME IP [ARGS...] [-- CMD...]: a detached busybox on the run's network (default command:
# the sleeper).
run_c() {
	local name=$1 ip=$2
	local -a args=() cmd=("${SLEEPER[@]}")
	shift 2
	while (($#)); do
		if [[ $1 == -- ]]; then
			shift
			cmd=("$@")
			break
		fi
		args+=("$1")
		shift
	done
	dk run -d --name "$name" --network "$net" --ip "$ip" "${args[@]}" "$IMAGE" "${cmd[@]}" >/dev/null
}

stop_and_rm() { dk stop -t 3 "$1" >/dev/null && dk rm "$1" >/dev/null; }

# parent_children: the macvlan links on the run's parent in the host netns, one a line.
parent_children() { ip -o link show type macvlan | grep -F "@$parent:" || true; }

# no_host_link NAME...: none of the links exists in the host netns, and no macvlan hangs off the
# parent there.
no_host_link() {
	local l bad=""
	for l in "$@"; do
		[[ -n $l ]] || continue
		ip link show dev "$l" >/dev/null 2>&1 && bad+=" $l"
	done
	[[ -z $bad ]] || { echo "host links still there:$bad"; return 1; }
	l=$(parent_children)
	[[ -z $l ]] || { echo "macvlan children of $parent in the host netns: $l"; return 1; }
}

# entries DIR: the names in DIR, one a line, sorted; nothing when DIR is missing.
entries() { { find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null || true; } | sort; }

# ep_state_count: endpoint state files, not counting the temp file of a write in progress (the
# store writes .tmp-<id>.json-<n> and renames it; GID watches ending rewrite endpoints).
ep_state_count() { entries "$rdir/state/endpoints" | grep -c '^[0-9a-f]\{64\}\.json$' || true; }

no_endpoint_state() {
	local f
	f=$(entries "$rdir/state/endpoints")
	[[ -z $f ]] || { echo "endpoint state left: $f"; return 1; }
}

# nothing_left NID IFNAME...: the links are gone, no macvlan on the parent, the network lists no
# endpoint and no endpoint state file is left.
nothing_left() {
	local nid=$1
	shift
	no_host_link "$@" && net_endpoints "$nid" 0 && no_endpoint_state
}

# refused DESC WANT... -- CMD...: CMD fails and its output contains every WANT.
refused() {
	local desc=$1 out w miss=""
	local -a want=()
	shift
	while [[ $1 != -- ]]; do want+=("$1"); shift; done
	shift
	if out=$("$@" 2>&1 </dev/null); then
		fail "$desc: accepted, want a refusal" "$out"
		return 0
	fi
	for w in "${want[@]}"; do grep -qF -- "$w" <<<"$out" || miss+=" '$w'"; done
	if [[ -z $miss ]]; then pass "$desc" "docker said: $out"; else fail "$desc: the CLI does not show$miss" "$out"; fi
}

# plugin_pid ID prints the pid of the process of managed plugin ID (its cgroup carries the id).
plugin_pid() {
	local p exe
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		[[ ${exe##*/} == rdma-macvlan ]] || continue
		grep -qF -- "$1" "$p/cgroup" 2>/dev/null || continue
		printf '%s\n' "${p#/proc/}"
		return 0
	done
	echo "no process of plugin ${1:0:12}"
	return 1
}

# plugin_build ID: the marker of the build that plugin ID runs, read in its process's root.
plugin_build() {
	local pid
	pid=$(plugin_pid "$1") || { echo "$pid"; return 1; }
	cat "/proc/$pid/root/$MARKER" 2>&1
}

# runs_build ID WANT: plugin ID runs the build whose marker is WANT.
runs_build() {
	local got
	got=$(plugin_build "$1") || { echo "$got"; return 1; }
	[[ $got == "$2" ]] || { echo "plugin ${1:0:12} runs '$got', want '$2'"; return 1; }
}

# use_plugin_id: the id and socket of the plugin as it is now.
use_plugin_id() {
	plugin_id=$(dk plugin inspect -f '{{.Id}}' "$PLUGIN")
	sock=/run/docker/plugins/$plugin_id/rdma-macvlan.sock
	plugin_ids+=("$plugin_id")
}

# plugin_mounts prints "name=source" of each mount as the plugin will run it: the engine builds
# the plugin's spec from .Config.Mounts (`docker plugin set` writes there and .Settings shows it).
plugin_mounts() {
	dk plugin inspect -f '{{range .Config.Mounts}}{{.Name}}={{.Source}} {{end}}' "$PLUGIN"
}
want_mounts() { printf 'state=%s sysfs=%s cdi=%s ' "$rdir/state" "$rdir/sysfs/sys" "$rdir/cdi"; }
plugin_settings() {
	printf '%s\n' "state.source=$rdir/state" "cdi.source=$rdir/cdi" "sysfs.source=$rdir/sysfs/sys" \
		RDMA_MACVLAN_LOG_LEVEL=debug
}

# build_plugin N DIR: a plugin dir with the working tree's binary and marker "build N of run ID".
build_plugin() {
	PLUGIN_DIR=$2 PLUGIN_BINARY=$work/bin/rdma-macvlan bash "$here/plugin.sh" build 2>/dev/null
	printf 'build %s of run %s\n' "$1" "$id" >"$2/rootfs/$MARKER"
}

show_logs() {
	if [[ -n $ddir && -f $ddir/dockerd.log ]]; then
		detail "last lines of dockerd's log (plugin lines are prefixed with its id):" \
			"$(grep -iE 'error|warn|rdma|plugin' "$ddir/dockerd.log" | grep -v 'IPv4 forwarding' | tail -n "$LOG_LINES")"
	fi
}

# ---------------------------------------------------------------------------------------------
# 1. Concurrency.

# conc_name I: the name of concurrent container I.
conc_name() { printf '%s-c%02d' "$net" "$1"; }

# in_parallel WHAT ARG...: runs `docker ARG...` for each concurrent container, with "{}" in ARG
# replaced by its name, all at once as background jobs, and waits for all; fails listing every one
# that failed or wrote to stderr. Writes the wall time in ms to $rdir/conc/WHAT.ms.
in_parallel() {
	local what=$1 i t0 err a name bad="" n=0
	local -a pids=() argv=()
	shift
	mkdir -p "$rdir/conc"
	t0=$(now_ms)
	for ((i = 1; i <= CONC; i++)); do
		name=$(conc_name "$i")
		argv=()
		for a in "$@"; do
			if [[ $a == "{}" ]]; then argv+=("$name"); else argv+=("$a"); fi
		done
		timeout -k 5 $((CMD_TIMEOUT * 3)) docker "${argv[@]}" \
			>"$rdir/conc/$what.$i.out" 2>"$rdir/conc/$what.$i.err" </dev/null &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		if ! wait "${pids[i]}"; then
			bad+="$(conc_name $((i + 1))): exit $? $(tr '\n' ' ' <"$rdir/conc/$what.$((i + 1)).err")"$'\n'
			n=$((n + 1))
		fi
	done
	echo $(($(now_ms) - t0)) >"$rdir/conc/$what.ms"
	for ((i = 1; i <= CONC; i++)); do
		err=$(grep -v 'IPv4 forwarding is disabled' "$rdir/conc/$what.$i.err" || true)
		[[ -z $err ]] || bad+="$(conc_name "$i") wrote to stderr: $err"$'\n'
	done
	[[ -z $bad ]] || { printf '%d of %d failed:\n%s' "$n" "$CONC" "$bad"; return 1; }
}

# conc_inspect writes "name pid running ip" of every concurrent container to $rdir/conc/inspect.
conc_inspect() {
	local i
	local -a names=()
	for ((i = 1; i <= CONC; i++)); do names+=("$(conc_name "$i")"); done
	dk inspect -f "{{.Name}} {{.State.Pid}} {{.State.Running}} {{(index .NetworkSettings.Networks \"$net\").IPAddress}}" \
		"${names[@]}" | sed 's|^/||' >"$rdir/conc/inspect"
}

conc_unique_ips() {
	local n u notrun bad
	conc_inspect || return 1
	n=$(wc -l <"$rdir/conc/inspect")
	((n == CONC)) || { echo "docker inspect lists $n containers, want $CONC"; return 1; }
	notrun=$(awk '$3 != "true"' "$rdir/conc/inspect")
	[[ -z $notrun ]] || { echo "not running: $notrun"; return 1; }
	bad=$(awk -v p="$sub." 'index($4, p) != 1' "$rdir/conc/inspect")
	[[ -z $bad ]] || { echo "addresses outside $sub.0/24: $bad"; return 1; }
	u=$(awk '{print $4}' "$rdir/conc/inspect" | sort -u | wc -l)
	((u == CONC)) || { echo "$u distinct addresses for $CONC containers:"; awk '{print $4}' "$rdir/conc/inspect" | sort | uniq -d; return 1; }
}

# conc_one_link: in each container's netns exactly one macvlan link, eth0, carrying the address
# docker inspect shows.
conc_one_link() {
	local name pid ip out bad=""
	while read -r name pid _ ip; do
		out=$(nsenter -t "$pid" -n ip -o link show type macvlan 2>&1) || { bad+="$name: $out"$'\n'; continue; }
		if (($(grep -c . <<<"$out") != 1)) || ! grep -qE '^[0-9]+: eth0@' <<<"$out"; then
			bad+="$name (pid $pid): want exactly one macvlan link, eth0; got: $out"$'\n'
			continue
		fi
		out=$(nsenter -t "$pid" -n ip -4 -o addr show dev eth0 2>&1)
		grep -qF " $ip/24 " <<<"$out" || bad+="$name: eth0 has no $ip/24: $out"$'\n'
	done <"$rdir/conc/inspect"
	[[ -z $bad ]] || { printf '%s' "$bad"; return 1; }
}

# conc_status: /v1/status lists CONC endpoints on the network, one per container address, each
# with its own link, none of these links in the host netns; CONC endpoint state files.
conc_status() {
	local eps want got ifs n
	net_endpoints "$nid" "$CONC" || return 1
	eps=$(ep_lines "$nid")
	want=$(awk '{print $4}' "$rdir/conc/inspect" | sort)
	got=$(while read -r l; do field ipv4 "$l"; done <<<"$eps" | sort)
	[[ $got == "$want" ]] || { echo "endpoint addresses in /v1/status differ from the containers':"; diff <(echo "$want") <(echo "$got"); return 1; }
	ifs=$(while read -r l; do field ifname "$l"; done <<<"$eps" | sort -u)
	n=$(grep -c '^rmv[0-9a-f]\{12\}$' <<<"$ifs" || true)
	((n == CONC)) || { echo "want $CONC distinct rmv<12 hex> link names, got $n: $ifs"; return 1; }
	# shellcheck disable=SC2086 # one word per link name
	no_host_link $ifs || return 1
	n=$(ep_state_count)
	((n == CONC)) || { echo "$n endpoint state files, want $CONC: $(entries "$rdir/state/endpoints" | head -n 3)"; return 1; }
}

conc_first_pings_last() {
	local last
	last=$(awk -v n="$(conc_name "$CONC")" '$1 == n {print $4}' "$rdir/conc/inspect")
	pings "$(conc_name 1)" "$last"
}

conc_none_left() {
	local c
	c=$(dk ps -aq --filter "name=$net-c")
	[[ -z $c ]] || { echo "containers left: $c"; return 1; }
	# shellcheck disable=SC2086 # one word per link name
	nothing_left "$nid" $conc_ifs
}

# ---------------------------------------------------------------------------------------------
# 2. dockerd restart with --live-restore.

# dockerd_down stops the private dockerd by its pid (containerd and, with live-restore, the
# containers keep running) and keeps its command line and PATH to start it again.
dockerd_down() {
	local pid t0
	pid=$(cat "$ddir/dockerd.spawned")
	[[ $(readlink "/proc/$pid/exe") == */dockerd ]] || { echo "pid $pid is not our dockerd"; return 1; }
	mapfile -d '' -t dockerd_argv <"/proc/$pid/cmdline"
	dockerd_path=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^PATH=//p')
	printf '%s\n' "${dockerd_argv[@]}" | grep -qx -- --live-restore || { echo "dockerd runs without --live-restore"; return 1; }
	down_s=$(date +%s)
	t0=$(now_ms)
	stop_pid "$pid" 40
	kill -0 "$pid" 2>/dev/null && { echo "dockerd $pid did not stop"; return 1; }
	say "dockerd stopped in $(($(now_ms) - t0)) ms"
}

dockerd_up() {
	local t0
	t0=$(now_ms)
	PATH=$dockerd_path setsid "${dockerd_argv[@]}" </dev/null >>"$ddir/dockerd.log" 2>&1 &
	printf '%s\n' "$!" >"$ddir/dockerd.spawned"
	poll 60 docker info --format '{{.ServerVersion}}' >/dev/null || { echo "dockerd did not answer again"; return 1; }
	up_s=$(date +%s)
	say "dockerd answers again after $(($(now_ms) - t0)) ms"
}

# alive_while_down: the containers' processes run and a pings b through its netns (nsenter;
# the host's busybox ping), while dockerd is down.
alive_while_down() {
	if ! kill -0 "$pid_a" || ! kill -0 "$pid_b"; then echo "container processes $pid_a $pid_b gone"; return 1; fi
	nsenter -t "$pid_a" -n /bin/busybox ping -c 2 -W 2 "$ip_b"
	nsenter -t "$pid_b" -n /bin/busybox ping -c 2 -W 2 "$ip_a"
}

# same_pids: a and b run with the pids they had before the restart.
same_pids() {
	local pa pb
	pa=$(cpid "$net-a") pb=$(cpid "$net-b")
	if ! running "$net-a" || ! running "$net-b"; then
		echo "not running: $(dk ps -a --format '{{.Names}} {{.Status}}')"
		return 1
	fi
	[[ $pa == "$pid_a" && $pb == "$pid_b" ]] || { echo "pids before: $pid_a $pid_b, after: $pa $pb"; return 1; }
}

# pinged_through NAME: NAME's ping log has tries in [down_s, up_s] and after, and no failure
# from the first success on.
pinged_through() {
	local log counts wok wfail aok afail allfail
	# Some tries after the restart first.
	while (($(date +%s) <= up_s + 1)); do sleep 0.2; done
	log=$(dk exec "$1" cat /tmp/ping.log) || return 1
	# Tries before the peer existed may fail; from its first success on none may.
	counts=$(awk -v s="$down_s" -v e="$up_s" '
		$2 == "ok" { seen = 1 }
		!seen { next }
		{ all[$2]++ }
		$1 >= s && $1 <= e { win[$2]++ }
		$1 > e { after[$2]++ }
		END { printf "%d %d %d %d %d\n", win["ok"], win["fail"], after["ok"], after["fail"], all["fail"] }' <<<"$log")
	read -r wok wfail aok afail allfail <<<"$counts"
	echo "$1: $wok ok / $wfail failed while dockerd restarted ($down_s..$up_s), $aok ok / $afail failed after, $allfail failed in all"
	((wok > 0 && aok > 0 && allfail == 0)) || { grep fail <<<"$log" | head -n 5; return 1; }
}

both_listed() {
	net_endpoints "$nid" 2 || return 1
	ep_lines "$nid" | grep -qF "ipv4=$ip_a " || { echo "no endpoint with $ip_a"; return 1; }
	ep_lines "$nid" | grep -qF "ipv4=$ip_b " || { echo "no endpoint with $ip_b"; return 1; }
}

# new_pings NAME IP PEER-IP...: a new container with IP starts on the network, has its address
# and pings every peer.
new_pings() {
	local name=$1 ip=$2 out p
	shift 2
	run_c "$name" "$ip" || return 1
	out=$(dk exec "$name" ip -4 -o addr show dev eth0) || return 1
	grep -qF " $ip/24 " <<<"$out" || { echo "eth0 of $name has no $ip/24: $out"; return 1; }
	for p in "$@"; do pings "$name" "$p" || return 1; done
}

# link_names prints the host link names of the network's endpoints, space-separated.
link_names() { ep_lines "$nid" | tr ' ' '\n' | sed -n 's/^ifname=//p' | paste -sd ' ' -; }

# ---------------------------------------------------------------------------------------------
# 3. Plugin upgrade.




# push_ref: build 2, created in the engine as $ref, pushed to the registry and removed locally.
push_ref() { dk plugin push "$ref" >/dev/null && dk plugin rm "$ref" >/dev/null; }

# set_again_and_enable: the run's settings set again, the plugin enabled, its mounts as set.
set_again_and_enable() {
	dk plugin set "$PLUGIN" "${settings[@]}" && dk plugin enable "$PLUGIN" >/dev/null && mounts_kept
}

# recreate_build3: what `make install` does after `docker plugin rm`: create (build 3), set, enable.
recreate_build3() {
	PLUGIN_DIR=$work/plugin3 bash "$here/plugin.sh" create 2>/dev/null &&
		dk plugin set "$PLUGIN" "${settings[@]}" &&
		PLUGIN_DIR=$work/plugin3 bash "$here/plugin.sh" install 2>/dev/null &&
		mounts_kept
}

# new_and_back NAME IP: a new container with IP pings the old one ($old at $oldip) and back.
new_and_back() { new_pings "$1" "$2" "$oldip" && pings "$old" "$2"; }

rm_pair() { stop_and_rm "$net-a" && stop_and_rm "$net-b"; }

mounts_kept() {
	local got
	got=$(plugin_mounts)
	[[ $got == "$(want_mounts)" ]] || { echo "mounts the plugin would run with: $got"; echo "set before: $(want_mounts)"; return 1; }
}

# old_removed NAME IFNAME: the old container can be stopped and removed, its link goes and one
# endpoint is left on the network.
old_removed() {
	stop_and_rm "$1" || return 1
	poll 10 no_host_link "$2" >/dev/null || { echo "link $2 still in the host netns"; return 1; }
	poll 10 net_endpoints "$nid" 1
}

ifname_of_ip() { ep_lines "$nid" | awk -v ip="ipv4=$1" '{ for (i = 4; i <= NF; i++) if ($i == ip) print }' | tr ' ' '\n' | sed -n 's/^ifname=//p'; }

# ---------------------------------------------------------------------------------------------
# leftovers ID RUNDIR PLUGIN-ID...: fails listing what of a run is still on the machine. Only
# what carries this run's id or lives under its paths counts (other tests may run meanwhile).
leftovers() {
	local id=$1 d=$2 out="" p
	shift 2
	out+=$(ip -o link show | awk -F': ' -v id="rmvr$id" 'index($2, id) {print "link " $2}')
	out+=$(ip netns list 2>/dev/null | grep -F -e "$id" -e "$d" | sed 's/^/\nnetns /')
	out+=$(findmnt -rn -o TARGET | grep -F -- "$d" | sed 's/^/\nmount /')
	out+=$(pgrep -af -- "$d" | sed 's/^/\nprocess /')
	[[ -e $d ]] && out+=$'\ndir '$d
	for p in "$@"; do
		[[ -e /run/docker/plugins/$p ]] && out+=$'\nplugin dir /run/docker/plugins/'$p
		grep -lF -- "$p" /proc/[0-9]*/cgroup >/dev/null 2>&1 && out+=$'\nplugin process of '${p:0:12}
	done
	out=$(sed '/^$/d' <<<"$out")
	[[ -z $out ]] || { printf '%s\n' "$out"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# One run on engine $1.
rel_run() {
	engine=$1
	local n t0 out conc_ifs="" ifs ip_a ip_b ip_c ip_u1 ip_u2 ip_u3 pid_a pid_b ppid0 ppid1
	local down_s="" up_s="" regbin ref old oldip oldif rd ms rc
	local -a dockerd_argv=() settings=()
	local dockerd_path=""
	tag="$engine"
	run_failed=""
	plugin_ids=()
	t0=$(date +%s)

	# Unique names: 4 hex digits, checked against the links there are.
	for ((n = 0; n < 20; n++)); do
		id=$(od -An -N2 -tx2 /dev/urandom | tr -d ' \n')
		ip -o link show | grep -qF "rmvr$id" || break
	done
	parent=rmvr${id}p
	net=rmv-rel-$id
	sub=10.232.$((0x${id:0:2}))
	ip_a=$sub.201 ip_b=$sub.202 ip_c=$sub.203 ip_u1=$sub.211 ip_u2=$sub.212 ip_u3=$sub.213
	rdir=$(mktemp -d /tmp/rmv-rel.XXXXXX)
	ddir=$rdir/d
	mkdir -p "$rdir/state" "$rdir/cdi"
	say "run $id: parent $parent, subnet $sub.0/24, dir $rdir"

	ip link add "$parent" type veth peer name "rmvr${id}q"
	links+=("$parent")
	ip link set "$parent" up
	ip link set "rmvr${id}q" up
	"$work/bin/fakesysfs" -root "$rdir/sysfs" -kind mlx5 -hca "$HCA" -netdev "$parent" -size 255 \
		-mac "$(cat "/sys/class/net/$parent/address")"

	out=$(bash "$here/dockerd.sh" start "$ddir" "$engine" -- --live-restore)
	eval "$out"
	say "dockerd $(dk version -f '{{.Server.Version}} (API {{.Server.APIVersion}})') ready, --live-restore"
	bash "$here/mkimage.sh"

	build_plugin 1 "$work/plugin1"
	mapfile -t settings < <(plugin_settings)
	PLUGIN_DIR=$work/plugin1 bash "$here/plugin.sh" create
	dk plugin set "$PLUGIN" "${settings[@]}"
	PLUGIN_DIR=$work/plugin1 bash "$here/plugin.sh" install
	use_plugin_id
	check "managed plugin (build 1) answers GET /v1/status on $sock" poll 15 status
	if ! nid=$(dk network create -d "$PLUGIN" --subnet "$sub.0/24" -o parent="$parent" "$net" 2>&1); then
		fail "network create -d $PLUGIN --subnet $sub.0/24 -o parent=$parent" "$nid"
		show_logs
		return 0
	fi
	pass "network create -d $PLUGIN --subnet $sub.0/24 -o parent=$parent"
	refused "docker plugin disable without -f is refused while a network uses the plugin" "in use" -- \
		dk plugin disable "$PLUGIN"
	say "setup done in $(($(date +%s) - t0)) s"

	# --- 1. concurrency -------------------------------------------------------------------------
	say "$CONC docker run -d at once"
	check_here "$CONC docker run -d at once on the network: every one exits 0 with no error output" \
		in_parallel run run -d --name "{}" --network "$net" "$IMAGE" "${SLEEPER[@]}"
	ms=$(cat "$rdir/conc/run.ms" 2>/dev/null || echo 0)
	timings+=("$engine: $CONC docker run -d at once: $(secs "$ms") s wall")
	say "$CONC runs took $(secs "$ms") s"
	check "all $CONC run, with $CONC distinct addresses in $sub.0/24" conc_unique_ips
	check "each container's netns has exactly one macvlan link, eth0, with its address (nsenter)" conc_one_link
	check "/v1/status lists $CONC endpoints with the containers' addresses and $CONC distinct links, none left in the host netns; $CONC endpoint state files" \
		conc_status
	check "container 1 pings container $CONC" conc_first_pings_last
	conc_ifs=$(link_names)
	say "$CONC docker rm -f at once"
	check_here "$CONC docker rm -f at once: every one exits 0 with no error output" \
		in_parallel rm rm -f "{}"
	ms=$(cat "$rdir/conc/rm.ms" 2>/dev/null || echo 0)
	timings+=("$engine: $CONC docker rm -f at once: $(secs "$ms") s wall")
	say "$CONC removals took $(secs "$ms") s"
	check "after the removals: no container, no link, no macvlan on $parent, 0 endpoints in /v1/status, no endpoint state file" \
		poll 15 conc_none_left

	# --- 2. dockerd restart with --live-restore ------------------------------------------------
	say "dockerd restart with --live-restore"
	if run_c "$net-a" "$ip_a" -- "${PINGER[@]}" "$ip_b" && run_c "$net-b" "$ip_b" -- "${PINGER[@]}" "$ip_a"; then
		pass "two containers start, each pinging the other every 0.2 s"
		check "a pings b" poll 10 pings "$net-a" "$ip_b"
		pid_a=$(cpid "$net-a") pid_b=$(cpid "$net-b")
		ppid0=$(plugin_pid "$plugin_id" || true)
		check_here "dockerd (--live-restore) stopped with SIGTERM" dockerd_down
		check "while dockerd is down: both containers run and ping each other (nsenter into their netns)" \
			alive_while_down
		sleep 1
		check_here "dockerd started again (same data root, --live-restore)" dockerd_up
		ppid1=$(plugin_pid "$plugin_id" || true)
		check "both containers still run with the same pids (not restarted)" same_pids
		check_v "container a pinged b all along: tries while dockerd was down and after, none failed" \
			pinged_through "$net-a"
		check_v "container b pinged a all along: tries while dockerd was down and after, none failed" \
			pinged_through "$net-b"
		check "/v1/status after the restart lists both endpoints" poll 20 both_listed
		if [[ -n $ppid0 && $ppid0 == "$ppid1" ]]; then
			pass "the plugin process ran on through the dockerd restart (pid $ppid0)"
		else
			pass "the engine restarted the plugin process (pid ${ppid0:-none} before, ${ppid1:-none} after; state reloaded)"
		fi
		check "the network is usable: a new container starts with $ip_c/24 and pings a and b" \
			new_pings "$net-c" "$ip_c" "$ip_a" "$ip_b"
		ifs=$(link_names)
		check "the old containers can be stopped and removed" rm_pair
		check "docker rm -f of the new one" dk rm -f "$net-c"
		# shellcheck disable=SC2086 # one word per link name
		check "nothing leaked: links $ifs gone, no macvlan on $parent, 0 endpoints, no endpoint state" \
			poll 15 nothing_left "$nid" $ifs
	else
		fail "two containers start, each pinging the other every 0.2 s"
		show_logs
	fi

	# --- 3. plugin upgrade ----------------------------------------------------------------------
	say "plugin upgrade"
	if ! run_c "$net-u1" "$ip_u1"; then
		fail "build 1: a container runs on the network"
		show_logs
		return 0
	fi
	pass "build 1: a container runs on the network"
	old=$net-u1 oldip=$ip_u1 oldif=$(link_names)
	check "build 1 runs: the plugin process's root has the marker 'build 1 of run $id'" \
		runs_build "$plugin_id" "build 1 of run $id"
	build_plugin 2 "$work/plugin2"
	build_plugin 3 "$work/plugin3"

	# (a) docker plugin upgrade, from a registry on 127.0.0.1.
	out=""
	regbin="E2E_UPGRADE_REGISTRY=no"
	if [[ $UPGRADE_REGISTRY != no ]] && regbin=$(registry_bin 2>&1) && registry_start "$regbin" "$rdir/registry" >"$rdir/registry.out" 2>&1; then
		ref=$reg/rdma-macvlan-rel-$id:build2
		say "registry on $reg"
		refused "upgrade (registry): docker plugin upgrade of an enabled plugin is refused" "disabled" -- \
			dk plugin upgrade --grant-all-permissions --skip-remote-check "$PLUGIN" "$ref"
		check "upgrade (registry): build 2 created in the engine as $ref, not pushed yet" \
			dk plugin create "$ref" "$work/plugin2"
		check "upgrade (registry): docker plugin disable -f with the container running" dk plugin disable -f "$PLUGIN"
		refused "upgrade (registry): docker plugin upgrade from a plugin the engine has but no registry has is refused" \
			"$reg" -- dk plugin upgrade --grant-all-permissions --skip-remote-check "$PLUGIN" "$ref"
		check "upgrade (registry): docker plugin push $ref, then the local copy removed" \
			push_ref
		# From another repository name the CLI asks "Plugin images do not match, are you sure?";
		# with no answer it does nothing and still exits 0.
		out=$(dk plugin upgrade --grant-all-permissions "$PLUGIN" "$ref" </dev/null 2>&1) && rc=0 || rc=$?
		if [[ $(dk plugin inspect -f '{{.PluginReference}}' "$PLUGIN") != "$ref" ]]; then
			pass "upgrade (registry): without --skip-remote-check and no answer to its question the CLI upgrades nothing (exit $rc; recorded)" "docker said: $out"
		else
			fail "upgrade (registry): without --skip-remote-check and no answer the CLI upgraded anyway (exit $rc)" "$out"
		fi
		check "upgrade (registry): docker plugin upgrade --skip-remote-check $PLUGIN $ref" \
			dk plugin upgrade --grant-all-permissions --skip-remote-check "$PLUGIN" "$ref"
		out=$(dk plugin inspect -f '{{.Id}}' "$PLUGIN" 2>&1)
		if [[ $out == "$plugin_id" ]]; then
			pass "upgrade (registry): the plugin keeps its name and id (${plugin_id:0:12})"
		else
			fail "upgrade (registry): the plugin keeps its name and id (${plugin_id:0:12})" "now: $out"
		fi
		if out=$(mounts_kept 2>&1); then
			pass "upgrade (registry): the plugin's mounts keep the sources set before"
		else
			# The engine runs the plugin with the new manifest's mounts while `docker plugin inspect`
			# still shows the old sources under .Settings: without a second `docker plugin set` the
			# plugin would start on the default state dir and not find its networks.
			pass "upgrade (registry): the engine reset the mount sources to the manifest's defaults (recorded; set again below)" "$out"
			if [[ ! -e /var/lib/rdma-macvlan ]]; then
				# Proof that the plugin would run with them: this host has no default state dir.
				refused "upgrade (registry): enabled without setting them again, the plugin fails on the default state dir" \
					/var/lib/rdma-macvlan -- dk plugin enable "$PLUGIN"
				check "upgrade (registry): ... and that did not create /var/lib/rdma-macvlan" test ! -e /var/lib/rdma-macvlan
			else
				skip "upgrade (registry): enable with the default mounts not tried: this host has /var/lib/rdma-macvlan"
			fi
		fi
		check "upgrade (registry): the same settings set again, enabled, mounts as set" \
			set_again_and_enable
		check "upgrade (registry): build 2 runs (marker)" poll 15 runs_build "$plugin_id" "build 2 of run $id"
		check "upgrade (registry): the plugin answers on $sock" poll 15 status
		check "upgrade (registry): a new container starts with $ip_u2/24 and pings the old one, which pings it back" \
			new_and_back "$net-u2" "$ip_u2"
		check "upgrade (registry): /v1/status lists the network with both endpoints" poll 10 net_endpoints "$nid" 2
		check "upgrade (registry): the old container can be stopped and removed, its link $oldif goes" \
			old_removed "$old" "$oldif"
		old=$net-u2 oldip=$ip_u2 oldif=$(link_names)
	else
		[[ -f $rdir/registry.out ]] && out=$(cat "$rdir/registry.out")
		skip "docker plugin upgrade from a registry: no registry: ${regbin:-}${out:+ $out}"
	fi
	registry_stop

	# (b) remove and re-create under the same name with the same settings (`make install`).
	check "re-create: docker plugin disable -f with the container running" dk plugin disable -f "$PLUGIN"
	# The engines refuse to disable or remove a plugin a network uses ("is in use", checked at the
	# start) only until dockerd restarts: the restart in 2. dropped the network's reference. So
	# this is recorded either way, then forced.
	if out=$(dk plugin rm "$PLUGIN" 2>&1); then
		pass "re-create: docker plugin rm without -f was accepted although a network uses the plugin: the engine lost the network's reference in the dockerd restart (recorded)" "docker said: $out"
	else
		pass "re-create: docker plugin rm without -f was refused (recorded)" "docker said: $out"
		check "re-create: docker plugin rm -f" dk plugin rm -f "$PLUGIN"
	fi
	check "re-create: build 3 created under the same name, the same settings set, enabled (plugin.sh create, set, install)" \
		recreate_build3
	out=$plugin_id
	use_plugin_id
	if [[ $plugin_id != "$out" ]]; then
		pass "re-create: the plugin has a new id (${plugin_id:0:12}, was ${out:0:12})"
	else
		fail "re-create: the plugin has a new id" "still $plugin_id"
	fi
	check "re-create: build 3 runs (marker)" poll 15 runs_build "$plugin_id" "build 3 of run $id"
	check "re-create: the plugin answers on its new socket $sock" poll 15 status
	check "re-create: /v1/status lists the network with the old container's endpoint" poll 10 net_endpoints "$nid" 1
	check "re-create: a new container starts with $ip_u3/24 and pings the old one, which pings it back" \
		new_and_back "$net-u3" "$ip_u3"
	check "re-create: the old container can be stopped and removed, its link $oldif goes" old_removed "$old" "$oldif"
	ifs=$(link_names)
	check "re-create: docker rm -f of the new one" dk rm -f "$net-u3"
	# shellcheck disable=SC2086 # one word per link name
	check "nothing leaked: links $ifs gone, 0 endpoints, no endpoint state" poll 15 nothing_left "$nid" $ifs
	check "docker network rm" dk network rm "$net"
	check "docker network rm: network gone from /v1/status and the state, no CDI spec" poll 10 net_gone

	say "teardown"
	[[ -z $run_failed ]] || show_logs
	rd=$rdir
	teardown
	check "nothing left: links, namespaces, processes, mounts, plugin dirs and processes (${#plugin_ids[@]} plugin ids), temp dir" \
		leftovers "$id" "$rd" "${plugin_ids[@]}"
	say "run took $(($(date +%s) - t0)) s"
	timings+=("$engine: whole run: $(($(date +%s) - t0)) s")
}

net_gone() {
	[[ -z $(net_line "$nid") ]] || { echo "network still in /v1/status"; return 1; }
	[[ -z $(entries "$rdir/state/networks") ]] || { echo "network state left: $(entries "$rdir/state/networks")"; return 1; }
	[[ -z $(entries "$rdir/cdi") ]] || { echo "cdi dir has: $(entries "$rdir/cdi")"; return 1; }
}

# ---------------------------------------------------------------------------------------------
select_engines "$@"
if ! [[ $CONC =~ ^[1-9][0-9]*$ ]] || ((CONC > 120)); then
	die "E2E_CONCURRENT must be 1..120 (the 255-slot GID table admits 126)"
fi
[[ $(id -u) -eq 0 ]] || die "needs root (links, namespaces, a private dockerd)"
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || die "go not found"
command -v nsenter >/dev/null || die "nsenter not found (util-linux)"
command -v ss >/dev/null || die "ss not found (iproute2)"

say "engines: ${engines[*]}"
bash "$here/engines.sh" install "${engines[@]}"
[[ -x /bin/busybox ]] || die "/bin/busybox not found (busybox-static)"

work=$(mktemp -d /tmp/rmv-rel-work.XXXXXX)
say "building the daemon, fakesysfs and rmvstatus from the working tree"
(cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/bin/rdma-macvlan" ./cmd/rdma-macvlan &&
	go build -o "$work/bin/fakesysfs" ./rdma/rdmatest/fakesysfs &&
	go build -o "$work/bin/rmvstatus" ./e2e/rmvstatus)

for e in "${engines[@]}"; do
	rel_run "$e"
	# A run that stopped early has not torn down yet.
	teardown
done
summary
[[ $FAILED -eq 0 ]] || exit 1
