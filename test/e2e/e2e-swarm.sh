#!/usr/bin/env bash
# e2e-swarm.sh: a two-node Docker swarm on one machine, with a macvlan swarm network made of
# per-node config-only networks, once on Docker's built-in macvlan and once on rdma-macvlan (the
# managed plugin built from the working tree), on each engine.
#
# For each engine (Debian's dockerd 20.10, the current moby of scripts/engines.sh):
#   - two network namespaces, one per node, joined by a veth pair with 198.18.X.1/24 and .2/24
#     (the swarm's control and data traffic stays between them), and a second veth pair whose
#     ends are the nodes' macvlan parents: rmvwIDp in node 1, rmvwIDq in node 2 (one L2 segment,
#     so the tasks of the two nodes reach each other through their parents);
#   - a private dockerd per node inside its namespace (scripts/dockerd.sh start --netns), the
#     busybox image and the plugin on each, with a fake mlx5 sysfs tree (test/fakesysfs)
#     naming that node's parent;
#   - node 1 inits the swarm, node 2 joins it as a worker;
#   - per driver: on each node a --config-only network with the same subnet, the node's own parent
#     and the node's own --ip-range (node 1: .32/28, node 2: .64/28); on the manager one
#     --scope swarm --config-from network; a service with 2 replicas, at most one per node. The
#     checks: a task runs on each node, each has an address from its node's range on a macvlan
#     child of its node's parent, and each pings the other's address; then the service and the
#     networks go;
#   - duplicates across the two "hosts": standalone rdma-macvlan networks on both nodes with one
#     subnet and the same --ip-range hand out one address twice; the second node's daemon finds
#     the first node's container on its parent's segment (address_check=warn: the endpoint's
#     address_conflicts in /v1/status), the first node's daemon sees the second's probe for it
#     on its segment, address_check=strict refuses that start naming the address and the other
#     MAC, and a node with its own range starts and reaches the other; before that, the documented
#     per-host ranges (docs/multi-host.md) on both nodes, and a rendezvous as torchrun or mpirun
#     do it (rank 0 listens on TCP port 29500 of its RoCE address, rank 1 on the other node
#     connects);
#   - RDMA-ready swarm tasks: the runtime as each node's default runtime (docker rdma runtime
#     install --default, SIGHUP), fake device nodes of both nodes' HCAs (mlx5_0 with uverbs0 on
#     node 1, mlx5_3 with uverbs3 on node 2: one fake tree holds both), a service of 2 replicas on
#     an rdma-macvlan swarm network naming no runtime: each task sees only its node's HCA's nodes,
#     keeps the engine's memlock (this machine refuses more than 8 MiB), and is started by
#     rdma-exec with the RoCE v2 index the fake kernel gave its address on its node's HCA; the
#     same as a stack (docker stack deploy of a compose file naming the network as external),
#     whose two ranks rendezvous.
# On the engines between (Docker 28.5.2; make check's middle engines), the standalone hosts only:
#   the per-host ranges, the rendezvous and the duplicates, no swarm.
# Every check prints `ok - ...` or `not ok - ...`; the last line is `N passed, N failed`.
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines), iproute2, nsenter, jq.
# Leaves behind: nothing of a run (namespaces, links, processes, mounts, temp dirs), also when a
#   step fails.
#
# Usage: e2e-swarm.sh [debian] [v27] [v28] [current]   (default: debian, v28, current)
# Environment: E2E_CMD_TIMEOUT  seconds any single docker command may take (default 60)
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CMD_TIMEOUT=${E2E_CMD_TIMEOUT:-60}
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"
# shellcheck source=test/e2e/lib/fakedev.sh
source "$here/lib/fakedev.sh"
teardown_hook() { fake_dev_remove; }

work="" # temp dir of the whole suite
MEMLOCK=8388608

# on NODE CMD...: dk against node NODE (1 or 2).
on() {
	local n=$1
	shift
	DOCKER_HOST=unix://$rdir/d$n/docker.sock dk "$@"
}

e2e_traps

# node_up N ENGINE PARENT: the node's fake sysfs, dockerd in its namespace, image, plugin.
# The two nodes' HCAs are named differently, as on real hosts: node 1's parent is mlx5_0's
# netdev (uverbs0), node 2's mlx5_3's (uverbs3). Both are in one fake tree, $rdir/fs, which both
# plugins read (each finds its own parent's HCA) and which a service mounts for rdma-exec: a
# service's bind mount has one source on every node.
node_up() {
	local n=$1 eng=$2 p=$3 d mac hca=(mlx5_0 mlx5_3) extra=(-uverbs 3 -pci 0000:04:00.0)
	d=$rdir/d$n
	mac=$(ip -n "${nss[n - 1]}" -o link show dev "$p" | grep -oE 'link/ether [0-9a-f:]+' | cut -d' ' -f2)
	((n == 1)) && extra=()
	"$work/bin/fakesysfs" build -root "$rdir/fs" -kind mlx5 -hca "${hca[n - 1]}" -netdev "$p" -mac "$mac" "${extra[@]}"
	mkdir -p "$rdir/state$n" "$rdir/cdi$n"
	engine_up "$d" "$eng" --netns "${nss[n - 1]}" -- --default-ulimit memlock=$MEMLOCK:$MEMLOCK
	plugin_up "$work/plugin" "$rdir/state$n" "$rdir/cdi$n" "$rdir/fs/sys"
	unset DOCKER_HOST
}

fake_devs() { fake_dev_nodes "$rdir/fs" && fake_dev_uverbs 4; }

# runtime_on N: the runtime installed as node N's default runtime (docker rdma runtime install
# --default, then SIGHUP), as a swarm user does once on each node.
# Two engines on one host share /run/docker/plugins, where the runtime looks for the plugin, and a
# swarm network has one ID on every node: each node's runtime is pinned to its own plugin's
# socket (--plugin-socket), as a host running several engines needs.
runtime_on() {
	local f=$rdir/d$1/daemon.json id
	DOCKER_HOST=unix://$rdir/d$1/docker.sock docker rdma runtime install --default --config-file "$f" \
		--path "$work/bin/rdma-macvlan-runtime" >/dev/null || return 1
	id=$(on "$1" plugin inspect -f '{{.Id}}' "$PLUGIN") || return 1
	jq --arg s "/run/docker/plugins/$id/rdma-macvlan.sock" '.runtimes["rdma-macvlan"].runtimeArgs += ["--plugin-socket", $s]' "$f" >"$f.new" &&
		mv "$f.new" "$f" || return 1
	kill -HUP "$(cat "$rdir/d$1/dockerd.spawned")"
	# shellcheck disable=SC2016 # expanded by the inner bash
	poll 20 bash -c '[[ $(DOCKER_HOST=unix://$0/docker.sock docker info -f "{{.DefaultRuntime}}") == rdma-macvlan ]]' "$rdir/d$1"
}

two_ready() {
	local out
	out=$(on 1 node ls --format '{{.Status}} {{.Availability}}') || return 1
	[[ $(grep -c '^Ready Active$' <<<"$out") == 2 ]] || { echo "$out"; return 1; }
}

# task_on N SVC: the id of the running task container of SVC on node N.
task_on() { on "$1" ps -q --filter "label=com.docker.swarm.service.name=$2" --filter status=running; }

both_running() {
	local a b
	a=$(task_on 1 "$1") b=$(task_on 2 "$1")
	[[ -n $a && -n $b ]] || { echo "running tasks: node 1 '${a}', node 2 '${b}'"; on 1 service ps --no-trunc "$1"; return 1; }
}

# addr_in N C PREFIX LO HI PARENT: eth0 of task C on node N has PREFIX.x/24 with LO <= x <= HI and is a
# macvlan child of PARENT in that node's namespace.
addr_in() {
	local n=$1 c=$2 pfx=$3 lo=$4 hi=$5 p=$6 a x pid l idx
	a=$(on "$n" exec "$c" ip -4 -o addr show dev eth0 | awk '{print $4}')
	[[ $a =~ ^${pfx//./\\.}\.([0-9]+)/24$ ]] || { echo "eth0 has '$a', not an address in $pfx.0/24"; return 1; }
	x=${BASH_REMATCH[1]}
	((x >= lo && x <= hi)) || { echo "eth0 has $a, outside the node's range $pfx.$lo-$pfx.$hi"; return 1; }
	pid=$(on "$n" inspect -f '{{.State.Pid}}' "$c")
	l=$(nsenter -t "$pid" -n ip -d -o link show dev eth0)
	grep -q 'macvlan mode bridge' <<<"$l" || { echo "eth0 is not a macvlan in bridge mode: $l"; return 1; }
	idx=$(ip -n "${nss[n - 1]}" -o link show dev "$p" | cut -d: -f1)
	grep -q "eth0@if$idx:" <<<"$l" || { echo "eth0 does not hang off $p (ifindex $idx): $l"; return 1; }
	echo "$a"
}

svc_gone() { [[ -z $(task_on 1 "$1")$(task_on 2 "$1") ]] && [[ -z $(on 1 ps -aq --filter "label=com.docker.swarm.service.name=$1")$(on 2 ps -aq --filter "label=com.docker.swarm.service.name=$1") ]]; }

# swarm_driver DRV D: the config-only networks, the swarm network and a service on driver D.
swarm_driver() {
	local DRV=$1 D=$2 cfg swnet svc out a1 a2 c1 c2
	cfg=rmvw-cfg-$DRV swnet=rmvw-$DRV svc=rmvw-svc-$DRV
	tag="$engine/$DRV"
	if out=$(on 1 network create --config-only --subnet "$S.0/24" --gateway "$S.1" --ip-range "$S.32/28" -o parent="$P1" "$cfg" 2>&1) &&
		out=$(on 2 network create --config-only --subnet "$S.0/24" --gateway "$S.1" --ip-range "$S.64/28" -o parent="$P2" "$cfg" 2>&1); then
		pass "--config-only networks: node 1 -o parent=$P1 --ip-range $S.32/28, node 2 -o parent=$P2 --ip-range $S.64/28"
	else
		fail "--config-only networks on both nodes" "$out"
		return 0
	fi
	if ! out=$(on 1 network create -d "$D" --scope swarm --config-from "$cfg" "$swnet" 2>&1); then
		fail "docker network create -d $D --scope swarm --config-from $cfg" "$out"
		return 0
	fi
	pass "docker network create -d $D --scope swarm --config-from $cfg"
	if ! out=$(on 1 service create --detach --no-resolve-image --replicas 2 --replicas-max-per-node 1 \
		--name "$svc" --network "$swnet" "$IMAGE" "${SLEEPER[@]}" 2>&1); then
		fail "docker service create --replicas 2 --replicas-max-per-node 1 --network $swnet" "$out"
		return 0
	fi
	if out=$(poll 60 both_running "$svc"); then
		pass "service $svc: one task runs on each node"
		c1=$(task_on 1 "$svc") c2=$(task_on 2 "$svc")
		if a1=$(addr_in 1 "$c1" "$S" 32 47 "$P1" 2>&1); then
			pass "node 1's task has $a1, from node 1's --ip-range, on a macvlan child of $P1"
		else
			fail "node 1's task has an address from node 1's --ip-range on a macvlan child of $P1" "$a1"
		fi
		if a2=$(addr_in 2 "$c2" "$S" 64 79 "$P2" 2>&1); then
			pass "node 2's task has $a2, from node 2's --ip-range, on a macvlan child of $P2"
		else
			fail "node 2's task has an address from node 2's --ip-range on a macvlan child of $P2" "$a2"
		fi
		check "node 1's task pings node 2's task (${a2%/*})" on 1 exec "$c1" ping -c 2 -W 2 "${a2%/*}"
		check "node 2's task pings node 1's task (${a1%/*})" on 2 exec "$c2" ping -c 2 -W 2 "${a1%/*}"
	else
		fail "service $svc: one task runs on each node" "$out"
	fi
	check "docker service rm; the tasks go on both nodes" on 1 service rm "$svc"
	check "the tasks are gone on both nodes" poll 30 svc_gone "$svc"
	check "swarm network and config-only networks removed" poll 30 rm_nets "$swnet" "$cfg"
}

rm_nets() { on 1 network rm "$1" && on 1 network rm "$2" && on 2 network rm "$2"; }

# st N: the status lines of node N's daemon (rmvstatus).
st() { sock=/run/docker/plugins/$(on "$1" plugin inspect -f '{{.Id}}' "$PLUGIN")/rdma-macvlan.sock status; }

# conflicts_of N NET C: the conflicts= field of container C's endpoint on network NET, on node N.
conflicts_of() {
	local nid eid
	nid=$(on "$1" network inspect -f '{{.Id}}' "$2") eid=$(on "$1" inspect -f "{{(index .NetworkSettings.Networks \"$2\").EndpointID}}" "$3")
	st "$1" | awk -v n="$nid" -v e="$eid" '$1 == "endpoint" && $2 == n && $3 == e' | tr ' ' '\n' | sed -n 's/^conflicts=//p'
}

# conflict_is N NET C WANT: conflicts_of is WANT ("-": none).
conflict_is() {
	local got
	got=$(conflicts_of "$1" "$2" "$3")
	[[ $got == "$4" ]] || { echo "conflicts=$got, want $4"; return 1; }
}

# conflict_has N NET C WANT: conflicts_of holds WANT.
conflict_has() {
	local got
	got=$(conflicts_of "$1" "$2" "$3")
	[[ ,$got, == *,"$4",* ]] || { echo "conflicts=$got, want $4 among them"; return 1; }
}

# on_net N NET C FIELD: FIELD (IPAddress, MacAddress) of container C on network NET, on node N.
on_net() { on "$1" inspect -f "{{(index .NetworkSettings.Networks \"$2\").$4}}" "$3"; }

# dup_checks: standalone networks on both nodes, on one subnet. The same --ip-range on both gives
# two containers one address: the daemon whose container starts second finds the other's MAC on
# its parent's segment (address_check=warn reports it, strict refuses the start); distinct
# ranges give no problem.
dup_checks() {
	local net=rmvw-dup r="$S.96/28" c1 c2 a1 a2 m1 p2mac out
	tag="$engine/duplicates"
	plan_checks
	if ! out=$(on 1 network create -d "$PLUGIN" --subnet "$S.0/24" --gateway "$S.1" --ip-range "$r" -o parent="$P1" "$net" 2>&1) ||
		! out=$(on 2 network create -d "$PLUGIN" --subnet "$S.0/24" --gateway "$S.1" --ip-range "$r" -o parent="$P2" "$net" 2>&1); then
		fail "standalone networks on both nodes with one --ip-range $r" "$out"
		return 0
	fi
	pass "standalone networks on both nodes with one --ip-range $r"
	# runc, named: these checks are of the network only.
	if ! c1=$(on 1 run -d --runtime runc --net "$net" "$IMAGE" "${SLEEPER[@]}" 2>&1) || ! c2=$(on 2 run -d --runtime runc --net "$net" "$IMAGE" "${SLEEPER[@]}" 2>&1); then
		fail "a container on each node" "$c1 $c2"
		return 0
	fi
	a1=$(on_net 1 "$net" "$c1" IPAddress) a2=$(on_net 2 "$net" "$c2" IPAddress) m1=$(on_net 1 "$net" "$c1" MacAddress)
	if [[ -n $a1 && $a1 == "$a2" ]]; then pass "both nodes gave out $a1"; else fail "both nodes gave out one address" "node 1: $a1, node 2: $a2"; fi
	check "node 2's daemon reports $a1 held by node 1's container ($m1)" poll 10 conflict_is 2 "$net" "$c2" "$a1@$m1"
	p2mac=$(ip -n "$ns2" -o link show "$P2" | sed -n 's|.*link/ether \([^ ]*\).*|\1|p')
	check "node 1's daemon, whose container started first and found no one, reports node 2's probe for $a1 (from $p2mac, node 2's parent)" \
		poll 10 conflict_has 1 "$net" "$c1" "$a1@$p2mac"
	check "node 2: the container and its warn network removed" on 2 rm -f "$c2"
	check "node 2: the warn network removed" on 2 network rm "$net"
	check "node 2: an address_check=strict network with the same range" on 2 network create -d "$PLUGIN" --subnet "$S.0/24" --gateway "$S.1" --ip-range "$r" -o parent="$P2" -o address_check=strict "$net"
	refused "node 2: a container given $a1 on the strict network is refused, naming the address and node 1's MAC" \
		"address_check=strict refused the start: address $a1 is also held by MAC $m1" -- on 2 run -d --runtime runc --net "$net" "$IMAGE" "${SLEEPER[@]}"
	check "node 2: the strict network removed" on 2 network rm "$net"
	check "node 2: a strict network with its own --ip-range $S.112/28" on 2 network create -d "$PLUGIN" --subnet "$S.0/24" --gateway "$S.1" --ip-range "$S.112/28" -o parent="$P2" -o address_check=strict "$net"
	if c2=$(on 2 run -d --runtime runc --net "$net" "$IMAGE" "${SLEEPER[@]}" 2>&1); then
		pass "node 2: a container from its own range starts on the strict network ($(on_net 2 "$net" "$c2" IPAddress))"
		check "node 2's container reaches node 1's across the segment" on 2 exec "$c2" ping -c 2 -W 2 "$a1"
		check "node 2's daemon reports no duplicate" conflict_is 2 "$net" "$c2" -
	else
		fail "node 2: a container from its own range starts on the strict network" "$c2"
	fi
	on 2 rm -f "$c2" >/dev/null 2>&1 || true
	on 1 rm -f "$c1" >/dev/null 2>&1 || true
	check "the duplicate checks' networks removed" poll 30 rm_dup_nets "$net"
}

# readme_net N TEXT [NAME]: a documented block's TEXT run against node N, on this run's subnet, node
# N's parent, the plugin under test, and network NAME for roce (default rmvw-plan).
readme_net() {
	local p=P$1
	DOCKER_HOST=unix://$rdir/d$1/docker.sock bash -euo pipefail -c "$(printf '%s\n' "$2" |
		sed -e "s/192\.168\.7\./$S./g" -e "s/ens2f0/${!p}/" -e "s/rdma-macvlan:latest/$PLUGIN/" -e "s/ roce\$/ ${3:-rmvw-plan}/")"
}

# RANK: what a rank container gets in these tests: the fake sysfs tree for rdma-exec, and a GID
# timeout that outlasts the test's adding of its entries; it prints PROBE, then sleeps.
RANK=(--mount "type=bind,src=/RDIR/fs,dst=/rdma-fake,readonly" -e RDMA_EXEC_SYSFS_ROOT=/rdma-fake -e RDMA_MACVLAN_GID_TIMEOUT=60s)
rank() { on "$1" run -d --net "$2" "${RANK[@]/\/RDIR/$rdir}" "$IMAGE" sh -c "$PROBE; $SLEEP"; }

# rdma_ready N C NET LO WHO: container C on node N, started by the default runtime, has an address
# of NET in node N's range (LO to LO+31) and is RDMA-ready with node N's HCA: that HCA's device
# nodes only, the engine's memlock, and rdma-exec's GID index of the RoCE v2 entry the node's (fake)
# kernel gives the address. Sets addr.
rdma_ready() {
	local n=$1 c=$2 idx hca=(mlx5_0 mlx5_3) dev=(uverbs0 uverbs3)
	addr=$(on_net "$n" "$3" "$c" IPAddress)
	idx=$("$work/bin/fakesysfs" add-ip -root "$rdir/fs" -hca "${hca[n - 1]}" -ip "$addr" -ndev eth0 | tr '\n' ' ')
	idx=${idx% } idx=${idx##* } # the RoCE v2 entry, the last one add-ip prints: what NCCL is given
	check "node $n's $5 ($addr) sees only ${hca[n - 1]}'s device nodes, the engine's memlock and its GID index $idx" \
		poll 30 task_probe_is "$n" "$c" "dev=rdma_cm ${dev[n - 1]} " "memlock=$MEMLOCK:$MEMLOCK" "gid=$idx hca==${hca[n - 1]}:1"
	((${addr##*.} >= $4 && ${addr##*.} < $4 + 32)) || fail "node $n's $5 has an address of its node's range .$4/27" "$addr"
}

# unfake_ips N ADDR...: node N's fake kernel drops the entries of ADDR, as the kernel does when a
# container goes (the next one may get the same address).
unfake_ips() {
	local hca=(mlx5_0 mlx5_3) a
	for a in "${@:2}"; do "$work/bin/fakesysfs" del-ip -root "$rdir/fs" -hca "${hca[$1 - 1]}" -ip "$a" >/dev/null || true; done
}

# plan_checks: docs/multi-host.md's per-host ranges on both nodes, as standalone hosts: each node's
# container is RDMA-ready with its node's HCA and has an address from its node's range, they reach
# each other and rendezvous, and neither daemon reports a duplicate.
plan_checks() {
	local net=rmvw-plan c1 c2 a1 a2 addr
	check "node 1: the documented network of the first host (--ip-range .32/27)" readme_net 1 "$(readme_block multihost-a)"
	check "node 2: the documented network of the second host (--ip-range .64/27)" readme_net 2 "$(readme_block multihost-b)"
	if ! c1=$(rank 1 "$net" 2>&1) || ! c2=$(rank 2 "$net" 2>&1); then
		fail "a container on each node on the planned network" "$c1 $c2"
	else
		rdma_ready 1 "$c1" "$net" 32 container
		a1=$addr
		rdma_ready 2 "$c2" "$net" 64 container
		a2=$addr
		check "node 1's container reaches node 2's across the segment" on 1 exec "$c1" ping -c 2 -W 2 "$a2"
		rendezvous "node 1's container (rank 0, $a1)" 1 "$c1" "$a1" 2 "$c2"
		check "neither daemon reports a duplicate" poll 5 both_clean "$net" "$c1" "$c2"
		unfake_ips 1 "$a1"
		unfake_ips 2 "$a2"
	fi
	on 1 rm -f "$c1" >/dev/null 2>&1 || true
	on 2 rm -f "$c2" >/dev/null 2>&1 || true
	check "the planned networks removed" poll 30 rm_dup_nets "$net"
}

both_clean() { conflict_is 1 "$1" "$2" - && conflict_is 2 "$1" "$3" -; }

# ready_checks: docs/multi-host.md's swarm network (a config-only network per node with its range,
# one swarm network), and with the runtime as each node's default runtime, a service on it is
# RDMA-ready on each node with that node's HCA. Created with docker service create, then deployed
# as the page's stack (a global service on the external network), whose two ranks rendezvous.
ready_checks() {
	local out
	tag="$engine/rdma-ready"
	if ! out=$(readme_net 1 "$(readme_block multihost-swarm-config)" roce-config 2>&1) ||
		! out=$(readme_net 2 "$(readme_block multihost-swarm-config | sed 's|\.32/27|.64/27|')" roce-config 2>&1) ||
		! out=$(readme_net 1 "$(readme_block multihost-swarm-net)" roce 2>&1); then
		fail "the documented swarm network: a config-only network per node, one swarm network" "$out"
		return 0
	fi
	pass "the documented swarm network: a config-only network per node (.32/27, .64/27), one swarm network"
	if out=$(on 1 service create --detach --no-resolve-image --replicas 2 --replicas-max-per-node 1 --name rmvw-rdy --network roce \
		"${RANK[@]/\/RDIR/$rdir}" "$IMAGE" sh -c "$PROBE; $SLEEP" 2>&1); then
		ready_tasks rmvw-rdy "docker service create on roce, no runtime named"
		check "docker service rm; the tasks go on both nodes" on 1 service rm rmvw-rdy
	else
		fail "docker service create on roce, no runtime named" "$out"
	fi
	check "the tasks are gone on both nodes" poll 30 svc_gone rmvw-rdy
	readme_block multihost-stack | sed "s|YOUR_IMAGE|$IMAGE|" >"$rdir/stack.yaml"
	stack_ranks >"$rdir/ranks.yaml"
	if out=$(on 1 stack deploy --resolve-image never -c "$rdir/stack.yaml" -c "$rdir/ranks.yaml" rmvs 2>&1); then
		ready_tasks rmvs_rank "docker stack deploy of the documented stack (global, roce external)"
		check "docker stack rm; the tasks go on both nodes" on 1 stack rm rmvs
	else
		fail "docker stack deploy of the documented stack (global, roce external)" "$out"
	fi
	check "the stack's tasks are gone on both nodes" poll 30 svc_gone rmvs_rank
	check "swarm network and config-only networks removed" poll 30 rm_nets roce roce-config
}

# ready_tasks SVC HOW: service SVC, started by HOW on network roce, runs one task on each node, each
# RDMA-ready with its node's HCA; the task on node 2 rendezvouses with node 1's over TCP.
ready_tasks() {
	local svc=$1 n c addr out lo=(32 64) tasks=() addrs=()
	if ! out=$(poll 60 both_running "$svc"); then
		fail "$2: one task runs on each node" "$out"
		return 0
	fi
	pass "$2: one task runs on each node, started by the default runtime"
	for n in 1 2; do
		c=$(task_on "$n" "$svc")
		rdma_ready "$n" "$c" roce "${lo[n - 1]}" task
		tasks+=("$c") addrs+=("$addr")
	done
	rendezvous "node 1's task (rank 0, ${addrs[0]})" 1 "${tasks[0]}" "${addrs[0]}" 2 "${tasks[1]}"
	unfake_ips 1 "${addrs[0]}"
	unfake_ips 2 "${addrs[1]}"
}

# stack_ranks: what the tests add to the documented stack file (a second -c file): each rank
# prints PROBE with the fake sysfs tree, then sleeps. Compose reads $$ as $.
stack_ranks() {
	cat <<EOF
services:
  rank:
    command:
      - sh
      - -c
      - |
        ${PROBE//\$/\$\$}; ${SLEEP//\$/\$\$}
    environment:
      RDMA_EXEC_SYSFS_ROOT: /rdma-fake
      RDMA_MACVLAN_GID_TIMEOUT: 60s
    volumes:
      - type: bind
        source: $rdir/fs
        target: /rdma-fake
        read_only: true
EOF
}

# rendezvous WHO N1 C1 A1 N2 C2: as torchrun or mpirun start a job across hosts: rank 0 (container C1
# on node N1) listens on fixed port 29500 of its RoCE address A1, rank 1 (C2 on node N2) connects
# there; each gets the other's message.
rendezvous() {
	local out
	if ! out=$(on "$2" exec -d "$3" sh -c 'echo world=2 | nc -l -p 29500 >/tmp/rdzv' 2>&1); then
		fail "rendezvous: $1 listens on port 29500" "$out"
		return 0
	fi
	check "rendezvous: node $5's rank 1 connects to $1 on port 29500 and gets world=2" poll 10 rdzv_client "$5" "$6" "$4"
	check "rendezvous: $1 got rank 1's message" poll 5 file_is "$2" "$3" /tmp/rdzv rank=1
}

rdzv_client() {
	local out
	out=$(on "$1" exec "$2" sh -c "echo rank=1 | nc -w 2 $3 29500" 2>&1)
	[[ $out == world=2 ]] || { echo "$out"; return 1; }
}

# file_is N C FILE WANT: FILE in container C on node N holds exactly WANT.
file_is() {
	local out
	out=$(on "$1" exec "$2" cat "$3" 2>&1)
	[[ $out == "$4" ]] || { echo "$out"; return 1; }
}

# shellcheck disable=SC2016 # expanded in the task
PROBE='echo "dev=$(ls /dev/infiniband 2>/dev/null | tr "\n" " ")"; echo "memlock=$(sed -n "s/^Max locked memory *\([^ ]*\) *\([^ ]*\).*/\1:\2/p" /proc/self/limits)"; echo "gid=${NCCL_IB_GID_INDEX-} hca=${NCCL_IB_HCA-}"'
SLEEP='trap "exit 0" TERM; sleep 3600 & wait'

# task_probe_is N C WANT...: task C's output (PROBE) on node N holds every WANT.
task_probe_is() {
	local out w
	out=$(on "$1" logs "$2" 2>&1)
	for w in "${@:3}"; do [[ $out == *"$w"* ]] || { echo "$out"; return 1; }; done
}

rm_dup_nets() { on 1 network rm "$1" && on 2 network rm "$1"; }

# One engine.
swarm_run() {
	engine=$1
	local t0 n id ns1 ns2 u1 u2 A1 A2 S P1 P2 token out
	tag=$engine
	t0=$(date +%s)
	new_id rmvw
	ns1=rmvw${id}n1 ns2=rmvw${id}n2 u1=rmvw${id}u u2=rmvw${id}v P1=rmvw${id}p P2=rmvw${id}q
	A1=198.18.$((0x${id:0:2})).1 A2=198.18.$((0x${id:0:2})).2
	S=10.$((200 + 0x${id:2:2} % 50)).$((0x${id:0:2}))
	rdir=$(mktemp -d /tmp/rmv-swarm.XXXXXX)
	say "run $id: namespaces $ns1 $ns2, swarm on $A1/$A2, parents $P1/$P2, subnet $S.0/24"
	ip netns add "$ns1"
	nss+=("$ns1")
	ip netns add "$ns2"
	nss+=("$ns2")
	ip link add "$u1" netns "$ns1" type veth peer name "$u2" netns "$ns2"
	ip link add "$P1" netns "$ns1" type veth peer name "$P2" netns "$ns2"
	ip -n "$ns1" addr add "$A1/24" dev "$u1"
	ip -n "$ns2" addr add "$A2/24" dev "$u2"
	for l in lo "$u1" "$P1"; do ip -n "$ns1" link set "$l" up; done
	for l in lo "$u2" "$P2"; do ip -n "$ns2" link set "$l" up; done

	mkdir -p "$rdir/config/cli-plugins"
	install -m 0755 "$work/bin/docker-rdma" "$rdir/config/cli-plugins/docker-rdma"
	export DOCKER_CONFIG=$rdir/config
	check_here "node 1: dockerd in namespace $ns1 with the plugin" node_up 1 "$engine" "$P1"
	check_here "node 2: dockerd in namespace $ns2 with the plugin" node_up 2 "$engine" "$P2"
	check_here "fake device nodes of both nodes' HCAs (uverbs0, uverbs3, rdma_cm)" fake_devs
	[[ $run_failed ]] && { teardown; return 0; }
	check "node 1: the runtime as the default runtime" runtime_on 1
	check "node 2: the runtime as the default runtime" runtime_on 2
	if [[ $engine != debian && $engine != current ]]; then
		# The engines between: the standalone hosts only (the swarm runs on the first and last).
		dup_checks
		tag=$engine
		teardown
		timings+=("$engine: $(($(date +%s) - t0)) s (standalone)")
		return 0
	fi
	if ! out=$(on 1 swarm init --advertise-addr "$A1" --listen-addr "$A1:2377" --data-path-addr "$A1" 2>&1); then
		fail "node 1: docker swarm init --advertise-addr $A1" "$out"
		teardown
		return 0
	fi
	pass "node 1: docker swarm init --advertise-addr $A1"
	token=$(on 1 swarm join-token -q worker)
	check "node 2: docker swarm join $A1:2377" on 2 swarm join --token "$token" --advertise-addr "$A2" --listen-addr "$A2:2377" --data-path-addr "$A2" "$A1:2377"
	check "both nodes Ready and Active" poll 30 two_ready
	say "swarm ready after $(($(date +%s) - t0)) s"
	swarm_driver macvlan macvlan
	swarm_driver rdma-macvlan "$PLUGIN"
	dup_checks
	ready_checks
	tag=$engine
	teardown
	timings+=("$engine: $(($(date +%s) - t0)) s")
}

select_engines --both --middle "$@"
e2e_preflight nsenter:util-linux jq:apt-get\ install\ jq
suite_start swarm rdma-macvlan fakesysfs rmvstatus docker-rdma rdma-exec rdma-macvlan-runtime
make_plugin_dir "$work/plugin"
run_engines swarm_run
