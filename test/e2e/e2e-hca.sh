#!/usr/bin/env bash
# e2e-hca.sh: the HCA behind each network across a change of names, two containers with one
# address on one port, GID entries that move under a running container, and gid_check=strict with
# a container on two networks, on real Docker engines with the managed plugin.
#
# For each engine (Debian's 20.10, the current moby): two veth pairs in the host netns as RoCE
# parents, one fake mlx5 HCA each (test/fakesysfs: mlx5_0 with uverbs0 on the first parent's PCI
# function, mlx5_1 with uverbs1 on the second's), a private dockerd reading the plugin's CDI
# directory (CDI engines), the plugin built from the working tree. The checks:
#   1. a network per parent: each names its parent's HCA;
#   2. the same address on one port: a second network on the first parent whose subnet overlaps
#      the first's (libnetwork checks no overlap for a subnet given with --ip-range); a container
#      on each with the same --ip: the second is refused, the message naming both;
#   3. drift: a running container's entries are deleted and added again behind another address's
#      (a bond failover): /v1/status shows the index given next to the current one, and the
#      daemon logs it once;
#   4. strict (current engine only: before Docker 28 strict works as warn): 20 containers on a
#      strict network and another network, the gateway alternating between them (gw-priority),
#      the engine joining them in its own (map) order; the fake kernel adds each endpoint's
#      entries 1.5 s after it appears. Every start must succeed, and only once the strict
#      network's entries are there;
#   5. another probe order: the HCAs' names and uverbs numbers swapped under the parents
#      (fakesysfs swap-hca), the plugin restarted: each network follows its parent's NIC (status,
#      CDI spec with the NIC's uverbs node), the daemon logs the rename, and a new container on
#      the first network becomes RDMA-ready when its entries appear in the table now named mlx5_1.
# Every check prints `ok - ...` or `not ok - ...`; the last line is `N passed, N failed`.
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines), iproute2, curl, jq.
# Leaves behind: nothing of a run (links, processes, temp dirs), also when a step fails.
#
# Usage: e2e-hca.sh [debian] [current]   (default: both if the current engine is built, else debian)
# Environment: E2E_CMD_TIMEOUT  seconds any single docker command may take (default 90)
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"

work="" # temp dir of the suite
e2e_traps

# sj prints the plugin's /v1/status as JSON.
sj() { curl -sf --unix-socket "$sock" http://rdma-macvlan/v1/status; }

# hca_of NID: the HCA the status gives network NID.
hca_of() { sj | jq -r --arg id "$1" '.networks[] | select(.id == $id) | .hca // "-"'; }

# net_on NID HCA UVERBS: network NID is on HCA, and the CDI spec of HCA gives /dev/infiniband/UVERBS.
net_on() {
	local got spec
	got=$(hca_of "$1")
	[[ $got == "$2" ]] || { echo "network ${1:0:12} is on '$got', want $2"; return 1; }
	spec=$rdir/cdi/rdma-macvlan-$2.json
	grep -q "/dev/infiniband/$3\"" "$spec" || { echo "$spec does not give $3:"; cat "$spec"; return 1; }
}

# nets_on HCA-A UVERBS-A HCA-B UVERBS-B: the run's networks a and b are on those HCAs (net_on).
nets_on() { net_on "$anid" "$1" "$2" && net_on "$bnid" "$3" "$4"; }

# ready_recorded IP: the endpoint with IP is ready, and the daemon recorded the entries it found.
ready_recorded() { poll 15 ep_ready "$1" && poll 5 grep -q "endpoint rdma ready" "$rdir/d/dockerd.log"; }

# plugin_restart: the managed plugin disabled and enabled, answering again.
plugin_restart() { dk plugin disable -f "$PLUGIN" && dk plugin enable "$PLUGIN" && poll 15 sj; }

# moved_logged_once: a status read, then the daemon's one line about the move.
moved_logged_once() { sj >/dev/null && logged_once "GID entries moved after it was ready"; }

# ep_json IP: the status of the endpoint with IPv4 address IP.
ep_json() { sj | jq -c --arg ip "$1" '.networks[].endpoints[] | select(.ipv4 == $ip)'; }

ep_ready() { [[ $(ep_json "$1" | jq -r .rdma_ready) == true ]] || { ep_json "$1"; return 1; }; }

# drift_shown IP GIVEN NOW: the endpoint's RoCE v2 entry was given GIVEN and is at NOW.
drift_shown() {
	local got
	got=$(ep_json "$1" | jq -r '[.gid_drift[]? | select(.type == "RoCE v2") | "\(.given_index)->\(.index)"] | join(",")')
	[[ $got == "$2->$3" ]] || { echo "gid_drift of $1: '$got', want $2->$3"; ep_json "$1"; return 1; }
}

logged_once() {
	local n
	n=$(grep -c "$1" "$rdir/d/dockerd.log" || true)
	[[ $n == 1 ]] || { echo "'$1' logged $n times, want once"; return 1; }
}

# uptime_cs: the host's uptime in centiseconds (/proc/uptime is not namespaced: a container reads
# the same clock).
uptime_cs() { local u; read -r u _ </proc/uptime; echo "${u/./}"; }

# fake_kernel HCA IP MARK: waits (at most 30 s) for the endpoint with IP in the status, then (1.5 s
# later, longer than the rest of a start takes here, as a slow kernel) writes the uptime to MARK and
# adds its entries to HCA.
fake_kernel() {
	local hca=$1 ip=$2 mark=$3 i
	for ((i = 0; i < 600; i++)); do
		[[ -n $(ep_json "$ip") ]] && break
		sleep 0.05
	done
	((i < 600)) || return 1
	sleep 1.5
	uptime_cs >"$mark"
	"$work/bin/fakesysfs" add-ip -root "$rdir/sysfs" -hca "$hca" -ip "$ip" -ndev eth0 >/dev/null
}

# The workload of a strict run: it notes the uptime at which it started, then sleeps (busybox sh).
# shellcheck disable=SC2016 # expanded by the container's shell
UPTIME_SLEEPER=(sh -c 'read -r u _ </proc/uptime; echo "${u/./}" >/tmp/started; trap "exit 0" TERM; sleep 3600 & wait')

# strict_runs N: N containers on $snet (strict, mlx5_0) and $wnet (mlx5_1); the gateway alternates.
# Prints the join orders seen (from the daemon's log) and fails at the first start that fails or
# whose workload started before the strict network's entries existed (the engine's StartedAt is
# taken before the networks are joined: the workload notes its own start).
strict_runs() {
	local i ips ipw gw1 gw2 mark out orders="" first started gwnet margins="" k1 k2
	for ((i = 0; i < $1; i++)); do
		ips=$sub3.$((40 + i)) ipw=$sub4.$((40 + i)) mark=$rdir/mark.$i
		gw1="" gw2=""
		if ((i % 2 == 0)); then gw1=,gw-priority=1; else gw2=,gw-priority=1; fi
		# Both fake kernels end on every path: this runs in a command substitution, which
		# waits for every job that still holds its output.
		(fake_kernel mlx5_0 "$ips" "$mark") &
		k1=$!
		(fake_kernel mlx5_1 "$ipw" "$mark.w") &
		k2=$!
		if ! out=$(dk run -d --name "$net-s$i" --network "name=$snet,ip=$ips$gw1" --network "name=$wnet,ip=$ipw$gw2" \
			"$IMAGE" "${UPTIME_SLEEPER[@]}" 2>&1); then
			kill "$k1" "$k2" 2>/dev/null
			wait "$k1" "$k2" 2>/dev/null
			echo "run $i (gateway: $([[ -n $gw1 ]] && echo strict || echo other)) refused: $out"
			return 1
		fi
		started=0
		for _ in {1..25}; do
			started=$(dk exec "$net-s$i" cat /tmp/started 2>/dev/null) && break
			sleep 0.2
		done
		wait "$k1" "$k2" || true
		if [[ ! -s $mark ]] || ((started < $(cat "$mark"))); then
			echo "run $i (gateway: $([[ -n $gw1 ]] && echo strict || echo other)): the workload started (uptime ${started}0 ms) before the strict network's entries were added ($(cat "$mark")0 ms)"
			dk rm -f "$net-s$i" >/dev/null
			return 1
		fi
		gwnet=$(dk exec "$net-s$i" ip route show default | grep -oE 'via [0-9.]+' || true)
		margins+="$i:${gwnet#via }:$((started - $(cat "$mark")))0ms "
		first=$(grep -o 'endpoint joined.* nid=[0-9a-f]*' "$rdir/d/dockerd.log" | tail -n 2 | head -n 1 | grep -o 'nid=[0-9a-f]*' || true)
		[[ ${first#nid=} == "${snid:0:12}" ]] && orders+=s || orders+=o
		dk rm -f "$net-s$i" >/dev/null
		"$work/bin/fakesysfs" del-ip -root "$rdir/sysfs" -hca mlx5_0 -ip "$ips" >/dev/null
		"$work/bin/fakesysfs" del-ip -root "$rdir/sysfs" -hca mlx5_1 -ip "$ipw" >/dev/null
	done
	echo "joined first (s: the strict network, o: the other): $orders"
	echo "run:gateway:workload start after the strict entries: $margins"
}

hca_run() {
	local engine=$1 t0 out c
	local -a extra=()
	hca_setup
	network_checks
	strict_order_checks
}

# hca_setup: two parents, their fake HCAs, the engine and the plugin. Runs inside hca_run.
hca_setup() {
	tag=$engine
	run_failed=""
	t0=$(date +%s)
	new_id rmvh
	pa=rmvh${id}a pb=rmvh${id}b
	net=rmv-hca-$id
	sub=10.$((240 + 0x${id:0:2} % 10)).0 # in a /16 of its own: network a takes all of it
	sub2=10.232.$((0x${id:0:2} % 60 * 4 + 1))
	sub3=10.232.$((0x${id:0:2} % 60 * 4 + 2))
	sub4=10.232.$((0x${id:0:2} % 60 * 4 + 3))
	rdir=$(mktemp -d /tmp/rmv-hca.XXXXXX)
	mkdir -p "$rdir/state" "$rdir/cdi"
	say "run $id: parents $pa $pb, dir $rdir"
	veth_parent "$pa" "${pa}q"
	veth_parent "$pb" "${pb}q"
	fake_hca "$rdir/sysfs" mlx5_0 "$pa"
	fake_hca "$rdir/sysfs" mlx5_1 "$pb" -uverbs 1 -pci 0000:04:00.0
	engine_since "$engine" 25 && extra=(-- --cdi-spec-dir "$rdir/cdi")
	engine_up "$rdir/d" "$engine" "${extra[@]}"
	plugin_up "$work/plugin" "$rdir/state" "$rdir/cdi" "$rdir/sysfs/sys" RDMA_MACVLAN_LOG_LEVEL=debug
	sock=/run/docker/plugins/$(dk plugin inspect -f '{{.Id}}' "$PLUGIN")/rdma-macvlan.sock
	check "plugin answers GET /v1/status" poll 15 sj
	say "setup done in $(($(date +%s) - t0)) s"
}

# network_checks: 1. a network per parent, 2. one address on two networks of one port, 3. GID
# entries that move under a container. Runs inside hca_run.
network_checks() {
	# 1. a network per parent.
	anid=$(dk network create -d "$PLUGIN" --subnet "$sub.0/16" --ip-range "$sub.0/24" -o parent="$pa" "$net-a")
	bnid=$(dk network create -d "$PLUGIN" --subnet "$sub2.0/24" -o parent="$pb" "$net-b")
	check "each network names its parent's HCA and its CDI spec that HCA's uverbs node" nets_on mlx5_0 uverbs0 mlx5_1 uverbs1

	# 2. one address, two networks, one port.
	check "a second network on the first parent whose subnet overlaps the first's" \
		dk network create -d "$PLUGIN" --subnet "$sub.0/24" --ip-range "$sub.128/25" -o parent="$pa" "$net-a2"
	check "a container on the first network with --ip $sub.5" \
		dk run -d --name "$net-c1" --network "$net-a" --ip "$sub.5" "$IMAGE" "${SLEEPER[@]}"
	refused "the same address on the second network of the same port is refused, naming both endpoints and the port" \
		"cannot take address $sub.5" "already held on RDMA device mlx5_0 port 1" "of network ${anid:0:12}" "--ip" -- \
		dk run -d --name "$net-c2" --network "$net-a2" --ip "$sub.5" "$IMAGE" "${SLEEPER[@]}"

	# 3. drift: c1's entries (2/3) go and come back behind another address's.
	"$work/bin/fakesysfs" add-ip -root "$rdir/sysfs" -hca mlx5_0 -ip "$sub.5" -ndev eth0 >/dev/null
	check "the container is RDMA-ready at its entries" ready_recorded "$sub.5"
	"$work/bin/fakesysfs" del-ip -root "$rdir/sysfs" -hca mlx5_0 -ip "$sub.5" >/dev/null
	"$work/bin/fakesysfs" add-ip -root "$rdir/sysfs" -hca mlx5_0 -ip 198.18.0.99 -ndev "$pa" >/dev/null
	"$work/bin/fakesysfs" add-ip -root "$rdir/sysfs" -hca mlx5_0 -ip "$sub.5" -ndev eth0 >/dev/null
	check "entries moved under the running container: /v1/status shows the RoCE v2 index given (3) next to the current one (5)" \
		poll 5 drift_shown "$sub.5" 3 5
	check "the daemon logs the move once" moved_logged_once
	dk rm -f "$net-c1" >/dev/null
	dk rm -f "$net-c2" >/dev/null 2>&1 || true # started only if the refusal failed
	dk network rm "$net-a2" >/dev/null
}

# strict_order_checks: 4. strict with two networks, in whatever order the engine joins them, and
# 5. another probe order (names and uverbs numbers swapped, the plugin restarted). Runs inside
# hca_run.
strict_order_checks() {
	# 4. strict with two networks, in whatever order the engine joins them.
	if engine_since "$engine" 28; then
		snid=$(dk network create -d "$PLUGIN" --subnet "$sub3.0/24" -o parent="$pa" -o gid_check=strict "$net-s")
		# With a gateway (Docker 28+ leaves a non-strict network without one unless asked), so
		# that it can be the container's gateway.
		dk network create -d "$PLUGIN" --subnet "$sub4.0/24" --gateway "$sub4.1" -o parent="$pb" "$net-w" >/dev/null
		snet=$net-s wnet=$net-w
		check_v "strict: 20 of 20 containers on a strict and another network start once their entries appear, either network the gateway" \
			strict_runs 20
		dk network rm "$net-s" "$net-w" >/dev/null
	else
		skip "strict with two networks: Docker before 28 asks before the container has its addresses (strict works as warn there)"
	fi

	# 5. another probe order: names and uverbs numbers swapped, the plugin restarted.
	"$work/bin/fakesysfs" swap-hca -root "$rdir/sysfs" -a mlx5_0 -b mlx5_1
	check "docker plugin disable and enable (the daemon starts again)" plugin_restart
	check "each network followed its parent's NIC: status and CDI spec (the NIC's uverbs node)" nets_on mlx5_1 uverbs1 mlx5_0 uverbs0
	check "the daemon logs the rename" grep -q "RDMA device was renamed" "$rdir/d/dockerd.log"
	check "a new container on the first network" dk run -d --name "$net-c3" --network "$net-a" --ip "$sub.7" "$IMAGE" "${SLEEPER[@]}"
	"$work/bin/fakesysfs" add-ip -root "$rdir/sysfs" -hca mlx5_1 -ip "$sub.7" -ndev eth0 >/dev/null
	check "it is RDMA-ready by the table now named mlx5_1" poll 15 ep_ready "$sub.7"
	dk rm -f "$net-c3" >/dev/null
	dk network rm "$net-a" "$net-b" >/dev/null
	timings+=("$engine: $(($(date +%s) - t0)) s")
	[[ -z $run_failed ]] || show_logs
}

select_engines "$@"
e2e_preflight curl:curl jq:jq
suite_start hca rdma-macvlan fakesysfs rmvstatus
make_plugin_dir "$work/plugin"
run_engines hca_run
((FAILED == 0))
