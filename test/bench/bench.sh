#!/usr/bin/env bash
# bench.sh: the benchmarks of rdma-macvlan (`make bench`); writes BENCHMARKS.md, docs/bench-*.png and
# docs/bench/runs/RUN/.
#
# 1. Container start: `docker run --rm` on rdma-macvlan (managed plugin, fake mlx5 sysfs for a veth
#    parent) and on the built-in macvlan, same parent and engine, in interleaved pairs whose order
#    alternates; on Debian's engine and on the current one when scripts/engines.sh has built it.
# 2.-3. Endpoint life cycle at the daemon's socket with 10/100/1000 live endpoints, restart time
#    and memory with 1000 endpoints in state (test/bench/cmd/endpoints, in its own namespaces).
# 4. Data plane: TCP throughput (iperf3) and request/response latency (test/bench/cmd/tcprr) between
#    two containers on rdma-macvlan, built-in macvlan and a user-defined bridge, run inside the
#    containers' namespaces with nsenter; traffic only between those two containers.
# 5. Concurrent starts: BENCH_CONC `docker run -d` at once on one network, rdma-macvlan and the
#    built-in macvlan on the same parent and engine, in rounds whose driver order alternates; the
#    wall time until every CLI has returned, errors, then `docker rm -f` of all of them at once and
#    a look for leaks (containers, macvlan children of the parent and the plugin's links in the
#    host netns, endpoints in the plugin's /v1/status and state directory). No traffic.
# 6. Starting through the runtime: `docker run --rm --runtime rdma-macvlan` (rdma-macvlan-runtime,
#    registered with `docker rdma runtime install`; rdma-exec waits in the container for its GID
#    entries) against `docker run --rm --runtime runc` with the same devices, CAP_IPC_LOCK and memlock
#    given by hand, both on the rdma-macvlan network, then the two on `--net none`, in interleaved
#    pairs whose order alternates, with the docker CLI of the engine's generation (fake device
#    nodes, the fake tree mounted into the containers for rdma-exec); rdma-exec reports its wait
#    (RDMA_EXEC_TIMING=1).
# Then test/bench/cmd/report prints the table of this run, stores its raw samples under
# docs/bench/runs/RUN/ and writes BENCHMARKS.md from every stored run: the headline table holds,
# for each target, the latest run that measured it (a run of some parts leaves the others' rows
# as they were); older figures go to docs/bench/history.md. docs/bench-*.png are drawn from the runs the
# sections show.
#
# Needs: root, Debian (apt), Go. Installs what is missing: Debian's Docker engine (via
#   scripts/engines.sh), iperf3, gnuplot-nox. Never builds the current engine (slow); it is used
#   when `scripts/engines.sh bindir` finds it.
# Leaves behind: BENCHMARKS.md, docs/bench-*.png, docs/bench/runs/RUN/; nothing else of a run
#   (links, engines, plugins, containers, processes, temporary directories, /dev/infiniband when
#   part 6 made it), also when a step fails.
#
# Usage: bench.sh [debian] [current]      (default: debian, and current when built)
# Environment:
#   BENCH_PAIRS     interleaved start pairs per engine (default 40; issue 6 asks for at least 30)
#   BENCH_CYCLES    endpoint life cycles per level and pass (default 100)
#   BENCH_ROUNDS    data-plane rounds (default 9: each network 3 times in each position)
#   BENCH_IPERF_SECONDS  seconds per iperf3 run after one omitted second of slow start (default 4)
#   BENCH_OUT       where raw results go (default: a temporary directory, removed at the end)
#   BENCH_NO_WRITE  1: print the table only; leave BENCHMARKS.md and docs/ alone
#   BENCH_PARTS     which parts run (default "endpoints docker concurrent runtime"): endpoints =
#                   2.-3., docker = 1. and 4., concurrent = 5., runtime = 6.
#   BENCH_RDMA_PAIRS  interleaved pairs of part 6 per engine (default 30)
#   DOCKER_CLI_DEBIAN, DOCKER_CLI_CURRENT  the docker CLI part 6 uses per engine (default
#                   /usr/bin/docker, Debian's 20.10, and /usr/local/bin/docker)
#   BENCH_CONC      containers started at once in part 5 (default 100)
#   BENCH_CONC_ROUNDS  rounds of part 5 per engine, each runs both drivers (default 3)
#   BENCH_COMMIT    the commit to name in the report (default: git rev-parse of this tree)
#   BENCH_GIDS      present (default): the fake GID table holds the entries of the addresses the
#                   timed containers get, as the kernel would add them; absent: it never does
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
scripts=$repo/scripts
PAIRS=${BENCH_PAIRS:-40}
CYCLES=${BENCH_CYCLES:-100}
ROUNDS=${BENCH_ROUNDS:-9}
IPERF_SECONDS=${BENCH_IPERF_SECONDS:-4}
PARTS=${BENCH_PARTS:-endpoints docker concurrent runtime}
RDMA_PAIRS=${BENCH_RDMA_PAIRS:-30}
CLI_DEBIAN=${DOCKER_CLI_DEBIAN:-/usr/bin/docker}
CLI_CURRENT=${DOCKER_CLI_CURRENT:-/usr/local/bin/docker}
# Part 6's locked-memory limit, given to both commands: this machine refuses more than 8 MiB.
MEMLOCK=8388608
CONC=${BENCH_CONC:-100}
CONC_ROUNDS=${BENCH_CONC_ROUNDS:-3}
# Addresses the timed runs cycle through (their GID entries fit an mlx5 table: 2 per address).
IPS=50
# Seconds a `docker run -d` or `docker rm -f` of part 5 may take, and to wait for a clean host.
CONC_TIMEOUT=180
CONC_SETTLE=30
IMAGE=rdma-macvlan-test/busybox:latest
PLUGIN_NAME=rmvbench
PLUGIN=$PLUGIN_NAME:latest
# What long-lived containers run: a sleep that exits at once on SIGTERM.
SLEEPER=(sh -c 'trap "exit 0" TERM; sleep 3600 & wait')

# shellcheck source=test/e2e/lib/fakedev.sh
source "$repo/test/e2e/lib/fakedev.sh"

t_start=$SECONDS
say() { printf 'bench: [%4ds] %s\n' "$((SECONDS - t_start))" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# Names unique to this run.
id=$(printf '%04x' $(((($$ << 8) ^ 10#$(date +%s%N | cut -c10-15)) & 0xffff)))
parent=rmvb${id}p
peer=rmvb${id}q

# Cleanup state: what this run made.
work=""
dir=""
loadpid=""
partpid=""
bgpids=()
policy=""
sock=""
# engine_cleanup: what one engine's part made (its dockerd, parent link, background processes,
# device nodes); 1 when its dockerd could not be stopped.
engine_cleanup() {
	local p rc=0
	for p in "${bgpids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	bgpids=()
	if [[ -n $dir ]]; then
		bash "$scripts/dockerd.sh" stop "$dir" 2>/dev/null || rc=1
		dir=""
	fi
	ip link del "$parent" 2>/dev/null
	fake_dev_remove
	return "$rc"
}
cleanup() {
	local rc=$?
	set +e
	if [[ -n $partpid ]]; then kill -TERM "$partpid" 2>/dev/null; wait "$partpid" 2>/dev/null; fi
	engine_cleanup || rc=1
	if [[ -n $loadpid ]]; then kill "$loadpid" 2>/dev/null; wait "$loadpid" 2>/dev/null; fi
	[[ -n $policy ]] && rm -f "$policy"
	if [[ -n $work && -z ${BENCH_OUT:-} ]]; then rm -rf "$work"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# docker runs the CLI without its warning about IPv4 forwarding (off on purpose in these engines).
docker() { command docker "$@" 2> >(grep -v 'IPv4 forwarding is disabled' >&2); }

install_tools() {
	local need=()
	command -v iperf3 >/dev/null || need+=(iperf3)
	command -v gnuplot >/dev/null || need+=(gnuplot-nox)
	command -v nsenter >/dev/null || need+=(util-linux)
	((${#need[@]})) || return 0
	say "apt-get install ${need[*]}"
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		# iperf3's package would start its own server on the host.
		policy=/usr/sbin/policy-rc.d
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
	if [[ -n $policy ]]; then rm -f "$policy"; policy=""; fi
}

# now_us prints the wall clock in microseconds (no fork).
now_us() { local t=${EPOCHREALTIME/./}; printf '%s\n' "$t"; }

# timed_run NET IP: one `docker run --rm` on NET with address IP; prints its wall time in ms.
timed_run() {
	local t0 t1
	t0=$(now_us)
	docker run --rm --network "$1" --ip "$2" "$IMAGE" true >/dev/null || return 1
	t1=$(now_us)
	printf '%d.%03d\n' $(((t1 - t0) / 1000)) $(((t1 - t0) % 1000))
}

# wait_listen PID PORT: waits up to 5 s for a TCP listener on PORT in the netns of PID.
wait_listen() {
	local i
	for ((i = 0; i < 100; i++)); do
		nsenter -t "$1" -n ss -Hltn "sport = :$2" 2>/dev/null | grep -q . && return 0
		sleep 0.05
	done
	return 1
}

container_pid() { docker inspect -f '{{.State.Pid}}' "$1"; }
container_ip() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }

# dataplane ENGINE SUB: iperf3 and tcprr between two containers on each network (10.SUB.{1,2,3}.0/24),
# in rounds whose network order rotates.
dataplane() {
	local engine=$1 sub=$2 net r k i a b pa pb ipa spid n=0
	local nets=(rdma macvlan bridge)
	for net in "${nets[@]}"; do
		n=$((n + 1))
		docker run -d --name "rmvb-$net-a" --network "rmvb-$net" --ip "10.$sub.$n.200" "$IMAGE" "${SLEEPER[@]}" >/dev/null
		docker run -d --name "rmvb-$net-b" --network "rmvb-$net" --ip "10.$sub.$n.201" "$IMAGE" "${SLEEPER[@]}" >/dev/null
	done
	for ((r = 1; r <= ROUNDS; r++)); do
		for ((k = 0; k < 3; k++)); do
			i=$(((k + r) % 3))
			net=${nets[i]}
			a=rmvb-$net-a b=rmvb-$net-b
			pa=$(container_pid "$a") pb=$(container_pid "$b") ipa=$(container_ip "$a")
			[[ -n $ipa ]] || die "$engine: $a has no IP address"
			# nsenter execs iperf3: $! is the server's pid.
			nsenter -t "$pa" -n iperf3 -s -p 5201 >"$work/iperf-server.log" 2>&1 &
			spid=$!
			bgpids+=("$spid")
			wait_listen "$pa" 5201 || die "$engine: iperf3 server in $a did not listen: $(cat "$work/iperf-server.log")"
			nsenter -t "$pb" -n iperf3 -c "$ipa" -p 5201 -O 1 -t "$IPERF_SECONDS" -J >"$work/res/iperf-$engine-$net-$r.json" ||
				die "$engine: iperf3 from $b to $a ($ipa) failed: $(grep '"error"' "$work/res/iperf-$engine-$net-$r.json")"
			kill "$spid" 2>/dev/null || true
			wait "$spid" 2>/dev/null || true
			nsenter -t "$pa" -n "$work/bin/tcprr" -listen "$ipa:7001" -timeout 60s &
			spid=$!
			bgpids+=("$spid")
			wait_listen "$pa" 7001 || die "$engine: tcprr server in $a did not listen"
			nsenter -t "$pb" -n "$work/bin/tcprr" -connect "$ipa:7001" -n 5000 -size 64 >"$work/res/rr-$engine-$net-$r.json" ||
				die "$engine: tcprr from $b to $a ($ipa) failed"
			wait "$spid" || die "$engine: tcprr server in $a failed"
			say "$engine: data plane round $r: $net done"
		done
	done
	for net in "${nets[@]}"; do docker rm -f "rmvb-$net-a" "rmvb-$net-b" >/dev/null; done
	bgpids=()
}

# conc_leaks NET NID SYSFS_STATE IFNAMES...: prints one line per thing a concurrent round left
# behind (nothing when clean): its containers, macvlan children of the parent and the plugin's
# links (IFNAMES, from /v1/status while they ran) in the host netns, containers Docker still
# lists on NET, and for rdma-macvlan (NID given) endpoints in /v1/status and endpoint state files.
conc_leaks() {
	local net=$1 nid=$2 state=$3 l n links
	shift 3
	command docker ps -aq --filter name=rmvbc- | sed 's/^/container left: /'
	ip -o link show type macvlan | grep -F "@$parent:" | sed 's/^/macvlan child of the parent in the host netns: /'
	links=" $(ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); printf "%s ", $2}')"
	for l in "$@"; do
		[[ $links != *" $l "* ]] || echo "plugin link in the host netns: $l"
	done
	n=$(command docker network inspect -f '{{len .Containers}}' "$net")
	[[ $n == 0 ]] || echo "docker network inspect $net: $n containers"
	if [[ -n $nid ]]; then
		if l=$("$work/bin/rmvstatus" -socket "$sock" 2>&1); then
			n=$(awk -v id="$nid" '$1 == "endpoint" && $2 == id' <<<"$l" | grep -c . || true)
			[[ $n == 0 ]] || echo "/v1/status: $n endpoints on $net"
		else
			echo "/v1/status unreadable: $l"
		fi
		n=$(find "$state/endpoints" -mindepth 1 -maxdepth 1 -name '*.json' 2>/dev/null | grep -c . || true)
		[[ $n == 0 ]] || echo "$n endpoint state files in $state/endpoints"
	fi
	return 0
}

# conc_round ENGINE SUB ROUND DRIVER POSITION: CONC `docker run -d` at once on rmvb-DRIVER, then
# `docker rm -f` of all of them at once; appends a line to conc.csv.
conc_round() {
	local engine=$1 sub=$2 round=$3 driver=$4 pos=$5 net=rmvb-$4 nid="" i t0 t1 wall rmwall failed
	local running notrun leaks settle o err
	local -a pids=() ifs=()
	local -A octet=([rdma]=1 [macvlan]=2)
	local log=$work/res/conc-$engine-$round-$driver
	mkdir -p "$log"
	[[ $driver == rdma ]] && nid=$(command docker network inspect -f '{{.Id}}' "$net")
	t0=$(now_us)
	for ((i = 1; i <= CONC; i++)); do
		timeout -k 5 "$CONC_TIMEOUT" docker run -d --name "rmvbc-$i" --network "$net" --ip "10.$sub.${octet[$driver]}.$((9 + i))" \
			"$IMAGE" "${SLEEPER[@]}" >"$log/run.$i.out" 2>"$log/run.$i.err" </dev/null &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		wait "${pids[i]}" || printf 'rmvbc-%d: exit status %d\n' $((i + 1)) "$?" >>"$log/errors"
	done
	t1=$(now_us)
	wall=$(((t1 - t0) / 1000))
	for ((i = 1; i <= CONC; i++)); do
		err=$(grep -v 'IPv4 forwarding is disabled' "$log/run.$i.err" || true)
		[[ -z $err ]] || printf 'rmvbc-%d: %s\n' "$i" "$err" >>"$log/errors"
	done
	# A run that fails or says something on stderr is an error.
	failed=$(sed -n 's/^\(rmvbc-[0-9]*\):.*/\1/p' "$log/errors" 2>/dev/null | sort -u | grep -c . || true)
	running=$(command docker ps -q --filter name=rmvbc- --filter status=running | grep -c . || true)
	# Containers whose run succeeded but that do not run (a failed run is counted once, above).
	notrun=$((CONC - failed - running))
	((notrun >= 0)) || notrun=0
	if [[ -n $nid ]]; then
		"$work/bin/rmvstatus" -socket "$sock" >"$log/status" || true
		mapfile -t ifs < <(awk -v id="$nid" '$1 == "endpoint" && $2 == id' "$log/status" | tr ' ' '\n' | sed -n 's/^ifname=//p')
		((${#ifs[@]} == running)) || echo "/v1/status lists ${#ifs[@]} endpoints on $net, $running containers run" >>"$log/errors"
	fi
	pids=()
	t0=$(now_us)
	for ((i = 1; i <= CONC; i++)); do
		timeout -k 5 "$CONC_TIMEOUT" docker rm -f "rmvbc-$i" >/dev/null 2>>"$log/rm.err" </dev/null &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do wait "${pids[i]}" || true; done
	t1=$(now_us)
	rmwall=$(((t1 - t0) / 1000))
	# Whatever is still there after CONC_SETTLE s is a leak.
	t0=$(now_us)
	while :; do
		leaks=$(conc_leaks "$net" "$nid" "$work/state-$engine" "${ifs[@]}")
		[[ -n $leaks ]] || break
		# What was still there when the removals had returned (not a leak if it goes).
		[[ -e $log/settling ]] || printf '%s\n' "$leaks" >"$log/settling"
		(($(now_us) - t0 < CONC_SETTLE * 1000000)) || break
		sleep 0.5
	done
	settle=$((($(now_us) - t0) / 1000))
	[[ -z $leaks ]] || printf '%s\n' "$leaks" >"$log/leaks"
	leaks=$(grep -c . <<<"$leaks" || true)
	printf '%s,%d,%s,%d,%d,%d,%d,%d,%d,%d,%d\n' "$engine" "$round" "$driver" "$pos" "$CONC" "$wall" "$failed" "$notrun" "$rmwall" "$settle" "$leaks" >>"$work/res/conc.csv"
	say "$engine: round $round, $driver: $CONC docker run -d in $wall ms ($failed errors, $notrun not running), rm -f in $rmwall ms, clean after $settle ms more, $leaks leaks"
	if [[ -s $log/errors ]]; then head -n 5 "$log/errors" | while read -r o; do say "  $o"; done; fi
	if ((leaks)); then head -n 5 "$log/leaks" | while read -r o; do say "  leak: $o"; done; fi
	# Leftovers must not spill into the next round: remove them again.
	command docker ps -aq --filter name=rmvbc- | xargs -r command docker rm -f >/dev/null 2>&1 || true
}

# concurrent ENGINE SUB: CONC_ROUNDS rounds, each with both drivers, the first alternating.
concurrent() {
	local engine=$1 sub=$2 r
	for ((r = 1; r <= CONC_ROUNDS; r++)); do
		if ((r % 2)); then
			conc_round "$engine" "$sub" "$r" rdma 1
			conc_round "$engine" "$sub" "$r" macvlan 2
		else
			conc_round "$engine" "$sub" "$r" macvlan 1
			conc_round "$engine" "$sub" "$r" rdma 2
		fi
	done
}

# runtime_run ENGINE SUB SYSFS: part 6 on the engine's rdma-macvlan network (rmvb-rdma,
# 10.SUB.1.0/24, GID entries of .10-.59 in the fake tree under SYSFS) and on --net none.
runtime_run() {
	local engine=$1 sub=$2 sysfs=$3 cli i k kind n
	local -a fake=() order=()
	case $engine in
	debian) cli=$CLI_DEBIAN ;;
	current) cli=$CLI_CURRENT ;;
	esac
	[[ -x $cli ]] || die "$engine: the docker CLI $cli is missing (DOCKER_CLI_${engine^^} names another)"
	printf 'cli_%s=%s\n' "$engine" "$("$cli" version -f '{{.Client.Version}}' 2>/dev/null)" >>"$work/res/machine.env"
	# The runtime as a user registers it (rdma-exec beside it), dockerd reloaded.
	"$work/bin/docker-rdma" runtime install --config-file "$dir/daemon.json" --path "$work/bin/rdma-macvlan-runtime" >/dev/null ||
		die "$engine: docker rdma runtime install failed"
	kill -HUP "$(cat "$dir/dockerd.spawned")"
	for ((n = 0; n < 40; n++)); do
		[[ $(docker info -f '{{range $k, $v := .Runtimes}}{{$k}} {{end}}') == *"rdma-macvlan "* ]] && break
		sleep 0.5
	done
	((n < 40)) || die "$engine: dockerd does not list the runtime rdma-macvlan after SIGHUP"
	# A container's /sys is the real kernel's: the fake tree goes in at /rdma-fake for rdma-exec.
	# Both commands of a pair get the same mount, variables and memlock.
	fake=(-v "$sysfs:/rdma-fake:ro" -e RDMA_EXEC_SYSFS_ROOT=/rdma-fake -e RDMA_EXEC_TIMING=1 --ulimit "memlock=$MEMLOCK:$MEMLOCK")
	mkdir -p "$work/res/runtime-$engine"
	# runtime_timed KIND PAIR POSITION IP: one command of the part, timed; appends to runtime.csv.
	runtime_timed() {
		local kind=$1 pair=$2 pos=$3 ip=$4 err=$work/res/runtime-$engine/$1-$2.err t0 t1 ms waited="" looks="" line
		local -a cmd=()
		case $kind in
		runtime) cmd=("$cli" run --rm --runtime rdma-macvlan --net rmvb-rdma --ip "$ip" "${fake[@]}" "$IMAGE" true) ;;
		runc) cmd=("$cli" run --rm --runtime runc --net rmvb-rdma --ip "$ip" "${fake[@]}" --device /dev/infiniband/uverbs0 \
			--device /dev/infiniband/rdma_cm --cap-add IPC_LOCK "$IMAGE" true) ;;
		runtime-none) cmd=("$cli" run --rm --runtime rdma-macvlan --net none "$IMAGE" true) ;;
		runc-none) cmd=("$cli" run --rm --runtime runc --net none "$IMAGE" true) ;;
		esac
		t0=$(now_us)
		"${cmd[@]}" >/dev/null 2>"$err" </dev/null || die "$engine: ${cmd[*]} failed: $(grep -v 'IPv4 forwarding is disabled' "$err")"
		t1=$(now_us)
		ms=$(printf '%d.%03d' $(((t1 - t0) / 1000)) $(((t1 - t0) % 1000)))
		if [[ $kind == runtime ]]; then
			line=$(grep -m1 '^rdma-exec: GID entries ready after ' "$err") || line=""
			[[ $line =~ ^rdma-exec:\ GID\ entries\ ready\ after\ ([0-9.]+)\ ms\ \(([0-9]+)\ look ]] ||
				die "$engine: rdma-exec did not report its wait (RDMA_EXEC_TIMING=1): $(cat "$err")"
			waited=${BASH_REMATCH[1]} looks=${BASH_REMATCH[2]}
		fi
		printf '%s,%d,%s,%d,%s,%s,%s\n' "$engine" "$pair" "$kind" "$pos" "$ms" "$waited" "$looks" >>"$work/res/runtime.csv"
	}
	# Warm-up (not recorded): the runtime, rdma-exec and the image in the page cache.
	for i in 1 2; do
		for kind in runtime runc runtime-none runc-none; do
			runtime_timed "$kind" 0 0 "10.$sub.1.$((10 + i))" 2>/dev/null
		done
	done
	sed -i '/^[^,]*,0,/d' "$work/res/runtime.csv"
	say "$engine: $RDMA_PAIRS interleaved pairs of docker run --rm through the runtime and through runc"
	for ((i = 1; i <= RDMA_PAIRS; i++)); do
		if ((i % 2)); then order=(runtime runc runc-none runtime-none); else order=(runc runtime runtime-none runc-none); fi
		for k in 0 1 2 3; do
			runtime_timed "${order[k]}" "$i" $((k + 1)) "10.$sub.1.$((10 + i % 40))"
		done
		((i % 10)) || say "$engine: $i pairs"
	done
}

# remove_networks ENGINE NET...: docker network rm of each NET, tried again for up to 30 s while the
# engine still counts an endpoint on it (Docker 20.10 answered "has active endpoints" once right
# after docker rm -f of the network's last containers). What the engine and the plugin still hold
# is kept in the results (network-rm-ENGINE-NET.txt) whether or not a later try succeeds.
remove_networks() {
	local engine=$1 net i err out
	shift
	for net in "$@"; do
		for ((i = 0; ; i++)); do
			err=$(command docker network rm "$net" 2>&1 >/dev/null) && break
			if ((i == 0)); then
				out=$work/res/network-rm-$engine-$net.txt
				{
					printf 'docker network rm %s: %s\n\n' "$net" "$err"
					command docker network inspect "$net" 2>&1
					command docker ps -a 2>&1
					[[ $net == rmvb-rdma ]] && "$work/bin/rmvstatus" -socket "$sock" 2>&1
				} >"$out"
				say "$engine: docker network rm $net: $err (what the engine and the plugin hold: $out); trying again"
			fi
			((i < 30)) || die "$engine: docker network rm $net still fails after 30 s: $err"
			sleep 1
		done
		((i == 0)) || say "$engine: docker network rm $net succeeded after $i s"
	done
}

# engine_up ENGINE SUB: a veth parent with a fake mlx5 tree (sysfs, engine_bench's), a private
# dockerd of ENGINE with the managed plugin, and the three networks of the parts (10.SUB.1-3.0/24).
engine_up() {
	local engine=$1 sub=$2 mac
	say "$engine: parent $parent, private dockerd"
	ip link show "$parent" >/dev/null 2>&1 && die "link $parent exists already"
	ip link add "$parent" type veth peer name "$peer"
	ip link set "$parent" up
	ip link set "$peer" up
	mac=$(cat "/sys/class/net/$parent/address")
	sysfs=$work/sysfs-$engine
	"$work/bin/fakesysfs" -root "$sysfs" -kind mlx5 -netdev "$parent" -mac "$mac"
	mkdir -p "$work/state-$engine" "$work/cdi-$engine"

	dir=$(mktemp -d "${TMPDIR:-/tmp}/rmvb.XXXXXX")
	# The current engine resolves CDI devices from the plugin's CDI directory (part 6).
	local extra=()
	[[ $engine == current ]] && extra=(-- --cdi-spec-dir "$work/cdi-$engine")
	bash "$scripts/dockerd.sh" start "$dir" "$engine" "${extra[@]}" >/dev/null
	export DOCKER_HOST=unix://$dir/docker.sock
	printf 'engine_%s=%s\n' "$engine" "$(docker version -f '{{.Server.Version}}, API {{.Server.APIVersion}}')" >>"$work/res/machine.env"
	bash "$scripts/mkimage.sh" 2>/dev/null
	PLUGIN_NAME=$PLUGIN_NAME PLUGIN_DIR=$work/plugin bash "$scripts/plugin.sh" create 2>/dev/null
	docker plugin set "$PLUGIN" sysfs.source="$sysfs/sys" state.source="$work/state-$engine" cdi.source="$work/cdi-$engine"
	docker plugin enable "$PLUGIN" >/dev/null
	sock=/run/docker/plugins/$(docker plugin inspect -f '{{.Id}}' "$PLUGIN")/rdma-macvlan.sock

	docker network create -d "$PLUGIN" --subnet "10.$sub.1.0/24" -o parent="$parent" rmvb-rdma >/dev/null
	docker network create -d macvlan --subnet "10.$sub.2.0/24" -o parent="$parent" rmvb-macvlan >/dev/null
	docker network create -d bridge --subnet "10.$sub.3.0/24" rmvb-bridge >/dev/null
}

# seed_gids SUB: the GID entries of the addresses the parts use, in the fake table beforehand.
seed_gids() {
	local sub=$1 i
	# The kernel adds a container's GID entries once its address is set; the fake table gets the
	# entries of the addresses the timed runs and the data-plane containers use beforehand, so
	# each GID watch ends at its first look (BENCH_GIDS=absent: they never appear and every watch
	# polls the table until its container exits or for 10 s).
	# Part 5 uses the addresses 10..(9 + CONC); with those of the timed runs and of the data plane,
	# at most 2 x (max(IPS, CONC) + 2) entries and the 2 default ones: 206 of 255 slots for CONC 100.
	if [[ ${BENCH_GIDS:-present} == present ]]; then
		local last=$((10 + IPS - 1))
		if [[ " $PARTS " == *" concurrent "* ]] && ((9 + CONC > last)); then last=$((9 + CONC)); fi
		for i in $(seq 10 "$last") 200 201; do
			"$work/bin/fakesysfs" add-ip -root "$sysfs" -hca mlx5_0 -ip "10.$sub.1.$i" -ndev eth0 >/dev/null
		done
	fi
}

# docker_pairs ENGINE SUB: PAIRS interleaved pairs of docker run --rm, rdma-macvlan and macvlan,
# each one's time in start.csv (BENCH_PARTS without docker: none).
docker_pairs() {
	local engine=$1 sub=$2 i order d1 d2 t1 t2 host
	local -A net_octet=([rdma]=1 [macvlan]=2)
	if [[ " $PARTS " == *" docker "* ]]; then
		say "$engine: $PAIRS interleaved pairs of docker run --rm"
	else
		PAIRS=0
	fi
	for ((i = 1; i <= PAIRS; i++)); do
		if ((i % 2)); then order=(rdma macvlan); else order=(macvlan rdma); fi
		host=$((10 + i % IPS))
		t1=$(timed_run "rmvb-${order[0]}" "10.$sub.${net_octet[${order[0]}]}.$host")
		t2=$(timed_run "rmvb-${order[1]}" "10.$sub.${net_octet[${order[1]}]}.$host")
		d1=${order[0]} d2=${order[1]}
		printf '%s,%d,%s,1,%s\n%s,%d,%s,2,%s\n' "$engine" "$i" "$d1" "$t1" "$engine" "$i" "$d2" "$t2" >>"$work/res/start.csv"
		((i % 10)) || say "$engine: $i pairs"
	done
}

engine_bench() {
	local engine=$1 sysfs i sub
	sub=$((RANDOM % 200 + 20))
	engine_up "$engine" "$sub"

	seed_gids "$sub"
	say "$engine: warm-up"
	for i in 1 2 3; do timed_run rmvb-rdma "10.$sub.1.$((10 + i))" >/dev/null; timed_run rmvb-macvlan "10.$sub.2.$((10 + i))" >/dev/null; done
	docker_pairs "$engine" "$sub"

	if [[ " $PARTS " == *" concurrent "* ]]; then
		say "$engine: $CONC_ROUNDS rounds of $CONC docker run -d at once per driver"
		concurrent "$engine" "$sub"
	fi

	if [[ " $PARTS " == *" runtime "* ]]; then
		if [[ -z $made_dev ]] && ! fake_dev_nodes "$sysfs"; then
			die "fake device nodes: /dev/infiniband could not be made, or exists without uverbs0 231:192 and the fake tree's rdma_cm"
		fi
		runtime_run "$engine" "$sub" "$sysfs"
	fi

	if [[ " $PARTS " == *" docker "* && $engine == "${DATAPLANE_ENGINE:-debian}" ]]; then
		say "$engine: data plane, $ROUNDS rounds"
		dataplane "$engine" "$sub"
	fi

	remove_networks "$engine" rmvb-rdma rmvb-macvlan rmvb-bridge
	PLUGIN_NAME=$PLUGIN_NAME bash "$scripts/plugin.sh" remove 2>/dev/null
	unset DOCKER_HOST
	bash "$scripts/dockerd.sh" stop "$dir" 2>/dev/null
	dir=""
	ip link del "$parent"
	say "$engine: done"
}

# commit names the measured tree: the short commit, with -dirty when tracked files other than
# the report's differ from it.
commit() {
	local c
	c=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null) || { echo unknown; return; }
	[[ -z $(git -C "$repo" status --porcelain --untracked-files=no -- . ':!BENCHMARKS.md' ':!docs' 2>/dev/null) ]] || c+=-dirty
	printf '%s\n' "$c"
}

# check_settings: dies naming a BENCH_ setting that is out of range.
check_settings() {
	# Part 5's addresses end below the data plane's (.200) and their GID entries fit the table.
	[[ $CONC =~ ^[0-9]+$ ]] || die "BENCH_CONC=$CONC: want 1-120"
	((CONC >= 1 && CONC <= 120)) || die "BENCH_CONC=$CONC: want 1-120"
	[[ $CONC_ROUNDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_CONC_ROUNDS=$CONC_ROUNDS: want 1 or more"
	[[ $RDMA_PAIRS =~ ^[1-9][0-9]*$ ]] || die "BENCH_RDMA_PAIRS=$RDMA_PAIRS: want 1 or more"
	local p
	for p in $PARTS; do
		case $p in
		endpoints | docker | concurrent | runtime) ;;
		*) die "BENCH_PARTS: unknown part '$p' (want: endpoints docker concurrent runtime)" ;;
		esac
	done
}

# build_tools: the plugin and the bench's tools into $work.
build_tools() {
	say "building the plugin and the bench tools"
	PLUGIN_DIR=$work/plugin bash "$scripts/plugin.sh" build 2>/dev/null
	(cd "$repo" && for t in endpoints tcprr report; do go build -o "$work/bin/$t" "./test/bench/cmd/$t"; done &&
		go build -o "$work/bin/fakesysfs" ./test/fakesysfs && go build -o "$work/bin/rmvstatus" ./test/e2e/rmvstatus &&
		CGO_ENABLED=0 go build -trimpath -o "$work/bin/docker-rdma" ./cmd/docker-rdma &&
		CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/bin/rdma-exec" ./cmd/rdma-exec &&
		CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/bin/rdma-macvlan-runtime" ./cmd/rdma-macvlan-runtime)
}

# write_machine_env: what the run measured on (machine.env) and the result files' header lines.
write_machine_env() {
	{
		printf 'date=%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
		printf 'nproc=%s\n' "$(nproc)"
		printf 'cpu=%s\n' "$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
		printf 'memory=%s\n' "$(awk '/^MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
		printf 'kernel=%s\n' "$(uname -r)"
		printf 'os=%s\n' "$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release)"
		printf 'go=%s\n' "$(go version | cut -d' ' -f3)"
		printf 'commit=%s\n' "${BENCH_COMMIT:-$(commit)}"
		printf 'parts=%s\n' "$PARTS"
		printf 'rdma_pairs=%s\nmemlock=%s\n' "$RDMA_PAIRS" "$MEMLOCK"
		printf 'iperf3=%s\n' "$(iperf3 --version | head -1 | cut -d' ' -f2)"
		printf 'pairs=%s\ncycles=%s\nrounds=%s\niperf_seconds=%s\n' "$PAIRS" "$CYCLES" "$ROUNDS" "$IPERF_SECONDS"
		printf 'gids=%s\n' "${BENCH_GIDS:-present}"
		printf 'conc=%s\nconc_rounds=%s\nconc_settle=%s\n' "$CONC" "$CONC_ROUNDS" "$CONC_SETTLE"
	} >"$work/res/machine.env"
	printf 'engine,pair,driver,position,ms\n' >"$work/res/start.csv"
	printf 'engine,round,driver,position,n,wall_ms,errors,not_running,rm_ms,settle_ms,leaks\n' >"$work/res/conc.csv"
	printf 'engine,pair,kind,position,ms,wait_ms,looks\n' >"$work/res/runtime.csv"
}

main() {
	local engines=("$@") e
	[[ $(id -u) -eq 0 ]] || die "needs root"
	check_settings
	if ((${#engines[@]} == 0)); then
		engines=(debian)
		bash "$scripts/engines.sh" bindir >/dev/null 2>&1 && engines+=(current)
	fi
	if [[ -n ${BENCH_OUT:-} ]]; then
		work=$BENCH_OUT
		mkdir -p "$work"
	else
		work=$(mktemp -d "${TMPDIR:-/tmp}/rmv-bench.XXXXXX")
	fi
	mkdir -p "$work/res" "$work/bin"

	say "installing what is missing"
	bash "$scripts/engines.sh" install debian
	install_tools

	# Load on this shared machine, every 2 s, for the report's noise figures.
	(while :; do printf '%s,%s\n' "$(date +%s)" "$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)"; sleep 2; done) >"$work/res/load.csv" &
	loadpid=$!

	build_tools
	write_machine_env
	if [[ " $PARTS " == *" endpoints "* ]]; then
		say "endpoint life cycle, restart and memory (test/bench/cmd/endpoints)"
		"$work/bin/endpoints" -out "$work/res" -bin "$work/plugin/rootfs/rdma-macvlan" -cycles "$CYCLES"
	fi

	[[ " $PARTS " == *" docker "* || " $PARTS " == *" concurrent "* || " $PARTS " == *" runtime "* ]] || engines=()
	# Each engine's part runs in a subshell that cleans up after itself: a part that fails keeps
	# what it measured before, the others still run, the report is written from what there is,
	# and the run fails at the end naming the parts that did not finish.
	local failed=() rc
	for e in "${engines[@]}"; do
		case $e in
		debian | current) ;;
		*) die "unknown engine '$e' (want: debian, current)" ;;
		esac
		# In the background and waited for: a subshell in a condition would run without set -e.
		(
			trap 'rc=$?; set +e; engine_cleanup || rc=1; exit "$rc"' EXIT
			trap 'exit 130' INT TERM
			engine_bench "$e"
		) &
		partpid=$!
		rc=0
		wait "$partpid" || rc=$?
		partpid=""
		if ((rc != 0)); then
			((rc != 130)) || die "interrupted"
			failed+=("$e")
			say "$e: the part failed (see the error above); what it measured before is kept"
			printf '%s\n' "$e" >>"$work/res/failed.txt"
		fi
	done

	kill "$loadpid" 2>/dev/null || true
	wait "$loadpid" 2>/dev/null || true
	loadpid=""
	local write=(-md "$repo/BENCHMARKS.md" -docs "$repo/docs")
	[[ ${BENCH_NO_WRITE:-} == 1 ]] && write=()
	if ((${#failed[@]})); then
		# A partial run must not replace the published figures.
		write=()
		say "not writing BENCHMARKS.md: the part of ${failed[*]} failed"
	fi
	"$work/bin/report" -in "$work/res" "${write[@]}" -elapsed "$((SECONDS - t_start))"
	if ((${#failed[@]})); then
		[[ -n ${BENCH_OUT:-} ]] || { BENCH_OUT=$work; say "results kept in $work"; }
		die "the part of ${failed[*]} failed after $((SECONDS - t_start)) s; the figures above are what it measured before"
	fi
	say "done in $((SECONDS - t_start)) s"
}

main "$@"
