#!/usr/bin/env bash
# e2e-reliability.sh: reliability of the managed rdma-macvlan plugin against real Docker engines:
# concurrency, a dockerd restart with --live-restore and a plugin upgrade (issue 7). The restart
# without live-restore and plugin disable/enable are in test/e2e/e2e.sh and not repeated here.
#
# For each engine: a veth pair in the host netns as the RoCE parent (unique names, both ends up),
# a fake mlx5 sysfs tree for it with 255 GID slots (test/fakesysfs: admission allows 126
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
CONC=${E2E_CONCURRENT:-50}
UPGRADE_REGISTRY=${E2E_UPGRADE_REGISTRY:-auto}
MARKER=rdma-macvlan-build
# PINGER PEER: pings PEER every 0.2 s forever, one line per try in /tmp/ping.log:
# "<unix seconds> ok|fail"; exits at once on SIGTERM.
# shellcheck disable=SC2016 # expanded by the container's shell
PINGER=(sh -c 'trap "exit 0" TERM
(while :; do
	if ping -c 1 -W 1 "$0" >/dev/null 2>&1; then echo "$(date +%s) ok"; else echo "$(date +%s) fail"; fi
	sleep 0.2
done) >/tmp/ping.log 2>&1 &
wait')

# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"

# secs MS prints MS milliseconds as seconds with one decimal.
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }

# ---------------------------------------------------------------------------------------------
# State of the current run beyond the harness's (rdir, ddir, links); teardown undoes it.
work=""         # temp dir of the whole suite (binaries, plugin builds)
plugin_ids=()   # every plugin id this run had (their /run/docker/plugins dirs must go)

# teardown_hook: the harness's teardown runs it once the engine is emptied.
teardown_hook() { registry_stop; }
e2e_traps

# ---------------------------------------------------------------------------------------------
# Helpers of a run.

# ep_state_count: endpoint state files, not counting the temp file of a write in progress (the
# store writes .tmp-<id>.json-<n> and renames it; GID watches ending rewrite endpoints).
ep_state_count() { entries "$rdir/state/endpoints" | grep -c '^[0-9a-f]\{64\}\.json$' || true; }

# nothing_left NID IFNAME...: the links are gone, no macvlan on the parent, the network lists no
# endpoint and no endpoint state file is left.
nothing_left() {
	local nid=$1
	shift
	no_host_link "$@" && net_endpoints "$nid" 0 && no_endpoint_state
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
	make_plugin_dir "$2" 2>/dev/null
	printf 'build %s of run %s\n' "$1" "$id" >"$2/rootfs/$MARKER"
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

# dockerd_down_lr: dockerd_down, for a dockerd with --live-restore; sets down_s.
dockerd_down_lr() {
	dockerd_down "$ddir" || return 1
	printf '%s\n' "${dockerd_argv[@]}" | grep -qx -- --live-restore || { echo "dockerd ran without --live-restore"; return 1; }
	down_s=$(date +%s)
}

# dockerd_up_lr: dockerd_up; sets up_s.
dockerd_up_lr() { dockerd_up "$ddir" && up_s=$(date +%s); }

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
	PLUGIN_DIR=$work/plugin3 bash "$scripts/plugin.sh" create 2>/dev/null &&
		dk plugin set "$PLUGIN" "${settings[@]}" &&
		PLUGIN_DIR=$work/plugin3 bash "$scripts/plugin.sh" install 2>/dev/null &&
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

# ---------------------------------------------------------------------------------------------
# One run on engine $1.
rel_run() {
	engine=$1
	local n t0 out conc_ifs="" ifs ip_a ip_b ip_c ip_u1 ip_u2 ip_u3 pid_a pid_b ppid0 ppid1 stopped
	local down_s="" up_s="" regbin ref old oldip oldif rd ms rc
	local -a settings=()
	tag="$engine"
	run_failed=""
	plugin_ids=()
	t0=$(date +%s)
	stopped=0
	rel_setup; ((!stopped)) || return 0
	concurrency_checks
	live_restore_checks
	upgrade_setup; ((!stopped)) || return 0
	registry_upgrade_checks
	recreate_checks
	say "teardown"
	[[ -z $run_failed ]] || show_logs
	rd=$rdir
	teardown
	check "nothing left: links, namespaces, processes, mounts, plugin dirs and processes (${#plugin_ids[@]} plugin ids), temp dir" \
		leftovers "rmvr$id" "$rd" "${plugin_ids[@]}"
	say "run took $(($(date +%s) - t0)) s"
	timings+=("$engine: whole run: $(($(date +%s) - t0)) s")
}

# rel_setup: the parent with a 255-entry fake table, the engine with --live-restore, build 1 of the
# plugin, the network; sets stopped when the network cannot be created. Runs inside rel_run.
rel_setup() {
	new_id rmvr
	parent=rmvr${id}p
	net=rmv-rel-$id
	sub=10.232.$((0x${id:0:2}))
	ip_a=$sub.201 ip_b=$sub.202 ip_c=$sub.203 ip_u1=$sub.211 ip_u2=$sub.212 ip_u3=$sub.213
	rdir=$(mktemp -d /tmp/rmv-rel.XXXXXX)
	mkdir -p "$rdir/state" "$rdir/cdi"
	say "run $id: parent $parent, subnet $sub.0/24, dir $rdir"

	veth_parent "$parent" "rmvr${id}q"
	fake_hca "$rdir/sysfs" "$HCA" "$parent" -size 255
	engine_up "$rdir/d" "$engine" -- --live-restore

	build_plugin 1 "$work/plugin1"
	mapfile -t settings < <(plugin_settings)
	plugin_up "$work/plugin1" "$rdir/state" "$rdir/cdi" "$rdir/sysfs/sys" RDMA_MACVLAN_LOG_LEVEL=debug
	use_plugin_id
	check "managed plugin (build 1) answers GET /v1/status on $sock" poll 15 status
	if ! nid=$(dk network create -d "$PLUGIN" --subnet "$sub.0/24" -o parent="$parent" "$net" 2>&1); then
		fail "network create -d $PLUGIN --subnet $sub.0/24 -o parent=$parent" "$nid"
		show_logs
		stopped=1; return 0
	fi
	pass "network create -d $PLUGIN --subnet $sub.0/24 -o parent=$parent"
	refused "docker plugin disable without -f is refused while a network uses the plugin" "in use" -- \
		dk plugin disable "$PLUGIN"
	say "setup done in $(($(date +%s) - t0)) s"
}

# concurrency_checks: 1. docker run -d and docker rm -f, many at once. Runs inside rel_run.
concurrency_checks() {
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
}

# live_restore_checks: 2. dockerd restarted with --live-restore under running containers. Runs
# inside rel_run.
live_restore_checks() {
	# --- 2. dockerd restart with --live-restore ------------------------------------------------
	say "dockerd restart with --live-restore"
	if run_c "$net-a" "$ip_a" -- "${PINGER[@]}" "$ip_b" && run_c "$net-b" "$ip_b" -- "${PINGER[@]}" "$ip_a"; then
		pass "two containers start, each pinging the other every 0.2 s"
		check "a pings b" poll 10 pings "$net-a" "$ip_b"
		pid_a=$(cpid "$net-a") pid_b=$(cpid "$net-b")
		ppid0=$(plugin_pid "$plugin_id" || true)
		check_here "dockerd (--live-restore) stopped with SIGTERM" dockerd_down_lr
		check "while dockerd is down: both containers run and ping each other (nsenter into their netns)" \
			alive_while_down
		sleep 1
		check_here "dockerd started again (same data root, --live-restore)" dockerd_up_lr
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
}

# upgrade_setup: 3. plugin upgrade: a container on build 1, builds 2 and 3 made; sets stopped
# when the container does not run. Runs inside rel_run.
upgrade_setup() {
	# --- 3. plugin upgrade ----------------------------------------------------------------------
	say "plugin upgrade"
	if ! run_c "$net-u1" "$ip_u1"; then
		fail "build 1: a container runs on the network"
		show_logs
		stopped=1; return 0
	fi
	pass "build 1: a container runs on the network"
	old=$net-u1 oldip=$ip_u1 oldif=$(link_names)
	check "build 1 runs: the plugin process's root has the marker 'build 1 of run $id'" \
		runs_build "$plugin_id" "build 1 of run $id"
	build_plugin 2 "$work/plugin2"
	build_plugin 3 "$work/plugin3"
}

# registry_upgrade_checks: 3(a) docker plugin upgrade from a registry on 127.0.0.1. Runs inside
# rel_run.
registry_upgrade_checks() {
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
}

# recreate_checks: 3(b) the plugin removed and re-created under its name with its settings (make
# install), then everything removed. Runs inside rel_run.
recreate_checks() {
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
e2e_preflight nsenter:util-linux ss:iproute2

suite_start rel rdma-macvlan fakesysfs rmvstatus
[[ -x /bin/busybox ]] || die "/bin/busybox not found (busybox-static)"
run_engines rel_run
