#!/usr/bin/env bash
# bench-ab.sh: before/after of two daemon builds at the Docker level, next to the built-in macvlan.
#
# One private Debian dockerd (scripts/dockerd.sh), a veth parent with a fake mlx5 sysfs whose GID
# table holds the timed containers' entries (as the kernel would add them), the two builds as
# managed plugins and the built-in macvlan on that parent; then N triples of `docker run --rm`
# in rotating order. Prints one CSV line per run (triple,variant,ms) on stdout and the paired
# ratios at the end (via test/bench/cmd/report's statistics). Used for the figures of
# docs/bench/notes.md.
#
# Needs: root, Go, Debian's engine (scripts/engines.sh install debian), two static daemon binaries
#   (e.g. CGO_ENABLED=0 go build -o A ./cmd/rdma-macvlan in two trees).
# Leaves behind: nothing (engine, plugins, link, temporary directory go), also on failure.
#
# Usage: bench-ab.sh BEFORE-BINARY AFTER-BINARY       Environment: N (triples, default 36)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
scripts=$repo/scripts
N=${N:-36}
IMAGE=rdma-macvlan-test/busybox:latest

say() { printf 'bench-ab: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

(($# == 2)) || die "usage: $0 BEFORE-BINARY AFTER-BINARY"
[[ $(id -u) -eq 0 ]] || die "needs root"
declare -A bin=([before]=$(realpath "$1") [after]=$(realpath "$2"))
for v in before after; do [[ -x ${bin[$v]} ]] || die "${bin[$v]} is not an executable"; done

id=$(printf '%04x' $(((($$ << 8) ^ 10#$(date +%s%N | cut -c10-15)) & 0xffff)))
parent=rmva${id}p
peer=rmva${id}q
w=""
dir=""
cleanup() {
	local rc=$?
	set +e
	if [[ -n $dir ]]; then bash "$scripts/dockerd.sh" stop "$dir" 2>/dev/null || rc=1; fi
	ip link del "$parent" 2>/dev/null
	[[ -n $w ]] && rm -rf "$w"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

w=$(mktemp -d "${TMPDIR:-/tmp}/rmvab.XXXXXX")
(cd "$repo" && go build -o "$w/fakesysfs" ./test/fakesysfs && go build -o "$w/report" ./test/bench/cmd/report)
ip link add "$parent" type veth peer name "$peer"
ip link set "$parent" up
ip link set "$peer" up
"$w/fakesysfs" -root "$w/sysfs" -kind mlx5 -netdev "$parent" -mac "$(cat "/sys/class/net/$parent/address")"
# Addresses 10.151.{1,2}.10-49: two entries each (RoCE v1 and v2) in a 255-slot table.
for i in $(seq 10 49); do
	for o in 1 2; do "$w/fakesysfs" add-ip -root "$w/sysfs" -hca mlx5_0 -ip "10.151.$o.$i" -ndev eth0 >/dev/null; done
done
dir=$w/d
bash "$scripts/dockerd.sh" start "$dir" debian >/dev/null
export DOCKER_HOST=unix://$dir/docker.sock
bash "$scripts/mkimage.sh" 2>/dev/null
declare -A octet=([before]=1 [after]=2 [macvlan]=3)
for v in before after; do
	mkdir -p "$w/state-$v" "$w/cdi-$v"
	PLUGIN_NAME=rmvab$v PLUGIN_DIR=$w/plugin-$v PLUGIN_BINARY=${bin[$v]} bash "$scripts/plugin.sh" build 2>/dev/null
	PLUGIN_NAME=rmvab$v PLUGIN_DIR=$w/plugin-$v bash "$scripts/plugin.sh" create 2>/dev/null
	docker plugin set "rmvab$v:latest" sysfs.source="$w/sysfs/sys" state.source="$w/state-$v" cdi.source="$w/cdi-$v"
	docker plugin enable "rmvab$v:latest" >/dev/null
	docker network create -d "rmvab$v:latest" --subnet "10.151.${octet[$v]}.0/24" -o parent="$parent" "n-$v" >/dev/null
done
docker network create -d macvlan --subnet 10.151.3.0/24 -o parent="$parent" n-macvlan >/dev/null

# run VARIANT HOST: one docker run --rm; prints its wall time in ms.
run() {
	local t0 t1
	t0=${EPOCHREALTIME/./}
	docker run --rm --network "n-$1" --ip "10.151.${octet[$1]}.$2" "$IMAGE" true >/dev/null 2>&1 || return 1
	t1=${EPOCHREALTIME/./}
	printf '%d.%03d\n' $(((t1 - t0) / 1000)) $(((t1 - t0) % 1000))
}

for v in before after macvlan; do run "$v" 10 >/dev/null && run "$v" 11 >/dev/null; done
orders=("macvlan before after" "before after macvlan" "after macvlan before"
	"macvlan after before" "after before macvlan" "before macvlan after")
printf 'engine,pair,driver,position,ms\n' >"$w/start-ba.csv"
printf 'engine,pair,driver,position,ms\n' >"$w/start-am.csv"
echo "triple,variant,ms"
for ((i = 1; i <= N; i++)); do
	declare -A t=()
	for v in ${orders[$((i % 6))]}; do
		t[$v]=$(run "$v" $((12 + i % 38)))
		echo "$i,$v,${t[$v]}"
	done
	# The report's start statistics take (rdma, macvlan) pairs: after vs before, after vs macvlan.
	printf 'debian,%d,rdma,1,%s\ndebian,%d,macvlan,2,%s\n' "$i" "${t[after]}" "$i" "${t[before]}" >>"$w/start-ba.csv"
	printf 'debian,%d,rdma,1,%s\ndebian,%d,macvlan,2,%s\n' "$i" "${t[after]}" "$i" "${t[macvlan]}" >>"$w/start-am.csv"
	unset t
done
for pair in ba am; do
	mkdir -p "$w/r-$pair"
	cp "$w/start-$pair.csv" "$w/r-$pair/start.csv"
done
say "after / before (shown as 'rdma' / 'macvlan'):"
"$w/report" -in "$w/r-ba" | sed -n 's/^1\. container start, \(.*\)/  \1/p' >&2 || true
say "after / built-in macvlan:"
"$w/report" -in "$w/r-am" | sed -n 's/^1\. container start, \(.*\)/  \1/p' >&2 || true
