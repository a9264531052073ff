#!/usr/bin/env bash
# e2e-rails.sh: containers on several rdma-macvlan networks (rails) on private engines: every rail
# on every path, and the container's own GID on every rail, or a refusal.
#
# For each engine (debian: Docker 20.10, which takes one network at docker run, so docker rdma run
# creates, connects and starts; current: moby v2, CDI specs from a private directory): eight veth
# pairs as RoCE parents, a fake sysfs tree (test/fakesysfs) with mlx5_0..mlx5_7 on them (uverbs0..7),
# fake device nodes, the managed plugin on the tree, one network per parent; docker-rdma as a CLI
# plugin, and rdma-macvlan-runtime (rdma-exec beside it) registered with `docker rdma runtime
# install` and SIGHUP (docker rdma run is docker run --runtime rdma-macvlan). Then, with two, four
# and all eight of the networks (a training node's rails):
#   - (current engine) plain docker run with every rail's CDI device and the user's own
#     -e NCCL_IB_HCA: each device's RDMA_MACVLAN_DEVICE_<hca> is there, the user's value is kept,
#     no device sets NCCL_IB_HCA or UCX_NET_DEVICES;
#   - docker rdma run on every network, the workload waiting in rdma-exec until the fake kernel adds
#     its entries on each rail: the same index on every rail (NCCL_IB_GID_INDEX, all rails in
#     NCCL_IB_HCA/UCX_NET_DEVICES/NCCL_SOCKET_IFNAME, the user's own -e NCCL_IB_HCA kept, docker rdma
#     inspect showing the same); indexes that differ per rail with nothing of IPv4 below: refused
#     (status 121), since the one NCCL_IB_ADDR_RANGE holding every rail's address holds every
#     neighbour too, and NCCL picks a GID on every connection; and with another address of rail
#     0's subnet below the container's: refused too (the rails, the indexes and the option named),
#     and --accept-gid-mismatch starts it with UCX_IB_ROCE_SUBNETS of the container's addresses.
# Traffic only between the containers it starts (none is needed here).
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines), iproute2.
# Leaves behind: nothing, also when a check or a step fails (links, engine, nodes, files).
#
# Usage: e2e-rails.sh [debian] [current]   (default: debian, and current when scripts/engines.sh built it)
# Environment: DOCKER_CLI_DEBIAN (default /usr/bin/docker), DOCKER_CLI_CURRENT (default
#   /usr/local/bin/docker).
# Output: "ok - ..." or "not ok - ..." per check, then "N passed, N failed"; exit 1 when any failed.
# The checks (expect) are strings evaluated against the variables they name.
# shellcheck disable=SC2016,SC2034
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"
# shellcheck source=test/e2e/lib/fakedev.sh
source "$here/lib/fakedev.sh"
CLI_DEBIAN=${DOCKER_CLI_DEBIAN:-/usr/bin/docker}
CLI_CURRENT=${DOCKER_CLI_CURRENT:-/usr/local/bin/docker}
MEMLOCK=8388608
RAILS=8

# run_cmd and expect: test/e2e/lib/e2e.sh.

work=""

teardown_hook() { fake_dev_remove; }
e2e_traps

# logs_of NAME: the container's output once its stdout has some (the workload starts only after
# rdma-exec found its entries), within 20 s.
logs_of() {
	local n
	for ((n = 0; n < 100; n++)); do
		run_cmd docker logs "$1"
		[[ -n $out ]] && return 0
		sleep 0.2
	done
}

# add_entries ROOT NAME N [BEFORE-IP]: the fake kernel adds the entries of container NAME's address
# on each of its N rails, as seen inside it (interface name and address per rail, from the rail's
# subnet 10.<80+k>.<sub>.0/24), after BEFORE-IP's entries (another container in rail 0's subnet, or
# an IPv6 address) on rail 0 when given. Sets ifs ("eth0,eth1,...", rail order) and ips (rail order).
ifs=""
ips=()
add_entries() {
	local root=$1 name=$2 n=$3 before=${4:-} k line ifn ip
	local -a names=()
	ips=()
	for ((k = 0; k < 50; k++)); do
		line=$(docker exec "$name" ip -o -4 addr show 2>/dev/null || true)
		[[ $(grep -c ' 10\.8' <<<"$line") == "$n" ]] && break
		sleep 0.2
	done
	for ((k = 0; k < n; k++)); do
		read -r ifn ip < <(awk -v p="10.$((80 + k)).$sub." 'index($4, p) == 1 {sub("/.*", "", $4); print $2, $4}' <<<"$line")
		[[ -n $ip ]] || { echo "container $name has no address in 10.$((80 + k)).$sub.0/24: $line"; return 1; }
		names+=("$ifn")
		ips+=("$ip")
	done
	ifs=$(IFS=,; echo "${names[*]}")
	if [[ -n $before ]]; then
		"$work/bin/fakesysfs" add-ip -root "$root" -hca mlx5_0 -ip "$before" -ndev other >/dev/null
	fi
	for ((k = 0; k < n; k++)); do
		"$work/bin/fakesysfs" add-ip -root "$root" -hca "mlx5_$k" -ip "${ips[k]}" -ndev "${names[k]}" >/dev/null
	done
}

# clear_entries ROOT N IP...: the fake kernel removes those addresses' entries on N rails.
clear_entries() {
	local root=$1 n=$2 k ip
	shift 2
	for ip in "$@"; do
		for ((k = 0; k < n; k++)); do
			"$work/bin/fakesysfs" del-ip -root "$root" -hca "mlx5_$k" -ip "$ip" >/dev/null 2>&1 || true
		done
	done
}

# rails ENGINE N: the checks with the first N networks.
rails() {
	local engine=$1 n=$2 root=$e/fs k nets=() devs=() hcas=() want_dev
	local fake=(-v "$e/fs:/rdma-fake:ro" -e RDMA_EXEC_SYSFS_ROOT=/rdma-fake)
	local show='echo "hca=$NCCL_IB_HCA gid=${NCCL_IB_GID_INDEX-} range=${NCCL_IB_ADDR_RANGE-} if=$NCCL_SOCKET_IFNAME ucx=$UCX_NET_DEVICES/${UCX_IB_GID_INDEX-}"'
	tag="$engine/$n rails"
	for ((k = 0; k < n; k++)); do
		nets+=(--net "$net-$k")
		devs+=(--device "rdma-macvlan/hca=mlx5_$k")
		hcas+=("mlx5_$k:1")
	done
	local list
	list=$(IFS=,; echo "${hcas[*]}")

	if [[ $engine == current ]]; then
		run_cmd docker run --rm "${nets[@]}" "${devs[@]}" -e NCCL_IB_HCA=mine "$IMAGE" env
		want_dev=1
		for ((k = 0; k < n; k++)); do
			grep -qx "RDMA_MACVLAN_DEVICE_mlx5_$k=mlx5_$k:1" <<<"$out" || want_dev=""
		done
		expect "plain docker run with $n CDI devices: every device's RDMA_MACVLAN_DEVICE_ is set" '((rc == 0)) && [[ -n $want_dev ]]'
		expect "plain docker run: the user's -e NCCL_IB_HCA=mine is kept, no device sets UCX_NET_DEVICES" \
			'grep -qx "NCCL_IB_HCA=mine" <<<"$out" && ! grep -q "^UCX_NET_DEVICES=" <<<"$out"'
	fi

	# The same index on every rail; the user's own NCCL_IB_HCA.
	run_cmd docker rdma run -d --name "$net-same" "${fake[@]}" -e NCCL_IB_HCA=mine --gid-timeout 60s --memlock $MEMLOCK "${nets[@]}" "$IMAGE" sh -c "$show; exec sleep 600"
	expect "docker rdma run -d on $n networks" '((rc == 0))'
	add_entries "$root" "$net-same" "$n"
	logs_of "$net-same"
	expect "the workload got every rail, one index, its interfaces, and kept the user's NCCL_IB_HCA" \
		'[[ $out == "hca=mine gid=3 range= if==$ifs ucx=$list/3" ]] && [[ $err == *"keeping NCCL_IB_HCA=mine from the environment (this container'"'"'s own: =$list)"* ]]'
	run_cmd docker rdma inspect "$net-same"
	expect "docker rdma inspect shows the same" \
		'((rc == 0)) && grep -qx "NCCL_IB_HCA=mine" <<<"$out" && grep -qx "NCCL_IB_GID_INDEX=3" <<<"$out" && grep -qx "UCX_NET_DEVICES=$list" <<<"$out" && grep -qx "NCCL_SOCKET_IFNAME==$ifs" <<<"$out"'
	run_cmd docker rm -f "$net-same"
	clear_entries "$root" "$n" "${ips[@]}"

	# Indexes that differ per rail, an IPv6 entry of another container below on rail 0: the only
	# range holding every rail's address (10.80.0.0/N) holds every neighbour of every rail, and
	# NCCL picks a GID on every connection: refused (status 121) naming one; UCX's own choice is
	# right, so UCX is not named.
	run_cmd docker rdma run -d --name "$net-diff" "${fake[@]}" --gid-timeout 60s --memlock $MEMLOCK "${nets[@]}" "$IMAGE" sh -c "$show; exec sleep 600"
	add_entries "$root" "$net-diff" "$n" fd00::99
	run_cmd docker wait "$net-diff"
	expect "indexes 5 on mlx5_0 and 3 elsewhere: rdma-exec exits with status 121" '[[ $out == 121 ]]'
	run_cmd docker logs "$net-diff"
	expect "no range of the container's own addresses: the range and a neighbour's address are named, UCX is not" \
		'[[ $err == *"has no NCCL_IB_ADDR_RANGE holding this container'"'"'s addresses and no other one: 10.80.0.0/"*" also holds 10."*", an address of subnet 10."* && $err != *"UCX: "* ]]'
	run_cmd docker rm -f "$net-diff"
	clear_entries "$root" "$n" "${ips[@]}" fd00::99

	# Another container's address in rail 0's subnet below the container's: no setting works.
	run_cmd docker rdma run -d --name "$net-bad" "${fake[@]}" --gid-timeout 60s --memlock $MEMLOCK "${nets[@]}" "$IMAGE" echo started
	add_entries "$root" "$net-bad" "$n" "10.80.$sub.200"
	run_cmd docker wait "$net-bad"
	expect "a GID mismatch: rdma-exec exits with status 121" '[[ $out == 121 ]]'
	run_cmd docker logs "$net-bad"
	expect "the workload was not started; the rails, the indexes and the option are named" \
		'[[ $out != *started* && $err == *"different indexes on its rails mlx5_0:1 (eth"*"${ips[0]}, index 5)"* && $err == *"mlx5_1:1 (eth"*"${ips[1]}, index 3)"* && $err == *"NCCL: "* && $err == *"--accept-gid-mismatch"* ]]'
	run_cmd docker rm -f "$net-bad"
	clear_entries "$root" "$n" "${ips[@]}"
	# UCX's own choice on rail 0 is the other container's entry: UCX gets the container's own
	# addresses as UCX_IB_ROCE_SUBNETS, never next to UCX_IB_GID_INDEX.
	local subnets="${ips[0]}/32" k2
	for ((k2 = 1; k2 < n; k2++)); do subnets+=",${ips[k2]}/32"; done
	run_cmd docker rdma run -d --name "$net-acc" --accept-gid-mismatch "${fake[@]}" --gid-timeout 60s --memlock $MEMLOCK "${nets[@]}" "$IMAGE" sh -c 'echo "started ucx=${UCX_IB_ROCE_SUBNETS-}/${UCX_IB_GID_INDEX-}"'
	add_entries "$root" "$net-acc" "$n" "10.80.$sub.200"
	run_cmd docker wait "$net-acc"
	run_cmd docker logs "$net-acc"
	expect "--accept-gid-mismatch starts it, with a warning, and UCX_IB_ROCE_SUBNETS of the container's addresses" \
		'[[ $out == "started ucx=$subnets/" && $err == *"warning: --accept-gid-mismatch given"* ]]'
	run_cmd docker rm -f "$net-acc"
	clear_entries "$root" "$n" "${ips[@]}" "10.80.$sub.200"
}

e2e() {
	local engine=$1 cli extra=() t0=$SECONDS cdi="" k
	case $engine in
	debian) cli=$CLI_DEBIAN ;;
	current)
		cli=$CLI_CURRENT
		cdi=$work/$engine/cdi
		extra=(-- --cdi-spec-dir "$cdi")
		;;
	esac
	tag=$engine
	[[ -x $cli ]] || { fail "docker CLI $cli is missing"; return; }
	e=$work/$engine
	mkdir -p "$e/bin" "$e/config/cli-plugins" "$e/state" "${cdi:-$e/cdi}"
	ln -s "$cli" "$e/bin/docker"
	install -m 0755 "$work/bin/docker-rdma" "$e/config/cli-plugins/docker-rdma"
	export PATH=$e/bin:$ORIG_PATH DOCKER_CONFIG=$e/config

	for ((k = 0; k < RAILS; k++)); do
		veth_parent "rmvr${id}p$k" "rmvr${id}q$k"
		fake_hca "$e/fs" "mlx5_$k" "rmvr${id}p$k" -uverbs "$k" -pci "$(printf '0000:%02x:00.0' $((k + 3)))"
	done
	if ! fake_dev_nodes "$e/fs" || ! fake_dev_uverbs "$RAILS"; then
		fail "fake device nodes: /dev/infiniband could not be made, or has other numbers than the fake tree's"
		return
	fi
	if ! engine_up "$work/d-$engine" "$engine" "${extra[@]}" 2>"$work/dockerd.err"; then
		fail "private dockerd starts" "$(cat "$work/dockerd.err")"
		return
	fi
	plugin_up "$work/plugin" "$e/state" "${cdi:-$e/cdi}" "$e/fs/sys" 2>/dev/null
	sub=$((RANDOM % 250 + 1))
	for ((k = 0; k < RAILS; k++)); do
		run_cmd docker network create -d rdma-macvlan:latest --subnet "10.$((80 + k)).$sub.0/24" -o parent="rmvr${id}p$k" "$net-$k"
		expect "network $net-$k on mlx5_$k" '((rc == 0))'
		((rc == 0)) || return
	done
	if ! out=$(runtime_up 2>&1); then
		fail "docker rdma runtime install and SIGHUP: dockerd lists rdma-macvlan" "$out"
		return
	fi
	say "set up in $((SECONDS - t0)) s"
	local t1=$SECONDS
	rails "$engine" 2
	rails "$engine" 4
	rails "$engine" "$RAILS"
	tag=$engine
	timings+=("$engine: checks took $((SECONDS - t1)) s, $((SECONDS - t0)) s with setup")
}

e2e_preflight ip:iproute2
select_engines "$@"
new_id rmvr
net=rmvrail-$id
e=""
sub=0
ORIG_PATH=$PATH
BUILD_VERSION=e2e-$id suite_start rails docker-rdma rdma-exec rdma-macvlan-runtime fakesysfs rdma-macvlan
make_plugin_dir "$work/plugin" 2>/dev/null
run_engines e2e
