#!/usr/bin/env bash
# smoke-builtin.sh: prove the test infrastructure with Docker's built-in macvlan driver.
#
# For each engine: a veth pair in the host netns (unique names, both ends up) as the parent, a
# private dockerd (scripts/dockerd.sh), the busybox image (scripts/mkimage.sh), a macvlan network
# on the veth, two containers, a ping from one to the other (only between them), then everything
# removed; finally a check that nothing of this run is left (links, namespaces, processes, mounts).
#
# Needs: root; scripts/engines.sh run before; iproute2.
# Leaves behind: nothing, also when a step fails.
#
# Usage: smoke-builtin.sh [debian] [current]     (default: both)
# Environment: SMOKE_RUNS (timed `docker run --rm` runs per engine, default 5).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
scripts=$(cd "$here/../../scripts" && pwd)
IMAGE=rdma-macvlan-test/busybox:latest
RUNS=${SMOKE_RUNS:-5}

say() { printf 'smoke-builtin: %s\n' "$*" >&2; }
die() { say "FAIL: $*"; exit 1; }

# Names unique to this run: 4 hex digits of pid and time, checked against existing links.
id=$(printf '%04x' $(((($$ << 8) ^ 10#$(date +%s%N | cut -c10-15)) & 0xffff)))
parent=rmvs${id}p
peer=rmvs${id}q
net=rmv-smoke-$id
dir=""

cleanup() {
	local rc=$?
	set +e
	if [[ -n $dir ]]; then
		if [[ -S $dir/docker.sock ]]; then
			DOCKER_HOST=unix://$dir/docker.sock docker rm -f "$net-a" "$net-b" >/dev/null 2>&1
			DOCKER_HOST=unix://$dir/docker.sock docker network rm "$net" >/dev/null 2>&1
		fi
		bash "$scripts/dockerd.sh" stop "$dir" 2>/dev/null || rc=1
		rmdir "$dir" 2>/dev/null
		dir=""
	fi
	ip link del "$parent" 2>/dev/null
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ms() { date +%s%3N; }

# docker runs the CLI without its warning about IPv4 forwarding (disabled on purpose here).
docker() { command docker "$@" 2> >(grep -v 'IPv4 forwarding is disabled' >&2); }

# leftovers prints what of this run is still on the machine.
leftovers() {
	local d=$1
	ip -o link show | awk -F': ' -v id="rmvs$id" 'index($2, id) {print "link " $2}'
	findmnt -rn -o TARGET | grep -F -- "$d" | sed 's/^/mount /'
	pgrep -af -- "$d" | grep -v -e smoke-builtin -e "dockerd.sh stop" | sed 's/^/process /'
	[[ -e $d ]] && echo "dir $d"
	return 0
}

smoke() {
	local engine=$1 sub c1ip c2ip t0 t1 total=0 best=999999 i dt netns_before left
	sub=$((RANDOM % 250 + 1))
	c1ip=10.77.$sub.11
	c2ip=10.77.$sub.12
	netns_before=$(ip netns list | sort)

	ip link show "$parent" >/dev/null 2>&1 && die "link $parent exists already"
	ip link add "$parent" type veth peer name "$peer"
	ip link set "$parent" up
	ip link set "$peer" up

	dir=$(mktemp -d "${TMPDIR:-/tmp}/rmv-smoke.XXXXXX")
	t0=$(ms)
	bash "$scripts/dockerd.sh" start "$dir" "$engine" >/dev/null
	t1=$(ms)
	say "$engine: dockerd ready in $((t1 - t0)) ms"
	export DOCKER_HOST=unix://$dir/docker.sock
	bash "$scripts/mkimage.sh"

	docker network create -d macvlan --subnet "10.77.$sub.0/24" -o parent="$parent" "$net" >/dev/null
	docker run -d --name "$net-a" --network "$net" --ip "$c1ip" "$IMAGE" sleep 600 >/dev/null
	docker run -d --name "$net-b" --network "$net" --ip "$c2ip" "$IMAGE" sleep 600 >/dev/null
	# busybox ip has no -d: look at the link with the host's iproute2 from inside its netns.
	nsenter -t "$(docker inspect -f '{{.State.Pid}}' "$net-a")" -n ip -d link show eth0 |
		grep -q 'macvlan mode bridge' || die "$engine: eth0 of $net-a is not a macvlan in bridge mode"
	docker exec "$net-a" ip -4 -o addr show eth0 | grep -qF " $c1ip/24 " || die "$engine: $net-a has no $c1ip"
	docker exec "$net-a" ping -c 3 -W 2 "$c2ip" >/dev/null || die "$engine: $net-a cannot ping $net-b ($c2ip)"
	say "$engine: $net-a ($c1ip) pings $net-b ($c2ip) over macvlan on $parent"

	for ((i = 0; i < RUNS; i++)); do
		t0=$(ms)
		docker run --rm --network "$net" "$IMAGE" true
		dt=$(($(ms) - t0))
		total=$((total + dt))
		((dt < best)) && best=$dt
	done
	say "$engine: docker run --rm on the macvlan network: mean $((total / RUNS)) ms, best $best ms ($RUNS runs)"

	docker rm -f "$net-a" "$net-b" >/dev/null
	docker network rm "$net" >/dev/null
	if ip -o link show type macvlan | grep "@$parent:"; then die "$engine: macvlan children of $parent left"; fi
	unset DOCKER_HOST
	t0=$(ms)
	bash "$scripts/dockerd.sh" stop "$dir" 2>/dev/null
	say "$engine: dockerd stopped and cleaned in $(($(ms) - t0)) ms"
	ip link del "$parent"
	left=$(leftovers "$dir")
	[[ -z $left ]] || die "$engine: left behind: $left"
	[[ $(ip netns list | sort) == "$netns_before" ]] || die "$engine: network namespaces changed: $(ip netns list)"
	dir=""
	say "$engine: ok"
}

engines=("$@")
((${#engines[@]})) || engines=(debian current)
[[ $(id -u) -eq 0 ]] || die "needs root"
for e in "${engines[@]}"; do
	case $e in
	debian | current) smoke "$e" ;;
	*) die "unknown engine '$e' (want: debian, current)" ;;
	esac
done
say "all ok: ${engines[*]}"
