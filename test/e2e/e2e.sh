#!/usr/bin/env bash
# e2e.sh: end-to-end suite of rdma-macvlan against real Docker engines, as a managed plugin and as
# a legacy plugin (the binary run directly).
#
# For each engine and mode: a veth pair in the host netns as the RoCE parent (unique names, both
# ends up), a fake but faithful mlx5 sysfs tree for it (test/fakesysfs), a private dockerd
# (scripts/dockerd.sh) with the busybox test image (scripts/mkimage.sh), the plugin built from the
# working tree, then the checks a user would see: network create with parent/mtu/macvlan_mode, a
# VLAN parent, refused options with the plugin's text in the docker CLI, two containers with their
# address and MTU pinging each other, the CDI spec and /v1/status (GID readiness after the fake
# kernel adds the entries), docker rm -f, plugin restart under running containers, dockerd restart
# with a --restart always container, docker network rm, and a swarm service on a --config-from
# network. Every check prints `ok - ...` or `not ok - ...`; the last line is `N passed, N failed`.
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines), iproute2, nsenter.
# Leaves behind: nothing of a run (links, processes, mounts, sockets, temp dirs), also when a step
#   fails; only what scripts/engines.sh installs and caches on purpose.
#
# Usage: e2e.sh [debian] [v27] [v28] [current]   (default: debian, the middle engines (v28; E2E_MIDDLE_ENGINES adds v27), current)
# Environment:
#   E2E_MODES        "managed legacy" (default both; on a middle engine managed only, unless
#                    E2E_MODES is set)
#   E2E_CMD_TIMEOUT  seconds any single docker command may take (default 90)
#   E2E_LOG_LINES    lines of daemon logs shown after a failed run (default 40)
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"

# ---------------------------------------------------------------------------------------------
# State of the current run beyond the harness's (rdir, ddir, links); teardown undoes it.
work=""          # temp dir of the whole suite (binaries, plugin dir)
legacy_pid=""    # the legacy daemon this run started
legacy_sock=""   # its socket under /run/docker/plugins
gwbridge_ours="" # swarm init made docker_gwbridge in the host netns

stop_legacy() {
	if [[ -n $legacy_pid ]]; then
		stop_pid "$legacy_pid" 15
		wait "$legacy_pid" 2>/dev/null || true
		legacy_pid=""
	fi
	[[ -n $legacy_sock ]] && rm -f "$legacy_sock"
	return 0
}

# teardown_hook: the harness's teardown runs it once the engine is emptied.
teardown_hook() {
	stop_legacy
	if [[ -n $gwbridge_ours ]] && ip link show docker_gwbridge >/dev/null 2>&1; then
		ip link del docker_gwbridge
	fi
	gwbridge_ours=""
}
e2e_traps

# ---------------------------------------------------------------------------------------------
# Helpers of a run.

# ep_line IP prints the status line of the endpoint with IPv4 address IP.
ep_line() { status | awk -v ip="ipv4=$1" '$1 == "endpoint" { for (i = 4; i <= NF; i++) if ($i == ip) print }'; }

# ep_has IP REGEX: the endpoint with IP exists and its line matches REGEX.
ep_has() {
	local l
	l=$(ep_line "$1")
	[[ -n $l ]] || { echo "no endpoint with ipv4 $1 in /v1/status:"; status; return 1; }
	grep -Eq -- "$2" <<<"$l" || { echo "endpoint line does not match /$2/: $l"; return 1; }
}

# has_addr CONTAINER IP/LEN MTU: eth0 in CONTAINER has the address and the MTU.
has_addr() {
	local out mtu
	out=$(dk exec "$1" ip -4 -o addr show dev eth0) || return 1
	grep -qF " $2 " <<<"$out" || { echo "eth0 of $1 has no $2: $out"; return 1; }
	mtu=$(dk exec "$1" cat /sys/class/net/eth0/mtu) || return 1
	[[ $mtu == "$3" ]] || { echo "eth0 of $1 has MTU $mtu, want $3"; return 1; }
}

# is_macvlan CONTAINER MODE: eth0 of CONTAINER is a macvlan in MODE (seen with the host's iproute2,
# busybox ip has no -d).
is_macvlan() {
	local out
	out=$(nsenter -t "$(cpid "$1")" -n ip -d link show dev eth0) || return 1
	grep -qE "macvlan mode $2( |$)" <<<"$out" || { echo "eth0 of $1 is not a macvlan in $2 mode: $out"; return 1; }
}

state_files() { find "$rdir/state/networks" "$rdir/state/endpoints" -type f 2>/dev/null; }

cdi_spec() { printf '%s\n' "$rdir/cdi/rdma-macvlan-$HCA.json"; }

cdi_spec_ok() {
	local f
	f=$(cdi_spec)
	[[ -f $f ]] || { echo "no $f; $rdir/cdi has: $(entries "$rdir/cdi")"; return 1; }
	grep -Eq '"kind": *"rdma-macvlan/hca"' "$f" || { echo "kind is not rdma-macvlan/hca:"; cat "$f"; return 1; }
	grep -Eq '"name": *"'"$HCA"'"' "$f" || { echo "no device named $HCA:"; cat "$f"; return 1; }
	grep -q '/dev/infiniband/uverbs0' "$f" || { echo "no uverbs0 node:"; cat "$f"; return 1; }
	if grep -Eq 'umad|issm' "$f"; then echo "management nodes (umad/issm) in the spec:"; cat "$f"; return 1; fi
}

no_cdi_spec() {
	local l
	l=$(entries "$rdir/cdi")
	[[ -z $l ]] || { echo "$rdir/cdi still has: $l"; return 1; }
}

# ifname_of IP: the host-side name of the endpoint's link, from the status.
ifname_of() { field ifname "$(ep_line "$1")"; }

# stop_legacy_clean stops the legacy daemon with SIGTERM and wants what a user relies on: exit
# status 0 and its socket removed by the daemon itself.
stop_legacy_clean() {
	local rc=0
	stop_pid "$legacy_pid" 15
	wait "$legacy_pid" || rc=$?
	legacy_pid=""
	((rc == 0)) || { echo "the daemon exited with status $rc on SIGTERM"; tail -n 5 "$rdir/legacy.log"; return 1; }
	[[ ! -e $legacy_sock ]] || { echo "the daemon left its socket $legacy_sock"; return 1; }
}

# start_legacy starts the binary as a legacy plugin and waits for its socket.
start_legacy() {
	mkdir -p /run/docker/plugins
	setsid "$work/bin/rdma-macvlan" --socket "$legacy_sock" --state-dir "$rdir/state" \
		--sysfs-root "$rdir/sysfs" --cdi-dir "$rdir/cdi" --log-level debug \
		</dev/null >>"$rdir/legacy.log" 2>&1 &
	legacy_pid=$!
	poll 15 status >/dev/null || { echo "legacy daemon does not answer on $legacy_sock"; tail -n 20 "$rdir/legacy.log"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# Predicates of single checks. They read the run's variables (bash scoping is dynamic).

net_listed() {
	local l
	l=$(net_line "$nid")
	grep -Eq "parent=$parent hca=$HCA port=1 netns_mode=shared gid_size=255 " <<<"$l" ||
		{ echo "want parent=$parent hca=$HCA port=1 netns_mode=shared gid_size=255, got:"; status; return 1; }
}

vlan_created() {
	local out
	out=$(ip -d link show dev "$parent.42") || return 1
	grep -q 'vlan protocol 802.1Q id 42 ' <<<"$out" || { echo "$out"; return 1; }
}

refused_left_nothing() {
	local l
	l=$(dk network ls -q --filter name="$net-")
	[[ -z $l ]] || { echo "networks left: $l"; return 1; }
	link_absent "$parent.42" || { echo "link $parent.42 left"; return 1; }
	l=$(entries "$rdir/cdi")
	[[ $l == "rdma-macvlan-$HCA.json" ]] || { echo "cdi dir has: $l"; return 1; }
	l=$(entries "$rdir/state/networks")
	(($(wc -l <<<"$l") == 1)) || { echo "network state files: $l"; return 1; }
}

both_listed() {
	net_endpoints "$nid" 2 && ep_has "$ip1" "ifname=rmv[0-9a-f]{12} " && ep_has "$ip2" "ifname=rmv[0-9a-f]{12} "
}

# net_has NID REGEX: the status line of network NID matches REGEX.
net_has() {
	local l
	l=$(net_line "$1")
	grep -Eq -- "$2" <<<"$l" || { echo "network line does not match /$2/: $l"; return 1; }
}

# strict_start_waits: on the current engine a strict container's docker run returns only once its
# GID entry exists; the (fake) kernel adds it while docker run waits.
strict_start_waits() {
	local pid t0 rc=0
	t0=$(now_ms)
	dk run -d --name "$net-s1" --network "$net-strict" --ip "$ips1" "$IMAGE" "${SLEEPER[@]}" >"$rdir/s1.out" 2>&1 &
	pid=$!
	if ! poll 15 ep_has "$ips1" "ifname=rmv"; then
		fail "strict: the container's endpoint appears while docker run waits"
		wait "$pid" || true
		return 0
	fi
	sleep 1
	if ! kill -0 "$pid" 2>/dev/null; then
		fail "strict: docker run waits for the GID entries (it returned before they existed)" "$(cat "$rdir/s1.out")"
		return 0
	fi
	pass "strict: docker run waits while the container's GID entries are missing"
	"$work/bin/fakesysfs" add-ip -root "$rdir/sysfs" -hca "$HCA" -ip "$ips1" -ndev eth0 >/dev/null
	wait "$pid" || rc=$?
	if ((rc == 0)) && running "$net-s1"; then
		pass "strict: once the (fake) kernel adds them, the start completes$(took "$t0")"
	else
		fail "strict: once the (fake) kernel adds them, the start completes" "$(cat "$rdir/s1.out")"
	fi
	"$work/bin/fakesysfs" del-ip -root "$rdir/sysfs" -hca "$HCA" -ip "$ips1" >/dev/null
}

strict_refused() {
	local out
	if out=$(dk run -d --name "$net-s2" --network "$net-strict" --ip "$ips2" "$IMAGE" "${SLEEPER[@]}" 2>&1); then
		echo "started: $out"
		return 1
	fi
	if ! grep -q 'gid_check=strict' <<<"$out" || ! grep -q 'did not appear' <<<"$out"; then
		echo "docker said: $out"
		return 1
	fi
}

both_not_ready() { ep_has "$ip1" "rdma_ready=false gids=- " && ep_has "$ip2" "rdma_ready=false gids=- "; }

# ping_pair A IP-OF-B B IP-OF-A: each pings the other.
ping_pair() { pings "$1" "$2" && pings "$3" "$4"; }

listed_after_restart() {
	net_endpoints "$nid" 2 && ep_has "$ip1" "ifname=$if1 .*rdma_ready=true gids=${idx1// /,} " && ep_has "$ip2" "ifname=$if2 "
}

no_endpoints() { net_endpoints "$nid" 0 && no_endpoint_state; }

# links_gone IFNAME...: the links are gone and the network has no endpoint left.
links_gone() { no_host_link "$@" && no_endpoints; }

new_pair_ok() {
	has_addr "$net-c" "$ip3/24" 1400 && has_addr "$net-d" "$ip4/24" 1400 && ping_pair "$net-c" "$ip4" "$net-d" "$ip3"
}

restarted_back() { running "$net-r" && has_addr "$net-r" "$ipr/24" 1400; }

new_pings_restarted() { run_c "$net-e" "$ip3" && pings "$net-e" "$ipr"; }

net_removed() {
	no_cdi_spec || return 1
	[[ -z $(net_line "$nid") ]] || { echo "network still in /v1/status"; return 1; }
	[[ -z $(state_files) ]] || { echo "state left: $(state_files)"; return 1; }
}

swarm_clean() {
	no_cdi_spec || return 1
	[[ -z $(state_files) ]] || { echo "state left: $(state_files)"; return 1; }
	link_absent docker_gwbridge || { echo "docker_gwbridge still there"; return 1; }
}

svc_removed() { dk service rm "$1" >/dev/null && poll 30 no_task_containers "$1"; }

nets_removed() { poll 30 dk network rm "$1" >/dev/null && poll 30 dk network rm "$2" >/dev/null; }

# ---------------------------------------------------------------------------------------------
# One run: engine $1, mode $2.
e2e_run() {
	engine=$1 mode=$2
	local id sub sub2 ip1 ip2 ip3 ip4 ipr nid out idx1 idx2 if1 if2 if3 if4 t0 plugin_id="" rd stopped
	local swaddr peer swlink swpeer lsock
	local -a extra=()
	tag="$engine/$mode"
	run_failed=""
	t0=$(date +%s)
	stopped=0
	run_setup
	network_checks; ((!stopped)) || return 0
	container_checks; ((!stopped)) || return 0
	strict_checks
	plugin_restart_checks
	dockerd_restart_checks
	swarm_checks
	say "teardown"
	# --- teardown and leftovers -----------------------------------------------------------------
	[[ -z $run_failed ]] || show_logs
	rd=$rdir lsock=$legacy_sock
	teardown
	legacy_sock=""
	check "nothing left: links, namespaces, processes, mounts, plugin socket, dir and process, temp dir" \
		run_leftovers "$id" "$rd" "$plugin_id" "$lsock"
	say "run took $(($(date +%s) - t0)) s"
	timings+=("$engine/$mode: $(($(date +%s) - t0)) s")
}

# run_setup: the run's names and addresses, the veth parent and its fake tree, the engine and the
# plugin (managed or legacy). Runs inside e2e_run.
run_setup() {
	new_id rmve
	parent=rmve${id}p peer=rmve${id}q swlink=rmve${id}s swpeer=rmve${id}t
	net=rmv-e2e-$id
	sub=10.231.$((0x${id:0:2} % 120 * 2 + 1))
	sub2=10.231.$((0x${id:0:2} % 120 * 2 + 2))
	ip1=$sub.11 ip2=$sub.12 ip3=$sub.13 ip4=$sub.14 ipr=$sub.21 ips1=$sub2.31 ips2=$sub2.32
	swaddr=198.18.$((0x${id:0:2})).$((0x${id:2:2} % 250 + 2))
	rdir=$(mktemp -d /tmp/rmv-e2e.XXXXXX)
	mkdir -p "$rdir/state" "$rdir/cdi"
	say "run $id: parent $parent, subnet $sub.0/24, dir $rdir"

	# The parent: a veth pair, both ends up; its fake RDMA tree carries its name and MAC.
	veth_parent "$parent" "$peer"
	fake_hca "$rdir/sysfs" "$HCA" "$parent"

	# Engines with CDI (25+) read specs from the plugin's cdi dir, so --device can be checked.
	engine_since "$engine" 25 && extra=(-- --cdi-spec-dir "$rdir/cdi")
	engine_up "$rdir/d" "$engine" "${extra[@]}"

	if [[ $mode == managed ]]; then
		drv=$PLUGIN
		plugin_up "$work/plugin" "$rdir/state" "$rdir/cdi" "$rdir/sysfs/sys" RDMA_MACVLAN_LOG_LEVEL=debug
		plugin_id=$(dk plugin inspect -f '{{.Id}}' "$PLUGIN")
		sock=/run/docker/plugins/$plugin_id/rdma-macvlan.sock
	else
		drv=rdma-macvlan-e2e-$id
		legacy_sock=/run/docker/plugins/$drv.sock
		sock=$legacy_sock
		start_legacy
	fi
	check "plugin answers GET /v1/status on $sock" poll 15 status
	say "setup done in $(($(date +%s) - t0)) s; driver $drv"
}

# network_checks: network create, the options refused, a VLAN parent; sets stopped when no network
# could be created (the rest is skipped). Runs inside e2e_run.
network_checks() {
	# --- network create and refused options ---------------------------------------------------
	if out=$(dk network create -d "$drv" --subnet "$sub.0/24" -o parent="$parent" -o mtu=1400 \
		-o macvlan_mode=bridge "$net" 2>&1); then
		nid=$out
		pass "network create -d $drv -o parent=$parent -o mtu=1400 -o macvlan_mode=bridge"
	else
		fail "network create -d $drv -o parent=$parent -o mtu=1400 -o macvlan_mode=bridge" "$out"
		show_logs
		stopped=1; return 0
	fi
	check "CDI spec $(basename "$(cdi_spec)") in the cdi dir: kind rdma-macvlan/hca, device $HCA, uverbs0, no umad/issm" cdi_spec_ok
	check "/v1/status lists the network: parent $parent, hca $HCA port 1, shared netns mode, 255-slot GID table" \
		poll 5 net_listed

	refused "unknown option: the CLI shows the plugin's error listing the valid options" \
		'unknown option "foo"' 'parent, macvlan_mode, mtu' -- \
		dk network create -d "$drv" --subnet "$sub2.0/24" -o parent="$parent" -o foo=bar "$net-bad"
	refused "mtu above the parent's: the CLI shows the plugin's error" \
		"mtu 9000 is larger than the MTU 1500 of parent \"$parent\"" -- \
		dk network create -d "$drv" --subnet "$sub2.0/24" -o parent="$parent" -o mtu=9000 "$net-bad"
	refused "parent not found: the CLI shows the plugin's error" \
		"parent \"rmve${id}x\" not found" -- \
		dk network create -d "$drv" --subnet "$sub2.0/24" -o parent="rmve${id}x" "$net-bad"
	refused "bad macvlan_mode: the CLI shows the plugin's error listing the modes" \
		'option macvlan_mode="weird" is not a macvlan mode' 'bridge, private, vepa, passthru' -- \
		dk network create -d "$drv" --subnet "$sub2.0/24" -o parent="$parent" -o macvlan_mode=weird "$net-bad"
	refused "parent without an RDMA device ($peer): the CLI shows the plugin's error" \
		"parent \"$peer\" has no RDMA device" -- \
		dk network create -d "$drv" --subnet "$sub2.0/24" -o parent="$peer" "$net-bad"
	# VLAN parent: created and deleted with the network where the kernel has 802.1Q.
	if out=$(dk network create -d "$drv" --subnet "$sub2.0/24" -o parent="$parent.42" "$net-vlan" 2>&1); then
		links+=("$parent.42")
		check "VLAN parent $parent.42: the sub-interface is created" vlan_created
		check "VLAN parent: docker network rm" dk network rm "$net-vlan"
		check "VLAN parent: docker network rm deleted the sub-interface it created" link_absent "$parent.42"
	elif grep -qF "no 802.1Q VLAN support" <<<"$out" && grep -qF "create VLAN sub-interface $parent.42" <<<"$out"; then
		pass "VLAN parent $parent.42 on this kernel without 802.1Q: the plugin's error reaches the docker CLI (the VLAN life cycle itself is not checked here)" "docker said: $out"
	else
		fail "VLAN parent $parent.42: neither created nor refused with the 802.1Q error" "$out"
	fi
	check "refused networks left nothing: no network, no link, no other CDI spec, one network in the state" \
		refused_left_nothing
}

# container_checks: two containers, their addresses, MTU, pings, links and CDI devices; sets stopped
# when they do not start. Runs inside e2e_run.
container_checks() {
	say "containers"
	# --- two containers ---------------------------------------------------------------------
	if run_c "$net-a" "$ip1" && run_c "$net-b" "$ip2"; then
		pass "two containers start on the network"
	else
		fail "two containers start on the network"
		show_logs
		stopped=1; return 0
	fi
	check "container a has $ip1/24 and MTU 1400 on eth0" has_addr "$net-a" "$ip1/24" 1400
	check "container b has $ip2/24 and MTU 1400 on eth0" has_addr "$net-b" "$ip2/24" 1400
	check "eth0 of container a is a macvlan in bridge mode" is_macvlan "$net-a" bridge
	check "container a pings container b" pings "$net-a" "$ip2"
	check "container b pings container a" pings "$net-b" "$ip1"
	check "/v1/status shows both endpoints (link, address) on the network" both_listed
	if1=$(ifname_of "$ip1") if2=$(ifname_of "$ip2")
	check "/v1/status: not rdma_ready before the kernel adds the GID entries" both_not_ready
	idx1=$("$work/bin/fakesysfs" add-ip -root "$rdir/sysfs" -hca "$HCA" -ip "$ip1" -ndev eth0)
	check "after the (fake) kernel adds $ip1 at GID indexes ${idx1// /,}: /v1/status shows a rdma_ready with them" \
		poll 5 ep_has "$ip1" "rdma_ready=true gids=${idx1// /,} "
	idx2=$("$work/bin/fakesysfs" add-ip -root "$rdir/sysfs" -hca "$HCA" -ip "$ip2" -ndev eth0)
	check "after the (fake) kernel adds $ip2 at GID indexes ${idx2// /,}: /v1/status shows b rdma_ready with them" \
		poll 5 ep_has "$ip2" "rdma_ready=true gids=${idx2// /,} "
	if engine_since "$engine" 25; then
		check "docker run --device rdma-macvlan/hca=$HCA (CDI): uverbs0 and rdma_cm with the tree's numbers, mode 0666, no umad/issm, the spec's env" \
			cdi_device_ok
	else
		skip "docker run --device rdma-macvlan/hca=$HCA: Docker before 25 has no CDI"
	fi
}

# strict_checks: gid_check=strict, per engine. Runs inside e2e_run.
strict_checks() {
	say "gid_check=strict"
	# --- gid_check=strict, per engine ---------------------------------------------------------
	# Docker 28+ asks the driver after the container has its addresses: strict holds the start
	# until the GID entries exist and fails it when they do not come. Docker 20.10 asks inside
	# Join, before any address exists: strict must let the start go on and say why.
	if check "a gid_check=strict network on the same parent" \
		dk network create -d "$drv" --subnet "$sub2.0/24" -o parent="$parent" -o gid_check=strict "$net-strict"; then
		snid=$(dk network inspect -f '{{.Id}}' "$net-strict")
		if engine_since "$engine" 28; then
			strict_start_waits
			check "strict: a container whose GID entries never appear is refused with the reason" strict_refused
		else
			check "strict before Docker 28: a container starts although its GID entries are not there yet" \
				dk run -d --name "$net-s1" --network "$net-strict" --ip "$ips1" "$IMAGE" "${SLEEPER[@]}"
			check "strict before Docker 28: /v1/status says strict works as warn, and why" \
				poll 5 net_has "$snid" 'gid_check=strict gid_check_note=".*Docker before 28.*works as warn'
		fi
		dk rm -f "$net-s1" "$net-s2" >/dev/null 2>&1 || true
		check "the strict network is removed" dk network rm "$net-strict"
	fi
}

# plugin_restart_checks: the plugin restarted under running containers. Runs inside e2e_run.
plugin_restart_checks() {
	say "plugin restart"
	# --- plugin restart under running containers ----------------------------------------------
	if [[ $mode == managed ]]; then
		check "docker plugin disable -f with containers running" dk plugin disable -f "$PLUGIN"
		check "containers keep pinging while the plugin is disabled" pings "$net-a" "$ip2"
		check "docker plugin enable" dk plugin enable "$PLUGIN"
	else
		check_here "legacy daemon stopped with SIGTERM, containers running: exit status 0, socket removed" stop_legacy_clean
		check "containers keep pinging while the daemon is down" pings "$net-a" "$ip2"
		check_here "legacy daemon started again" start_legacy
	fi
	check "containers keep pinging after the plugin is back" ping_pair "$net-a" "$ip2" "$net-b" "$ip1"
	check "/v1/status after the restart: both endpoints from the state, a still rdma_ready" \
		poll 10 listed_after_restart
	check "container b can be stopped and removed after the restart" stop_and_rm "$net-b"
	"$work/bin/fakesysfs" del-ip -root "$rdir/sysfs" -hca "$HCA" -ip "$ip2" >/dev/null
	check "docker rm -f of container a" dk rm -f "$net-a"
	"$work/bin/fakesysfs" del-ip -root "$rdir/sysfs" -hca "$HCA" -ip "$ip1" >/dev/null
	check "docker rm -f / rm: their host links $if1 $if2 are gone, no macvlan left on $parent, no endpoint left" \
		poll 5 links_gone "$if1" "$if2"
	if run_c "$net-c" "$ip3" && run_c "$net-d" "$ip4"; then
		pass "new containers start after the restart"
		check "new containers have their address and MTU and ping each other" new_pair_ok
	else
		fail "new containers start after the restart"
	fi
	if3=$(ifname_of "$ip3") if4=$(ifname_of "$ip4")
	check "docker rm -f of both" dk rm -f "$net-c" "$net-d"
	check "after docker rm -f: their host links ${if3:-?} ${if4:-?} are gone, no endpoint left" poll 5 links_gone "$if3" "$if4"
}

# dockerd_restart_checks: the private dockerd restarted with a --restart always container, then
# docker network rm. Runs inside e2e_run.
dockerd_restart_checks() {
	say "dockerd restart"
	# --- private dockerd restarted ------------------------------------------------------------
	if run_c "$net-r" "$ipr" --restart always; then
		pass "a --restart always container starts"
		check_here "dockerd stopped and started again (same data root)" restart_dockerd "$ddir"
		check "the --restart always container is back, with $ipr/24 and MTU 1400" poll 30 restarted_back
		check "the network is still usable: a new container starts on it and pings the restarted one" new_pings_restarted
		check "/v1/status after the dockerd restart: both containers' endpoints" poll 10 net_endpoints "$nid" 2
		if3=$(ifname_of "$ipr") if4=$(ifname_of "$ip3")
		check "docker rm -f of both" dk rm -f "$net-r" "$net-e"
		check "after docker rm -f: their host links ${if3:-?} ${if4:-?} are gone, no endpoint left" poll 5 links_gone "$if3" "$if4"
	else
		fail "a --restart always container starts"
	fi

	# --- docker network rm ----------------------------------------------------------------------
	check "docker network rm" dk network rm "$net"
	check "docker network rm: CDI spec removed, network gone from /v1/status and the state" poll 5 net_removed
}

# swarm_checks: a one-node swarm on a test veth: a swarm-scoped network and a service. Runs
# inside e2e_run.
swarm_checks() {
	say "swarm"
	# --- swarm ------------------------------------------------------------------------------------
	if ! link_absent docker_gwbridge; then
		fail "swarm: the host has a docker_gwbridge already (another engine's); not touching it"
	else
		veth_parent "$swlink" "$swpeer"
		ip addr add "$swaddr/32" dev "$swlink"
		if out=$(dk swarm init --advertise-addr "$swaddr" --listen-addr "$swaddr:2377" --data-path-addr "$swaddr" 2>&1); then
			gwbridge_ours=1
			pass "docker swarm init --advertise-addr $swaddr (on test veth $swlink)"
			swarm_service "$net-cfg" "$net-sw" "$net-svc" "$sub2"
		else
			fail "docker swarm init --advertise-addr $swaddr" "$out"
		fi
		check "docker swarm leave --force" dk swarm leave --force
		# The engine leaves the bridge of swarm's gateway network behind; it is this run's.
		dk network rm docker_gwbridge >/dev/null 2>&1 || true
		check "after swarm: no CDI spec, no state, no docker_gwbridge" poll 10 swarm_clean
	fi
}

# cdi_device_ok runs a container with the HCA's CDI device and looks at what it got.
cdi_device_ok() {
	local out want_uv want_cm nodes
	want_uv=$(tr ':' ',' <"$rdir/sysfs/sys/class/infiniband_verbs/uverbs0/dev")
	want_cm=$(tr ':' ',' <"$rdir/sysfs/sys/class/misc/rdma_cm/dev")
	out=$(dk run --rm --network "$net" --device "rdma-macvlan/hca=$HCA" "$IMAGE" \
		sh -c 'ls -l /dev/infiniband; env' 2>&1) || { echo "$out"; return 1; }
	nodes=$(awk '$1 ~ /^c/ {print $1, $5 $6, $NF}' <<<"$out" | sort)
	[[ $nodes == "crw-rw-rw- $want_cm rdma_cm"$'\n'"crw-rw-rw- $want_uv uverbs0" ]] ||
		{ echo "want rdma_cm $want_cm and uverbs0 $want_uv (0666) only, got:"; echo "$out"; return 1; }
	grep -qx "RDMA_MACVLAN_DEVICE_$HCA=$HCA:1" <<<"$out" || { echo "no RDMA_MACVLAN_DEVICE_$HCA=$HCA:1 in the env:"; echo "$out"; return 1; }
	grep -qx "RDMA_MACVLAN_NETDEV_$HCA=$parent" <<<"$out" || { echo "no RDMA_MACVLAN_NETDEV_$HCA=$parent in the env:"; echo "$out"; return 1; }
}

# swarm_service CFG NET SVC SUBNET-PREFIX: a config-only network, a swarm network on the driver
# from it, a service with 2 replicas on it; then all of it removed again.
swarm_service() {
	local cfg=$1 swnet=$2 svc=$3 s=$4 out swnid c n
	local -a reps=()
	if ! out=$(dk network create --config-only --subnet "$s.0/24" -o parent="$parent" -o mtu=1450 "$cfg" 2>&1); then
		fail "swarm: docker network create --config-only -o parent=$parent" "$out"
		return 0
	fi
	pass "swarm: docker network create --config-only --subnet $s.0/24 -o parent=$parent -o mtu=1450"
	if ! out=$(dk network create -d "$drv" --scope swarm --config-from "$cfg" "$swnet" 2>&1); then
		# Swarm takes network drivers from managed plugins only; record the engine's refusal.
		if [[ $mode == legacy ]] && grep -qF "legacy plugin $drv of type NetworkDriver is not supported in swarm mode" <<<"$out"; then
			pass "swarm: the engine refuses a --scope swarm network on a legacy plugin (recorded; no service to check)" "docker said: $out"
		else
			fail "swarm: docker network create -d $drv --scope swarm --config-from $cfg refused" "$out"
		fi
		check "swarm: config-only network removed" dk network rm "$cfg"
		return 0
	fi
	swnid=$out
	pass "swarm: docker network create -d $drv --scope swarm --config-from $cfg"
	if ! out=$(dk service create --detach --no-resolve-image --replicas 2 --name "$svc" --network "$swnet" \
		"$IMAGE" "${SLEEPER[@]}" 2>&1); then
		fail "swarm: docker service create --replicas 2 --network $swnet refused" "$out"
	else
		if out=$(poll 60 replicas_running "$svc" 2); then
			pass "swarm: both replicas of the service run"
			say "swarm: replicas run"
			mapfile -t reps < <(dk ps -q --filter "label=com.docker.swarm.service.name=$svc")
			out=""
			for c in "${reps[@]}"; do
				n=$(dk exec "$c" ip -4 -o addr show dev eth0 | grep -oE "$s\.[0-9]+/24" || true)
				[[ -n $n ]] || out+="replica $c has no address in $s.0/24 on eth0; "
				[[ $(dk exec "$c" cat /sys/class/net/eth0/mtu) == 1450 ]] || out+="replica $c: eth0 MTU is not 1450; "
			done
			if [[ -z $out ]]; then
				pass "swarm: each replica has an address in $s.0/24 and MTU 1450 on eth0"
			else
				fail "swarm: each replica has an address in $s.0/24 and MTU 1450 on eth0" "$out"
			fi
			n=$(dk exec "${reps[1]}" ip -4 -o addr show dev eth0 | grep -oE "$s\.[0-9]+" | head -n 1 || true)
			check "swarm: replica 1 pings replica 2 (${n:-no address})" pings "${reps[0]}" "$n"
			check "swarm: /v1/status lists the swarm network with both replicas' endpoints" poll 5 net_endpoints "$swnid" 2
		else
			fail "swarm: both replicas of the service run" "$out" "$(dk service ps --no-trunc "$svc" 2>&1)"
		fi
		check "swarm: docker service rm; its containers go" svc_removed "$svc"
		say "swarm: service removed"
	fi
	check "swarm: both networks removed" nets_removed "$swnet" "$cfg"
}

replicas_running() {
	local ids n=0 c
	ids=$(dk ps -q --filter "label=com.docker.swarm.service.name=$1" --filter status=running) || return 1
	for c in $ids; do n=$((n + 1)); done
	((n == $2)) || { echo "$n of $2 running"; return 1; }
}

no_task_containers() { [[ -z $(dk ps -aq --filter "label=com.docker.swarm.service.name=$1") ]]; }

# run_leftovers ID RUNDIR PLUGIN-ID LEGACY-SOCKET: the harness's leftovers, and also the legacy
# socket and a docker_gwbridge that was not there before the suite.
run_leftovers() {
	local out="" rc=0
	out=$(leftovers "rmve$1" "$2" "$3") || rc=1
	[[ -z $gw_before_any ]] && ! link_absent docker_gwbridge && { out+=$'\nlink docker_gwbridge'; rc=1; }
	[[ -n $4 && -e $4 ]] && { out+=$'\nplugin socket '$4; rc=1; }
	((rc == 0)) || { sed '/^$/d' <<<"$out"; return 1; }
}

# ---------------------------------------------------------------------------------------------
select_engines --both --middle "$@"
read -r -a modes <<<"${E2E_MODES:-managed legacy}"
for m in "${modes[@]}"; do
	[[ $m == managed || $m == legacy ]] || die "unknown mode '$m' in E2E_MODES (want: managed, legacy)"
done
e2e_preflight nsenter:util-linux

say "modes: ${modes[*]}"
gw_before_any=""
ip link show docker_gwbridge >/dev/null 2>&1 && gw_before_any=1
suite_start e2e rdma-macvlan fakesysfs rmvstatus
make_plugin_dir "$work/plugin"

# e2e_engine ENGINE: a run on ENGINE in each mode.
e2e_engine() {
	local m
	local -a ms=("${modes[@]}")
	if engine_middle "$1" && [[ -z ${E2E_MODES:-} ]]; then
		ms=(managed)
		printf '# skip - [%s/legacy] a middle engine runs the managed plugin only (E2E_MODES="managed legacy" runs both)\n' "$1"
	fi
	for m in "${ms[@]}"; do
		e2e_run "$1" "$m"
		teardown
	done
}
run_engines e2e_engine
