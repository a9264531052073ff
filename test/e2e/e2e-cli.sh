#!/usr/bin/env bash
# e2e-cli.sh: end-to-end test of the `docker rdma` CLI plugin (cmd/docker-rdma) on private engines.
#
# For each engine: a private dockerd (scripts/dockerd.sh) driven by the docker CLI of its own
# generation (debian: Docker 20.10 with Debian's /usr/bin/docker; current: moby v2 with the newer
# CLI, /usr/local/bin/docker, and CDI specs read from a private directory), a veth pair as the RoCE
# parent, a fake sysfs tree (test/fakesysfs: mlx5_0 on the veth, plus mlx5_1 as a decoy),
# fake device nodes under /dev/infiniband (made only when the host has none, with the numbers of
# the fake tree), the managed plugin pointed at the tree, an rdma-macvlan network, docker-rdma
# installed as a CLI plugin in a temporary DOCKER_CONFIG, so the real `docker rdma` runs it, and
# rdma-macvlan-runtime (with rdma-exec beside it) registered with `docker rdma runtime install` and
# SIGHUP. Then: docker rdma run is docker run --runtime rdma-macvlan (refused with 125 before the
# runtime is installed); containers get exactly the right nodes, CAP_IPC_LOCK and the memlock limit
# asked (this machine's dockerd cannot go above 8 MiB, so the checks ask for 8 MiB or less); flags,
# stdin, tty and exit status pass through; errors are clear; ls, inspect and doctor print what they
# should, as root and as an unprivileged member of the docker group (who cannot reach the plugin
# socket).
# Traffic only between the containers it starts.
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines), iproute2, util-linux (setpriv,
#   script).
# Leaves behind: nothing, also when a check or a step fails (links, engine, nodes, files).
#
# Usage: e2e-cli.sh [debian] [current]   (default: debian, and current when scripts/engines.sh built it)
# Environment: DOCKER_CLI_DEBIAN (default /usr/bin/docker), DOCKER_CLI_CURRENT (default
#   /usr/local/bin/docker).
# Output: "ok - ..." or "not ok - ..." per check, then "N passed, N failed"; exit 1 when any failed.
#
# The checks (expect) are strings evaluated against $rc, $out and $err of the last run_cmd.
# shellcheck disable=SC2016
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"
# shellcheck source=test/e2e/lib/fakedev.sh
source "$here/lib/fakedev.sh"
CLI_DEBIAN=${DOCKER_CLI_DEBIAN:-/usr/bin/docker}
CLI_CURRENT=${DOCKER_CLI_CURRENT:-/usr/local/bin/docker}
MEMLOCK=8388608

# run_cmd and expect: test/e2e/lib/e2e.sh.

# Everything this run creates beyond the harness's (engines, links), for teardown.
work=""     # the run's directory: built binaries, fake tree, engine dirs
proxy=""    # the pid of tcpunix, while it runs

# teardown_hook: the harness's teardown runs it once the engine is emptied.
teardown_hook() {
	if [[ -n $proxy ]]; then
		kill "$proxy" 2>/dev/null
		wait "$proxy" 2>/dev/null
		proxy=""
	fi
	fake_dev_remove
}
e2e_traps

# e2e ENGINE runs every check against one engine: set-up, then the groups of checks below, which
# share its locals.
e2e() {
	local engine=$1 cli extra=() t0=$SECONDS sub cdi="" ip1 ip2 v2 i flags e t1 dry tcp unlimited_refused
	local fake w1 w2 i1 i2 n w3 i3 noshell last gid stopped=0
	cli_setup; ((!stopped)) || return 0
	version_ls_checks
	run_checks
	inspect_checks
	exec_checks
	exec_passthrough_checks
	exec_refusal_checks
	doctor_checks
	user_checks
	run_cmd docker rm -f "$net-c1" "$net-c2"
	run_cmd docker network rm "$net"
	expect "network removed" '((rc == 0))'
	if [[ $engine == current ]]; then
		expect "the network's CDI spec went with it" '[[ ! -e $cdi/rdma-macvlan-mlx5_0.json ]]'
	fi
	qos_checks
	[[ $engine != current ]] || samples
	timings+=("$engine: checks took $((SECONDS - t1)) s, $((SECONDS - t0)) s with setup")
}

# cli_setup: the docker CLI, the parent and its fake tree, the engine, the plugin, the network
# and the runtime; sets stopped when a step failed (it says which). Runs inside e2e.
cli_setup() {
	case $engine in
	debian) cli=$CLI_DEBIAN ;;
	current)
		cli=$CLI_CURRENT
		cdi=$work/$engine/cdi
		extra=(-- --cdi-spec-dir "$cdi")
		;;
	esac
	tag=$engine
	[[ -x $cli ]] || { fail "docker CLI $cli is missing"; stopped=1; return 0; }
	e=$work/$engine
	mkdir -p "$e/bin" "$e/config/cli-plugins" "$e/state" "${cdi:-$e/cdi}"
	ln -s "$cli" "$e/bin/docker"
	install -m 0755 "$work/bin/docker-rdma" "$e/config/cli-plugins/docker-rdma"
	export PATH=$e/bin:$ORIG_PATH DOCKER_CONFIG=$e/config
	say "docker CLI $cli ($(docker --version))"

	# The parent and its fake sysfs tree.
	veth_parent "$parent" "$peer"
	fake_hca "$e/fs" mlx5_0 "$parent"
	"$work/bin/fakesysfs" build -root "$e/fs" -kind mlx5 -hca mlx5_1 -netdev "rmvc${id}x" -mac 02:00:00:00:01:02 -pci 0000:04:00.0 -uverbs 1
	if ! fake_dev_nodes "$e/fs"; then
		fail "fake device nodes: /dev/infiniband could not be made, or exists without uverbs0 231:192 and the fake tree's rdma_cm"
		stopped=1; return 0
	fi

	# The engine, the image, the plugin on the fake tree, the network.
	if ! engine_up "$work/d-$engine" "$engine" "${extra[@]}" 2>"$work/dockerd.err"; then
		fail "private dockerd starts" "$(cat "$work/dockerd.err")"
		stopped=1; return 0
	fi
	say "engine ready after $((SECONDS - t0)) s"
	plugin_up "$work/plugin" "$e/state" "${cdi:-$e/cdi}" "$e/fs/sys" 2>/dev/null
	sub=$((RANDOM % 250 + 1))
	ip1=10.79.$sub.11
	ip2=10.79.$sub.12
	run_cmd docker network create -d rdma-macvlan:latest --subnet "10.79.$sub.0/24" -o parent="$parent" "$net"
	expect "docker network create -d rdma-macvlan:latest on the veth parent" '((rc == 0))'
	((rc == 0)) || { stopped=1; return 0; }
	run_cmd docker rdma run --rm --memlock $MEMLOCK --net "$net" "$IMAGE" true
	expect "run on an engine without the rdma-macvlan runtime: status 125, naming docker rdma runtime install" \
		'((rc == 125)) && [[ $err == *"the engine has no rdma-macvlan runtime"* && $err == *"docker rdma runtime install"* ]]'
	if ! out=$(runtime_up 2>&1); then
		fail "docker rdma runtime install and SIGHUP: dockerd lists rdma-macvlan" "$out"
		stopped=1; return 0
	fi
	say "set up in $((SECONDS - t0)) s"

	if [[ $engine == current ]]; then
		flags="--device rdma-macvlan/hca=mlx5_0"
	else
		flags="--device /dev/infiniband/uverbs0 --device /dev/infiniband/rdma_cm"
	fi
	t1=$SECONDS
}

# version_ls_checks: the CLI plugin as the docker CLI runs it, and ls. Runs inside e2e.
version_ls_checks() {
	# The CLI plugin as the docker CLI runs it.
	run_cmd docker rdma version
	expect "docker rdma is a CLI plugin of $cli (docker rdma version: its version first)" '((rc == 0)) && [[ $(head -n 1 <<<"$out") == "docker rdma:"*" e2e-$id" ]]'
	run_cmd docker --help
	expect "docker --help lists rdma" '[[ $out == *rdma* ]]'

	# ls.
	run_cmd docker rdma ls
	expect "ls shows the network with parent, HCA, port, state and a GID bar" \
		'((rc == 0)) && grep -Eq "^$net +rdma-macvlan:latest +$parent +mlx5_0 +1 +ACTIVE +0 +\[#\.{9}\] 2/255 " <<<"$out"'
	expect "ls shows the exact device flags ($flags)" '[[ $(grep "^$net " <<<"$out") == *"  $flags" ]]'
	run_cmd docker rdma ls --format json
	expect "ls --format json" '((rc == 0)) && [[ $out == *"\"hca\": \"mlx5_0\""* && $out == *"\"source\": \"daemon\""* && $out == *"\"size\": 255"* ]]'
}

# run_checks: docker rdma run: the runtime and its variables, memlock, how it asks Docker,
# pass-through of flags, stdin, tty and the exit status, errors. Runs inside e2e.
run_checks() {
	# run: the runtime, its variables, memlock.
	run_cmd docker rdma run --no-wait --dry-run --memlock $MEMLOCK --net "$net" "$IMAGE" true
	expect "run --no-wait --dry-run prints the docker command" \
		'((rc == 0)) && [[ $out == "docker run --runtime rdma-macvlan -e RDMA_MACVLAN_NO_WAIT=1 --ulimit memlock=$MEMLOCK:$MEMLOCK --net $net $IMAGE true" ]]'
	run_cmd docker rdma run --dry-run --gid-timeout 30s --roce-version 2 --gid-family ipv4 --accept-gid-mismatch --device-mode nodes --net "$net" "$IMAGE" true
	expect "run --dry-run: its own flags as the runtime's variables, --device-mode ignored with a note" \
		'((rc == 0)) && [[ $out == "docker run --runtime rdma-macvlan -e RDMA_MACVLAN_GID_TIMEOUT=30s -e RDMA_MACVLAN_ROCE_VERSION=2 -e RDMA_MACVLAN_GID_FAMILY=ipv4 -e RDMA_MACVLAN_ACCEPT_GID_MISMATCH=1 --net $net $IMAGE true" && $err == *"--device-mode is ignored"* ]]'
	run_cmd docker rdma run --dry-run --memlock $MEMLOCK --net "$net" "$IMAGE" true
	expect "run --dry-run is docker run --runtime rdma-macvlan" \
		'((rc == 0)) && [[ $out == "docker run --runtime rdma-macvlan --ulimit memlock=$MEMLOCK:$MEMLOCK --net $net $IMAGE true" ]]'
	# shellcheck disable=SC2034 # used by the checks (eval)
	dry=$out tcp=""
	# How it asks Docker (-D says): the engine's API on the socket DOCKER_HOST names; through the
	# docker CLI when DOCKER_HOST is tcp:// (a loopback port tcpunix forwards to the same socket).
	run_cmd docker -D rdma run --dry-run --memlock $MEMLOCK --net "$net" "$IMAGE" true
	expect "run asks the engine's API on its socket and runs no docker command to read Docker" \
		'((rc == 0)) && [[ ${out/ -D run / run } == "$dry" && $err == *"asking its API on $ddir/docker.sock directly"* && $err == *"engine API GET /v1."*"/networks/$net: 200"* && $err != *"docker rdma: running"* ]]'
	"$work/bin/tcpunix" -socket "$ddir/docker.sock" >"$work/tcpunix.addr" 2>"$work/tcpunix.err" &
	proxy=$!
	for ((i = 0; i < 50; i++)); do
		tcp=$(cat "$work/tcpunix.addr" 2>/dev/null || true)
		[[ -n $tcp ]] && break
		sleep 0.1
	done
	run_cmd env DOCKER_HOST="$tcp" docker -D rdma run --dry-run --memlock $MEMLOCK --net "$net" "$IMAGE" true
	expect "with DOCKER_HOST=$tcp run asks through the docker CLI, with the same result" \
		'((rc == 0)) && [[ $tcp == tcp://127.0.0.1:* && ${out/ -D run / run } == "$dry" && $err == *"(DOCKER_HOST): not a local unix socket: asking Docker through the docker CLI"* && $err == *"docker rdma: running docker -D network inspect -- $net"* && $err != *"engine API GET"* ]]'
	kill "$proxy"
	wait "$proxy" 2>/dev/null || true
	proxy=""
	run_cmd docker rdma run --no-wait --rm --memlock $MEMLOCK --net "$net" "$IMAGE" \
		sh -c 'ls /dev/infiniband | tr "\n" " "; echo; grep CapEff /proc/self/status; grep "Max locked memory" /proc/self/limits; echo "hca=$RDMA_MACVLAN_DEVICE_mlx5_0"'
	expect "the container sees exactly uverbs0 and rdma_cm (not uverbs1, umad0, issm0)" '((rc == 0)) && [[ $(head -n1 <<<"$out") == "rdma_cm uverbs0 " ]]'
	expect "the container holds CAP_IPC_LOCK" '((rc == 0)) && (( (16#$(awk "/CapEff/ {print \$2}" <<<"$out") >> 14) & 1 ))'
	expect "the container's memlock limit is $MEMLOCK" '[[ $(awk "/Max locked memory/ {print \$4, \$5}" <<<"$out") == "$MEMLOCK $MEMLOCK" ]]'
	if [[ $engine == current ]]; then
		expect "the devices came through CDI (the spec's env is set)" '[[ $out == *"hca=mlx5_0:1"* ]]'
	fi
	run_cmd docker run --rm --net "$net" "$IMAGE" sh -c 'ls /dev/infiniband 2>&1; grep CapEff /proc/self/status'
	expect "control: plain docker run gets no RDMA device and no CAP_IPC_LOCK" \
		'((rc == 0)) && [[ $out == *"No such file"* ]] && (( ! ((16#$(awk "/CapEff/ {print \$2}" <<<"$out") >> 14) & 1) ))'
	run_cmd docker rdma run --no-wait --rm --memlock 4M:8M --net "$net" "$IMAGE" grep "Max locked memory" /proc/self/limits
	expect "--memlock 4M:8M gives soft 4194304, hard 8388608" '((rc == 0)) && [[ $(awk "{print \$4, \$5}" <<<"$out") == "4194304 8388608" ]]'
	run_cmd docker rdma run --no-wait --rm --ulimit memlock=1048576:2097152 --device /dev/infiniband/uverbs1 --net "$net" "$IMAGE" \
		sh -c 'ls /dev/infiniband | tr "\n" " "; echo; grep "Max locked memory" /proc/self/limits'
	expect "the user's own --ulimit memlock and --device are kept" \
		'((rc == 0)) && [[ $(head -n1 <<<"$out") == "rdma_cm uverbs0 uverbs1 " && $(awk "/Max locked/ {print \$4, \$5}" <<<"$out") == "1048576 2097152" ]]'

	# Pass-through of flags, stdin, tty and the exit status.
	run_cmd docker rdma run --no-wait --rm --memlock $MEMLOCK --net "$net" "$IMAGE" sh -c 'exit 7'
	expect "the container's exit status 7 is docker rdma's" '((rc == 7))'
	run_cmd docker rdma run --no-wait --rm --memlock $MEMLOCK --name "$net-c0" -e FOO=bar -w /tmp --net "$net" -- "$IMAGE" sh -c 'echo "$FOO $(pwd) $(hostname)" -- x'
	expect "-e, -w, --name and a -- separator pass through" '((rc == 0)) && [[ $out == "bar /tmp "*" -- x" ]]'
	run_cmd docker container inspect "$net-c0"
	expect "--rm passed through (the container is gone)" '((rc != 0))'
	run_cmd sh -c "echo hello stdin | docker rdma run --no-wait -i --rm --memlock $MEMLOCK --net $net $IMAGE cat"
	expect "-i passes stdin through" '((rc == 0)) && [[ $out == "hello stdin" ]]'
	if command -v script >/dev/null; then
		run_cmd script -qec "docker rdma run --no-wait -it --rm --memlock $MEMLOCK --net $net $IMAGE sh -c 'tty; exit 3'" /dev/null
		expect "-it gets a terminal, and its exit status" '((rc == 3)) && [[ $out == *"/dev/pts/"* ]]'
	fi

	# Errors.
	run_cmd docker rdma run --rm "$IMAGE" true
	expect "no --network is refused with status 125" '((rc == 125)) && [[ $err == *"no --network"* ]]'
	run_cmd docker rdma run --rm --network none "$IMAGE" true
	expect "a network that is not rdma-macvlan is refused" '((rc == 125)) && [[ $err == *"network none (driver null) is not rdma-macvlan"* ]]'
	run_cmd docker rdma run --rm --network "no-such-$id" "$IMAGE" true
	expect "an unknown network is refused" '((rc == 125)) && [[ $err == *"no-such-$id"* ]]'
	run_cmd docker rdma run --no-wait --rm --net "$net" "$IMAGE" true
	if ((rc == 0)); then
		pass "this engine accepts memlock=unlimited (the default)"
	else
		expect "the engine refusing memlock=unlimited (the runtime's default) is explained" '[[ $err == *"rlimit"* && $err == *"could not set the locked-memory limit memlock=unlimited"* && $err == *"--memlock 8M"* ]]'
	fi
	unlimited_refused=$rc
}

# inspect_checks: inspect CONTAINER and NETWORK. Runs inside e2e.
inspect_checks() {
	# inspect: a container whose GID entries the "kernel" (fakesysfs) adds after it starts.
	run_cmd docker rdma run --no-wait -d --name "$net-c1" --ip "$ip1" --memlock $MEMLOCK --net "$net" "$IMAGE" sleep 600
	expect "run -d" '((rc == 0))'
	run_cmd "$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$ip1" -ndev eth0
	# shellcheck disable=SC2034 # used by the checks (eval)
	v2=${out##* }
	expect "fake kernel adds the v1/v2 GID pair of $ip1" '((rc == 0)) && [[ $out == "2 3" ]]'
	for ((i = 0; i < 100; i++)); do
		run_cmd docker rdma inspect "$net-c1"
		[[ $out == *"RDMA       ready"* ]] && break
		sleep 0.1
	done
	expect "inspect CONTAINER: interface, address, GIDs, readiness" \
		'((rc == 0)) && [[ $out == *"interface  eth0 (host link rmv"* && $out == *"IPv4 $ip1"* && $out == *"3  RoCE v2     0000:0000:0000:0000:0000:ffff:"* && $out == *"RDMA       ready"* ]]'
	expect "inspect CONTAINER: devices, IPC_LOCK and memlock of the container" \
		'[[ $out == *"IPC_LOCK   yes"* && $out == *"memlock    $MEMLOCK:$MEMLOCK"* && $out != *problem* ]]'
	expect "inspect CONTAINER: pasteable env with the RoCE v2 index" \
		'grep -qx "NCCL_IB_HCA==mlx5_0:1" <<<"$out" && grep -qx "NCCL_IB_GID_INDEX=$v2" <<<"$out" && grep -qx "NCCL_SOCKET_IFNAME==eth0" <<<"$out" && grep -qx "UCX_IB_GID_INDEX=$v2" <<<"$out"'
	run_cmd docker rdma inspect --format json "$net-c1"
	expect "inspect --format json has the GID index" '((rc == 0)) && [[ $out == *"\"gid_index\": $v2,"* && $out == *"\"rdma_ready\": true"* ]]'
	run_cmd docker rdma run --no-wait -d --name "$net-c2" --ip "$ip2" --memlock $MEMLOCK --net "$net" "$IMAGE" sleep 600
	run_cmd docker exec "$net-c2" ping -c 2 -W 2 "$ip1"
	expect "$net-c2 pings $net-c1 over the rdma-macvlan network" '((rc == 0))'
	run_cmd docker rdma inspect "$net"
	expect "inspect NETWORK lists both containers with their GID index and readiness" \
		'((rc == 0)) && grep -Eq "^$net-c1 +eth0 +$ip1 +- +$v2 +2,3 +- +ready$" <<<"$out" && grep -Eq "^$net-c2 +- +$ip2 +- +- +- +- +not ready: " <<<"$out"'
}

# exec_checks: rdma-exec: two workloads waiting for their GID entries and each getting its own
# index. Runs inside e2e.
exec_checks() {
	# rdma-exec: the workload starts once its GID entries are in the table, with its GID index.
	# The container's /sys is the real kernel's: the fake tree is mounted at /rdma-fake and
	# RDMA_EXEC_SYSFS_ROOT (for tests only) points rdma-exec at it.
	fake=(-v "$e/fs:/rdma-fake:ro" -e RDMA_EXEC_SYSFS_ROOT=/rdma-fake) w1=10.79.$sub.21 w2=10.79.$sub.22
	run_cmd docker rdma run -d --name "$net-w1" --ip "$w1" "${fake[@]}" --gid-timeout 60s --memlock $MEMLOCK --net "$net" "$IMAGE" \
		sh -c 'echo "pid=$$ gid=$NCCL_IB_GID_INDEX hca=$NCCL_IB_HCA if=$NCCL_SOCKET_IFNAME ucx=$UCX_NET_DEVICES/$UCX_IB_GID_INDEX root=${RDMA_EXEC_SYSFS_ROOT-unset}"; trap "exit 42" TERM; while :; do sleep 0.2; done'
	expect "rdma-exec: run -d of a first container" '((rc == 0))'
	run_cmd docker rdma run -d --name "$net-w2" --ip "$w2" "${fake[@]}" --gid-timeout 60s --memlock $MEMLOCK --net "$net" "$IMAGE" \
		sh -c 'echo "pid=$$ gid=$NCCL_IB_GID_INDEX"; exec sleep 600'
	expect "rdma-exec: run -d of a second container" '((rc == 0))'
	sleep 1
	run_cmd docker logs "$net-w1"
	expect "rdma-exec: the workload has not started before its GID entries exist" '((rc == 0)) && [[ -z $out ]]'
	# The fake kernel adds the second container's entries first, then the first's.
	run_cmd "$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$w2" -ndev eth0
	i2=${out##* }
	run_cmd "$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$w1" -ndev eth0
	i1=${out##* }
	for ((n = 0; n < 100; n++)); do
		run_cmd docker logs "$net-w1"
		[[ -n $out ]] && break
		sleep 0.1
	done
	expect "rdma-exec: container 1 got NCCL_IB_GID_INDEX=$i1 (its own v2 entry), devices and interface; PID 1 is the workload" \
		'[[ $out == "pid=1 gid=$i1 hca==mlx5_0:1 if==eth0 ucx=mlx5_0:1/$i1 root=unset" ]]'
	for ((n = 0; n < 100; n++)); do
		run_cmd docker logs "$net-w2"
		[[ -n $out ]] && break
		sleep 0.1
	done
	expect "rdma-exec: container 2 got NCCL_IB_GID_INDEX=$i2 at the same time" '[[ $out == "pid=1 gid=$i2" ]] && ((i1 != i2))'
	run_cmd docker rdma inspect "$net-w1"
	expect "rdma-exec: inspect shows the index the workload got" '((rc == 0)) && grep -qx "NCCL_IB_GID_INDEX=$i1" <<<"$out" && grep -qx "NCCL_SOCKET_IFNAME==eth0" <<<"$out"'
	run_cmd docker stop -t 5 "$net-w1"
	run_cmd docker inspect -f '{{.State.ExitCode}}' "$net-w1"
	expect "rdma-exec: docker stop's SIGTERM reaches the workload (its trap exits 42)" '[[ $out == 42 ]]'
}

# exec_passthrough_checks: through rdma-exec, the exit status, arguments, stdin, -it, --init,
# --user, and an image without a shell. Runs inside e2e.
exec_passthrough_checks() {
	# Exit status, arguments, stdin and -it through rdma-exec (entries present before the start).
	w3=10.79.$sub.23
	i3=$("$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$w3" -ndev eth0)
	i3=${i3##* }
	run_cmd docker rdma run --rm --ip "$w3" "${fake[@]}" --memlock $MEMLOCK --net "$net" "$IMAGE" sh -c 'echo "$0|$1|$2"; exit 7' 'a b' '' '--net'
	expect "rdma-exec: the workload's arguments and exit status 7 pass through" '((rc == 7)) && [[ $out == "a b||--net" ]]'
	run_cmd sh -c "echo via stdin | docker rdma run -i --rm --ip $w3 ${fake[*]} --memlock $MEMLOCK --net $net $IMAGE cat"
	expect "rdma-exec: -i passes stdin through" '((rc == 0)) && [[ $out == "via stdin" ]]'
	run_cmd docker rdma run --rm --init --user 65534 --ip "$w3" "${fake[@]}" --memlock $MEMLOCK --net "$net" "$IMAGE" sh -c 'echo "$(id -u) $NCCL_IB_GID_INDEX"; ps -o pid,comm | grep -c docker-init'
	expect "rdma-exec: --init and --user behave as without it" '((rc == 0)) && [[ $(head -n1 <<<"$out") == "65534 "* && $(tail -n1 <<<"$out") == 1 ]]'
	if command -v script >/dev/null; then
		run_cmd script -qec "docker rdma run -it --rm --ip $w3 ${fake[*]} --memlock $MEMLOCK --net $net $IMAGE sh -c 'tty; exit 4'" /dev/null
		expect "rdma-exec: -it gets a terminal, and its exit status" '((rc == 4)) && [[ $out == *"/dev/pts/"* ]]'
	fi

	# The README's quick start run line: test/e2e/e2e-runtime.sh runs it (plain docker run with the
	# runtime as the default runtime).

	# An image with no shell: a single static binary, its ENTRYPOINT and CMD read from the image.
	noshell=rdma-macvlan-test/noshell:latest
	mkdir -p "$work/noshell"
	cp /bin/busybox "$work/noshell/busybox"
	tar --numeric-owner --owner=0 --group=0 -C "$work/noshell" -c busybox |
		docker import -c 'ENTRYPOINT ["/busybox"]' -c 'CMD ["env"]' - "$noshell" >/dev/null
	run_cmd docker rdma run --rm --ip "$w3" "${fake[@]}" --memlock $MEMLOCK --net "$net" "$noshell"
	expect "rdma-exec: an image without a shell runs its own ENTRYPOINT and CMD with the env" \
		'((rc == 0)) && grep -qx "NCCL_IB_GID_INDEX=$i3" <<<"$out" && grep -qx "NCCL_IB_HCA==mlx5_0:1" <<<"$out"'
	run_cmd docker rdma run --rm --ip "$w3" "${fake[@]}" --memlock $MEMLOCK --net "$net" "$noshell" echo given command
	expect "rdma-exec: a command given to it replaces CMD after the ENTRYPOINT" '((rc == 0)) && [[ $out == "given command" ]]'
}

# exec_refusal_checks: rdma-exec refusing to start a workload: entries that never appear, a
# table that fills while it waits. Runs inside e2e.
exec_refusal_checks() {
	# A container whose entries never appear: the workload never starts, status 122 and why.
	run_cmd docker rdma run --rm --ip "10.79.$sub.24" "${fake[@]}" --gid-timeout 2s --memlock $MEMLOCK --net "$net" "$IMAGE" echo started
	expect "rdma-exec: GID entries that never appear: status 122, the workload not started, the reason" \
		'((rc == 122)) && [[ $out != *started* && $err == *"did not appear within 2s; the workload was not started"* && $err == *"did not appear in the table of mlx5_0 port 1 ("*" entries free)"* ]]'
	# The table fills while a container waits: it says the table is full. Fill it, free two
	# addresses' entries (admission also holds two for $net-c2, which never got its entries),
	# start the container, then take the free slots again (the last one with half of an
	# address, as the kernel would).
	last=0
	for ((n = 1; n < 200; n++)); do
		"$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "10.80.0.$n" -ndev other >/dev/null 2>&1 || break
		last=$n
	done
	for i in "$n" "$last" $((last - 1)); do
		"$work/bin/fakesysfs" del-ip -root "$e/fs" -hca mlx5_0 -ip "10.80.0.$i" >/dev/null 2>&1
	done
	run_cmd docker rdma run -d --name "$net-wf" --ip "10.79.$sub.25" "${fake[@]}" --gid-timeout 4s --memlock $MEMLOCK --net "$net" "$IMAGE" echo started
	expect "rdma-exec: run -d with a few slots left" '((rc == 0))'
	for i in $((last - 1)) "$last" "$n"; do
		"$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "10.80.0.$i" -ndev other >/dev/null 2>&1 || true
	done
	run_cmd docker wait "$net-wf"
	expect "rdma-exec: a full table: status 122" '[[ $out == 122 ]]'
	run_cmd docker logs "$net-wf"
	expect "rdma-exec: a full table is named, with the entries counted" '[[ $out != *started* && $err == *"the table is full (255 of 255 entries used"* ]]'
	for ((n = 1; n <= last + 1; n++)); do
		"$work/bin/fakesysfs" del-ip -root "$e/fs" -hca mlx5_0 -ip "10.80.0.$n" >/dev/null 2>&1
	done
	run_cmd docker rm -f "$net-w1" "$net-w2" "$net-wf"
}

# doctor_checks: doctor. Runs inside e2e.
doctor_checks() {
	# doctor.
	run_cmd docker rdma doctor --sysfs-root "$e/fs" --image "$IMAGE" --memlock $MEMLOCK
	expect "doctor passes on a ready host (status 0)" '((rc == 0)) && [[ $out == *"OK    plugin"* && $out == *"OK    netns mode"* && $out == *"OK    port mlx5_0/1"* ]]'
	expect "doctor sees the device nodes, the GID table and the memlock limits" \
		'[[ $out == *"OK    devices mlx5_0 "*"/dev/infiniband/uverbs0 231:192, /dev/infiniband/rdma_cm"* && $out == *"OK    GIDs mlx5_0/1"*"/255 used"* && $out == *"OK    memlock"*"memlock=$MEMLOCK:$MEMLOCK is accepted"* ]]'
	if [[ $engine == current ]]; then
		expect "doctor sees the engine's CDI directory" '[[ $out == *"OK    CDI"*"$cdi"* ]]'
	else
		expect "doctor says the engine has no CDI and --device is used" '[[ $out == *"INFO  CDI"*"does not resolve CDI devices"* ]]'
	fi
	run_cmd docker rdma doctor --sysfs-root "$e/fs" --format json
	expect "doctor --format json" '[[ $out == *"\"checks\": ["* && $out == *"\"sysfs_root\": \"$e/fs\""* ]]'
	if ((unlimited_refused != 0)); then
		run_cmd docker rdma doctor --sysfs-root "$e/fs" --image "$IMAGE"
		expect "doctor fails (status 1) when the engine refuses memlock=unlimited" '((rc == 1)) && [[ $out == *"FAIL  memlock"*"refuses memlock=-1:-1"* ]]'
	fi
	"$work/bin/fakesysfs" netns-mode -root "$e/fs" -mode exclusive
	run_cmd docker rdma doctor --sysfs-root "$e/fs"
	expect "doctor fails (status 1) in exclusive netns mode and says how to fix it" '((rc == 1)) && [[ $out == *"FAIL  netns mode"* && $out == *"fix: switch to shared"* ]]'
	"$work/bin/fakesysfs" netns-mode -root "$e/fs" -mode shared
	mkdir -p "$e/fs/etc/modprobe.d"
	echo 'options ib_core netns_mode=0' >"$e/fs/etc/modprobe.d/ib_core.conf"
	run_cmd docker rdma doctor --sysfs-root "$e/fs"
	expect "doctor warns when the host runs shared but boots exclusive, naming the file" \
		'[[ $out == *"WARN  netns mode at boot"*"the next boot starts exclusive (set by: /etc/modprobe.d/ib_core.conf:1)"* && $out == *"options ib_core netns_mode=1"* ]]'
	rm -r "$e/fs/etc/modprobe.d"
}

# user_checks: ls, run and inspect as a user in the docker group, who cannot reach the plugin
# socket. Runs inside e2e.
user_checks() {
	# As a user in the docker group, who cannot reach the plugin socket (/run/docker is 0700).
	gid=$(getent group docker | cut -d: -f3) || gid=""
	if [[ -n $gid && $(stat -c %g "$ddir/docker.sock") == "$gid" ]]; then
		# shellcheck disable=SC2317 # run through run_cmd
		as_user() { setpriv --reuid=65534 --regid=65534 --groups="$gid" -- env HOME=/nonexistent PATH="$PATH" DOCKER_HOST="$DOCKER_HOST" DOCKER_CONFIG="$DOCKER_CONFIG" "$@"; }
		run_cmd as_user docker rdma ls
		expect "non-root ls: from sysfs, and says the socket cannot be read" \
			'((rc == 0)) && grep -Eq "^$net +rdma-macvlan:latest +$parent +mlx5_0 +1 +ACTIVE" <<<"$out" && [[ $out == *"cannot read the daemon'"'"'s socket"*"as uid 65534"* ]]'
		run_cmd as_user docker rdma run --no-wait --dry-run --memlock $MEMLOCK --net "$net" "$IMAGE" true
		expect "non-root run: the same docker command" '((rc == 0)) && [[ $out == "docker run --runtime rdma-macvlan -e RDMA_MACVLAN_NO_WAIT=1 --ulimit memlock=$MEMLOCK:$MEMLOCK --net $net $IMAGE true" ]]'
		run_cmd as_user docker rdma run --no-wait --rm --memlock $MEMLOCK --net "$net" "$IMAGE" ls /dev/infiniband
		expect "non-root run: the container sees uverbs0 and rdma_cm" '((rc == 0)) && [[ $(tr "\n" " " <<<"$out") == "rdma_cm uverbs0 " ]]'
		run_cmd as_user docker rdma inspect "$net-c1"
		expect "non-root inspect finds the GID index in sysfs" '((rc == 0)) && [[ $out == *"NCCL_IB_GID_INDEX=$v2"* && $out == *"readiness not known without the daemon"* ]]'
	else
		skip "no docker group owning the engine's socket: unprivileged checks not run"
	fi
}

# samples: the sample outputs of docs/runtime.md (sample in test/e2e/lib/e2e.sh): a network roce
# and two containers on it, as the docs show them, on a GID table emptied of what the checks before
# left; the current engine only (its output is the docs'). The test's names, paths, ids and host
# become the docs' (the defaults of an install for the paths). Runs inside e2e (its locals: e, cdi).
samples() {
	local ip n ready script
	for ((n = 2; n < 255; n++)); do
		"$work/bin/fakesysfs" clear-gid -root "$e/fs" -hca mlx5_0 -index $n 2>/dev/null || true
	done
	run_cmd docker network create -d rdma-macvlan:latest --subnet 192.168.7.0/24 -o parent="$parent" roce
	expect "samples: network roce" '((rc == 0))'
	for n in 0 1; do
		ip=192.168.7.$((n + 2))
		run_cmd docker rdma run --no-wait -d --name train-$n --ip "$ip" --memlock $MEMLOCK --net roce "$IMAGE" sleep 600
		expect "samples: train-$n on roce" '((rc == 0))'
		"$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$ip" -ndev eth0 >/dev/null
	done
	for ((n = 0; n < 100; n++)); do
		run_cmd docker rdma inspect roce
		ready=$(grep -c ' ready$' <<<"$out" || true)
		((ready == 2)) && break
		sleep 0.1
	done
	script="s/$parent/ens2f0np0/g; s/rmvc${id}x/ens2f1np1/g; s#$e/state#/var/lib/rdma-macvlan#g; s#$cdi#/etc/cdi#g"
	script+="; s#$e/fs#/srv/fake#g; s#$IMAGE#IMAGE#g; s/e2e-$id/0.3.0/g"
	script+="; s/^(container train-0) \([0-9a-f]{12}\)/\1 (5b1e0c2d9a47)/; s/^(network roce) \([0-9a-f]{12}\)/\1 (8d3f61a2c0b9)/"
	script+="; s/\(id [0-9a-f]{12}\)/(id 7c2a94e1f3d0)/; s#plugins/[0-9a-f]{64}/#plugins/7c2a94e1f3d05b8e5b8e5b8e5b8e5b8e5b8e5b8e5b8e5b8e5b8e5b8e5b8e5b8e/#"
	script+="; s/host link rmv[0-9a-f]{12}/host link rmv5e0a77c1b2d4/; s/MAC ([0-9a-f]{2}:){5}[0-9a-f]{2}/MAC 5e:0a:77:c1:b2:d4/"
	script+="; s/^(OK +docker +Docker [^ ]+) on [^,]+, kernel .*/\1 on HOST, kernel KERNEL/"
	sample ls "$script" docker rdma ls
	sample inspect "$script" docker rdma inspect train-0
	sample doctor "$script" docker rdma doctor --sysfs-root "$e/fs" --image "$IMAGE" --memlock 8M
	run_cmd docker rm -f train-0 train-1
	run_cmd docker network rm roce
	expect "samples: network roce removed" '((rc == 0))'
	for n in 2 3; do
		"$work/bin/fakesysfs" del-ip -root "$e/fs" -hca mlx5_0 -ip "192.168.7.$n" >/dev/null 2>&1
	done
}

# qos_checks: a network with -o traffic_class=106 -o service_level=3 (the README's block, run
# as written but for names, subnet, address and the test's fake sysfs): its workloads get the four
# variables, the user's -e wins, plain docker run with the CDI device gets the device's own
# variables only, and a container on two networks with different classes is refused (120).
# Runs inside e2e (its locals: engine, e, cdi, fake, sub, flags).
qos_checks() {
	local qnet=$net-qos qnet2=$net-qos2 qip=10.78.$sub.11 block t2=$SECONDS
	"$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$qip" -ndev eth0 >/dev/null
	block=$(readme_block lossless-network)
	[[ $block == *"-o traffic_class=106 -o service_level=3 roce"* && $block == *"docker rdma run --rm --net roce IMAGE "* ]] ||
		die "README's e2e:lossless-network block is not the network create and docker rdma run it was: $block"
	block=$(sed -e "s#192\.168\.7\.0/24#10.78.$sub.0/24#; s#parent=ens2f0#parent=$parent#; s#service_level=3 roce\$#service_level=3 $qnet#" \
		-e "s#docker rdma run #docker rdma run --ip $qip ${fake[*]} --memlock $MEMLOCK #; s#--net roce IMAGE #--net $qnet $IMAGE #" <<<"$block")
	run_cmd bash -euo pipefail -c "$block"
	expect "qos: the README's block: a workload on a traffic_class=106 service_level=3 network gets NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS, NCCL_IB_SL, UCX_IB_SL" \
		'((rc == 0)) && [[ $(tail -n1 <<<"$out") == "TC 106/106 SL 3/3" ]]'
	run_cmd docker rdma run --rm --ip "$qip" "${fake[@]}" -e NCCL_IB_TC=96 --memlock $MEMLOCK --net "$qnet" "$IMAGE" \
		sh -c 'echo "TC $NCCL_IB_TC/$UCX_IB_TRAFFIC_CLASS SL $NCCL_IB_SL/$UCX_IB_SL"'
	expect "qos: -e NCCL_IB_TC=96 wins, and rdma-exec says it differs" \
		'((rc == 0)) && [[ $out == "TC 96/106 SL 3/3" && $err == *"keeping NCCL_IB_TC=96 from the environment"*"106"* ]]'
	run_cmd docker rdma ls
	expect "qos: ls shows tc=106,sl=3" '((rc == 0)) && grep -Eq "^$qnet +.* tc=106,sl=3 +$flags\$" <<<"$out"'
	run_cmd docker rdma inspect "$qnet"
	expect "qos: inspect NETWORK shows the traffic class and service level" '((rc == 0)) && [[ $out == *"QoS        traffic class 106 (DSCP 26), service level 3"* ]]'
	if [[ $engine == current ]]; then
		run_cmd docker run --rm --device rdma-macvlan/hca=mlx5_0 -e NCCL_IB_TC=96 --net "$qnet" "$IMAGE" env
		expect "qos: plain docker run with the CDI device gets the device's RDMA_MACVLAN_TRAFFIC_CLASS/SERVICE_LEVEL, no UCX/NCCL QoS of its own, and keeps -e" \
			'((rc == 0)) && grep -qx RDMA_MACVLAN_TRAFFIC_CLASS_mlx5_0=106 <<<"$out" && grep -qx RDMA_MACVLAN_SERVICE_LEVEL_mlx5_0=3 <<<"$out" && grep -qx NCCL_IB_TC=96 <<<"$out" && ! grep -Eq "^(UCX_IB_TRAFFIC_CLASS|NCCL_IB_SL|UCX_IB_SL)=" <<<"$out"'
	fi
	run_cmd docker network create -d rdma-macvlan:latest --subnet "10.77.$sub.0/24" -o parent="$parent" -o traffic_class=96 "$qnet2"
	expect "qos: a second network on the port with traffic_class=96" '((rc == 0))'
	if [[ $engine == current ]]; then
		expect "qos: the port's CDI device now carries neither (its networks differ: traffic class 106 and 96, service level 3 and none)" \
			'[[ -s $cdi/rdma-macvlan-mlx5_0.json ]] && ! grep -q RDMA_MACVLAN_TRAFFIC_CLASS "$cdi/rdma-macvlan-mlx5_0.json" && ! grep -q RDMA_MACVLAN_SERVICE_LEVEL "$cdi/rdma-macvlan-mlx5_0.json"'
	fi
	run_cmd docker rdma run --rm "${fake[@]}" --memlock $MEMLOCK --net "$qnet" --net "$qnet2" "$IMAGE" echo started
	expect "qos: a container on networks with traffic classes 106 and 96: status 120, not started, the networks named" \
		'((rc == 120)) && [[ $out != *started* && $err == *"traffic_class differs per network ($qnet 106, $qnet2 96)"* && $err == *"The workload was not started"* ]]'
	run_cmd docker network rm "$qnet" "$qnet2"
	expect "qos: networks removed" '((rc == 0))'
	timings+=("$engine: qos checks took $((SECONDS - t2)) s")
}

e2e_preflight setpriv:util-linux
select_engines "$@"
new_id rmvc
parent=rmvc${id}p
peer=rmvc${id}q
net=rmvcli-$id
ORIG_PATH=$PATH
# What every engine shares: docker-rdma, rdma-macvlan-runtime with rdma-exec beside it, fakesysfs
# and the plugin's rootfs.
BUILD_VERSION=e2e-$id suite_start cli docker-rdma rdma-exec rdma-macvlan-runtime fakesysfs rdma-macvlan tcpunix
chmod 0755 "$work" # the unprivileged checks read the tree and run the plugin from here
make_plugin_dir "$work/plugin" 2>/dev/null
say "built docker-rdma, rdma-macvlan-runtime, rdma-exec ($(stat -c %s "$work/bin/rdma-exec") bytes), fakesysfs and the plugin"
run_engines e2e
