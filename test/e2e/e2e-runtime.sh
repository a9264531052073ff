#!/usr/bin/env bash
# e2e-runtime.sh: rdma-macvlan-runtime (cmd/rdma-macvlan-runtime) on private engines: plain
# `docker run`, plain `docker compose up` and the engine's own restarts make containers on
# rdma-macvlan networks RDMA-ready, and leave every other container's spec as it was.
#
# For each engine (Debian's 20.10, Docker 28.5.2, the current moby): two veth pairs as RoCE
# parents with a fake mlx5 HCA each (test/fakesysfs: mlx5_0 with uverbs0, mlx5_1 with uverbs1),
# fake device nodes (test/e2e/lib/fakedev.sh), the managed plugin on the fake tree, two networks
# (ra on mlx5_0, rb on mlx5_1), the runtime registered with `docker rdma runtime install` in the
# engine's daemon.json and dockerd reloaded with SIGHUP. The engine runs with
# --default-ulimit memlock=8 MiB: this machine refuses any higher limit, so the runtime's own
# unlimited memlock is checked in the Soft-RoCE VM and by the unit tests. The checks:
#   - install: daemon.json gets runtimes.rdma-macvlan (with the engine's socket and the plugin's
#     CDI directory as runtimeArgs), SIGHUP loads it, uninstall gives the file back byte for byte;
#   - plain docker run --runtime rdma-macvlan on one network: exactly its HCA's nodes, CAP_IPC_LOCK,
#     the engine's memlock kept, and the workload started by rdma-exec with its GID index;
#   - two networks (docker create + network connect before Docker 25): both HCAs' nodes and rails;
#   - the spec as it reaches runc is byte for byte the engine's for a container on a user bridge,
#     on --net none and with RDMA_MACVLAN_DEVICES=none (a wrapper before and after the runtime
#     saves config.json; the RDMA container's differs, the control);
#   - a user's --ulimit memlock kept; an invalid RDMA_MACVLAN_DEVICES refused with the runtime's
#     message in docker run's output;
#   - docker exec, docker restart (rdma-exec runs again), a restart policy across a dockerd
#     restart, and with --live-restore a container that keeps running across one and is removed;
#   - the plugin disabled: a container on no rdma-macvlan network still starts;
#   - --default: plain docker run and a user's compose file with plain `docker compose up`
#     (Compose v2) get the same without naming the runtime.
# Traffic only between the containers it starts (none here: nothing is sent).
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines and builds compose), iproute2, jq.
# Leaves behind: nothing, also when a check or a step fails (links, engines, nodes, files).
#
# Usage: e2e-runtime.sh [debian] [v28] [current]   (default: those that scripts/engines.sh built)
# Output: "ok - ..." or "not ok - ..." per check, then "N passed, N failed"; exit 1 when any failed.
# shellcheck disable=SC2016
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"
# shellcheck source=test/e2e/lib/fakedev.sh
source "$here/lib/fakedev.sh"
ORIG_PATH=$PATH
MEMLOCK=8388608

work=""
teardown_hook() { fake_dev_remove; }
e2e_traps

# saver NAME SUFFIX NEXT...: a runtime wrapper that saves the config.json of a create or run as
# $e/specs/ID.SUFFIX and execs NEXT with its arguments.
saver() {
	cat >"$e/$1" <<EOF
#!/bin/sh
b="" prev=""
for a in "\$@"; do [ "\$prev" = --bundle ] && b=\$a; prev=\$a; done
[ -n "\$b" ] && cp "\$b/config.json" "$e/specs/\$(basename "\$b").$2"
exec ${*:3} "\$@"
EOF
	chmod 0755 "$e/$1"
}

# spec_kept NAME: the container's config.json reached runc as the engine wrote it.
spec_kept() {
	local id
	id=$(dk inspect -f '{{.Id}}' "$1")
	cmp "$e/specs/$id.before" "$e/specs/$id.after" || { diff <(jq -S . "$e/specs/$id.before") <(jq -S . "$e/specs/$id.after") | head -n 20; return 1; }
}

# hup RUNTIME... DEFAULT: dockerd reloads daemon.json; waits until it lists each RUNTIME and
# DEFAULT is its default runtime.
hup() {
	kill -HUP "$(cat "$ddir/dockerd.spawned")"
	poll 20 bash -c 'got=" $(docker info -f "{{range \$k, \$v := .Runtimes}}{{\$k}} {{end}}")"; [[ $(docker info -f "{{.DefaultRuntime}}") == "${!#}" ]] || exit 1; for r in "${@:1:$#-1}"; do [[ $got == *" $r "* ]] || exit 1; done' - "$@"
}

# logs_of NAME: the container's output once it has exited.
logs_of() { poll 30 bash -c '[[ $(docker inspect -f "{{.State.Running}}" "$0") == false ]]' "$1" >/dev/null; docker logs "$1" 2>&1; }

# RDMA_PROBE: what a test container prints: its device nodes, whether it holds CAP_IPC_LOCK, its
# memlock limit and what rdma-exec gave it.
RDMA_PROBE='echo "dev=$(ls /dev/infiniband 2>/dev/null | tr "\n" " ")"; c=$(sed -n "s/^CapEff:\t//p" /proc/self/status); echo "ipc_lock=$(( (0x$c >> 14) & 1 ))"; echo "memlock=$(sed -n "s/^Max locked memory *\([^ ]*\) *\([^ ]*\).*/\1:\2/p" /proc/self/limits)"; echo "gid=${NCCL_IB_GID_INDEX-} hca=${NCCL_IB_HCA-} args=$0"'

e2e() {
	local engine=$1 cli t0=$SECONDS sub ipa ipb nra nrb before stopped
	local pa pb fake pid block quick ip0 ip1 nr0 nr1 probe
	stopped=0
	runtime_setup; ((!stopped)) || return 0
	one_network_checks
	two_network_checks
	spec_checks
	lifecycle_checks
	default_runtime_checks
	example_checks
	# Uninstall: the file as it was (the check runtime and live-restore taken out by hand first).
	run_cmd jq -c 'del(.runtimes.rtcheck) | del(."live-restore")' "$ddir/daemon.json"
	printf '%s\n' "$out" >"$ddir/daemon.json"
	run_cmd docker rdma runtime uninstall --config-file "$ddir/daemon.json"
	expect "runtime uninstall: daemon.json as before install" '((rc == 0)) && [[ $(jq -S . "$ddir/daemon.json") == $(jq -S . <<<"$before") ]]'
	((rc == 0)) || detail "$(ls -la "$ddir")" "$(cat "$ddir/daemon.json")"
	timings+=("$engine: $((SECONDS - t0)) s")
}

# runtime_setup: two veth parents with their fake HCAs, the engine, the plugin, the networks ra, rb
# and brnet, the runtime installed, and a check runtime that saves the specs before and after
# ours; sets stopped when a step failed (it says which). Runs inside e2e.
runtime_setup() {
	case $engine in
	debian) cli=/usr/bin/docker ;;
	*) cli=/usr/local/bin/docker ;;
	esac
	tag=$engine
	new_id rmvr
	rdir=$(mktemp -d "/tmp/rmv-runtime-$engine.XXXXXX")
	e=$rdir
	pa=rmvr${id}a pb=rmvr${id}b
	mkdir -p "$e/bin" "$e/config/cli-plugins" "$e/state" "$e/cdi" "$e/specs"
	ln -s "$cli" "$e/bin/docker"
	install -m 0755 "$work/bin/docker-rdma" "$e/config/cli-plugins/docker-rdma"
	ln -s "$(bash "$scripts/engines.sh" compose)" "$e/config/cli-plugins/docker-compose"
	export PATH=$e/bin:$ORIG_PATH DOCKER_CONFIG=$e/config

	veth_parent "$pa" "${pa}p"
	veth_parent "$pb" "${pb}p"
	fake_hca "$e/fs" mlx5_0 "$pa"
	fake_hca "$e/fs" mlx5_1 "$pb" -uverbs 1 -pci 0000:04:00.0
	if ! fake_dev_nodes "$e/fs" || ! fake_dev_uverbs 2; then
		fail "fake device nodes: /dev/infiniband could not be made, or exists with other numbers"
		stopped=1; return 0
	fi
	if ! engine_up "$e/d" "$engine" -- --default-ulimit memlock=$MEMLOCK:$MEMLOCK 2>"$e/dockerd.err"; then
		fail "private dockerd starts" "$(cat "$e/dockerd.err")"
		stopped=1; return 0
	fi
	plugin_up "$work/plugin" "$e/state" "$e/cdi" "$e/fs/sys" 2>/dev/null
	sub=$((RANDOM % 250 + 1))
	dk network create -d "$PLUGIN" --subnet "10.81.$sub.0/24" -o parent="$pa" ra >/dev/null
	dk network create -d "$PLUGIN" --subnet "10.82.$sub.0/24" -o parent="$pb" rb >/dev/null
	dk network create brnet >/dev/null
	say "set up in $((SECONDS - t0)) s"
	fake=(-v "$e/fs:/rdma-fake:ro" -e RDMA_EXEC_SYSFS_ROOT=/rdma-fake -e RDMA_MACVLAN_GID_TIMEOUT=20s)

	# Install: the runtime next to its rdma-exec, as make install-cli puts them.
	# shellcheck disable=SC2034 # read by a check's expression
	before=$(cat "$ddir/daemon.json")
	run_cmd docker rdma runtime install --config-file "$ddir/daemon.json" --path "$work/bin/rdma-macvlan-runtime"
	expect "runtime install: adds runtimes.rdma-macvlan with the engine's socket and the plugin's CDI dir, and says how to apply it" \
		'((rc == 0)) && [[ $out$err == *SIGHUP* ]] && [[ $(jq -c ".runtimes[\"rdma-macvlan\"]" "$ddir/daemon.json") == *"\"path\":\"$work/bin/rdma-macvlan-runtime\""*"unix://$ddir/docker.sock"*"$e/cdi"* ]]'
	run_cmd hup rdma-macvlan runc runc
	expect "SIGHUP: dockerd lists the runtime (default runc)" '((rc == 0))'
	run_cmd jq -c --arg p "$e/rt-before" '.runtimes.rtcheck = {path: $p}' "$ddir/daemon.json"
	printf '%s\n' "$out" >"$ddir/daemon.json"
	saver rt-before before "$work/bin/rdma-macvlan-runtime" --docker-host "unix://$ddir/docker.sock" --cdi-dir "$e/cdi" --next-runtime "$e/rt-after"
	saver rt-after after runc
	hup rdma-macvlan rtcheck runc >/dev/null || fail "SIGHUP: dockerd lists the check runtime"
}

# one_network_checks: a container on one network gets its HCA only, and rdma-exec with the GID
# index; runc as the control. Runs inside e2e.
one_network_checks() {
	# One network: its HCA only, rdma-exec with the GID index.
	ipa=10.81.$sub.11
	nra=$("$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$ipa" -ndev eth0)
	nra=${nra##* }
	run_cmd dk run --rm --runtime rdma-macvlan --net ra --ip "$ipa" "${fake[@]}" "$IMAGE" sh -c "$RDMA_PROBE" probe-arg
	expect "docker run --runtime rdma-macvlan --net ra: mlx5_0's nodes only, CAP_IPC_LOCK, the engine's memlock, GID index $nra from rdma-exec, the command's arguments" \
		'((rc == 0)) && [[ $out == *"dev=rdma_cm uverbs0 "* && $out == *"ipc_lock=1"* && $out == *"memlock=$MEMLOCK:$MEMLOCK"* && $out == *"gid=$nra hca==mlx5_0:1 args=probe-arg"* ]]'
	run_cmd dk run --rm --runtime runc --net ra --ip "$ipa" "$IMAGE" sh -c "$RDMA_PROBE"
	expect "the same with runc: no node, no CAP_IPC_LOCK, no GID index (the control)" \
		'((rc == 0)) && [[ $out == *"dev= "* || $out == *"dev="$'"'\n'"'* ]] && [[ $out == *"ipc_lock=0"* && $out == *"gid= hca="* ]]'
}

# two_network_checks: a container on both networks gets both HCAs and both rails. Runs inside
# e2e.
two_network_checks() {
	# Two networks.
	ipb=10.82.$sub.11
	nrb=$("$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_1 -ip "$ipb" -ndev eth1)
	nrb=${nrb##* }
	# The fake entries name eth0 and eth1: the engine must give the interfaces those names. With
	# several --net flags, 28 and later number them in no fixed order (ra was eth1 in one CI run),
	# so each endpoint asks for its name; older engines take one network at run, the other at
	# connect, in that order. Docker 28.5.2 gave ra eth1 once more in a later CI run, asked name
	# and all: on 28 and later the fake kernel also has each address on the other name, as the
	# real one would have it on whichever interface holds it.
	if engine_since "$engine" 28; then
		"$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$ipa" -ndev eth1 >/dev/null
		"$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_1 -ip "$ipb" -ndev eth0 >/dev/null
		run_cmd dk run --rm --runtime rdma-macvlan --net name=ra,ip="$ipa",driver-opt=com.docker.network.endpoint.ifname=eth0 \
			--net name=rb,ip="$ipb",driver-opt=com.docker.network.endpoint.ifname=eth1 "${fake[@]}" "$IMAGE" sh -c "$RDMA_PROBE"
	else
		dk create --name two --runtime rdma-macvlan --net ra --ip "$ipa" "${fake[@]}" "$IMAGE" sh -c "$RDMA_PROBE" >/dev/null
		dk network connect --ip "$ipb" rb two
		run_cmd dk start -a two
		dk rm two >/dev/null
	fi
	expect "two rdma-macvlan networks: both HCAs' nodes and both rails" \
		'((rc == 0)) && [[ $out == *"dev=rdma_cm uverbs0 uverbs1 "* && $out == *"hca==mlx5_0:1,mlx5_1:1"* ]]'
}

# spec_checks: specs the runtime must not touch, RDMA_MACVLAN_DEVICES, the user's own memlock, a
# bad variable. Runs inside e2e.
spec_checks() {
	# Specs the runtime must not touch, and the control.
	dk run --name s-bridge --runtime rtcheck --net brnet "$IMAGE" true >/dev/null
	run_cmd spec_kept s-bridge
	expect "a container on a user bridge reaches runc with the engine's config.json, byte for byte" '((rc == 0))'
	dk run --name s-none --runtime rtcheck --net none "$IMAGE" true >/dev/null
	run_cmd spec_kept s-none
	expect "a container on --net none: config.json unchanged" '((rc == 0))'
	dk run --name s-off --runtime rtcheck --net ra -e RDMA_MACVLAN_DEVICES=none "$IMAGE" true >/dev/null
	run_cmd spec_kept s-off
	expect "RDMA_MACVLAN_DEVICES=none on ra: config.json unchanged" '((rc == 0))'
	dk run --name s-rdma --runtime rtcheck --net ra -e RDMA_MACVLAN_NO_WAIT=1 "$IMAGE" true >/dev/null
	run_cmd spec_kept s-rdma
	expect "a container on ra through the same wrappers: config.json edited (the control)" '((rc != 0))'
	dk rm s-bridge s-none s-off s-rdma >/dev/null

	# The user's own memlock; a bad variable.
	run_cmd dk run --rm --runtime rdma-macvlan --net ra --ulimit memlock=4194304:$MEMLOCK -e RDMA_MACVLAN_NO_WAIT=1 "$IMAGE" sh -c "$RDMA_PROBE"
	expect "--ulimit memlock=4194304:$MEMLOCK is kept, RDMA_MACVLAN_NO_WAIT=1 starts without rdma-exec" \
		'((rc == 0)) && [[ $out == *"memlock=4194304:$MEMLOCK"* && $out == *"dev=rdma_cm uverbs0 "* && $out == *"gid= hca="* ]]'
	run_cmd dk run --rm --runtime rdma-macvlan --net ra -e RDMA_MACVLAN_DEVICES=mlx5_9 "$IMAGE" true
	expect "RDMA_MACVLAN_DEVICES=mlx5_9: docker run fails with the runtime's reason" \
		'((rc != 0)) && [[ $err == *"RDMA_MACVLAN_DEVICES names \"mlx5_9\", which no rdma-macvlan network serves (served: mlx5_0, mlx5_1)"* ]]'
	run_cmd dk run --rm --runtime rdma-macvlan --net none -e RDMA_MACVLAN_DEVICES=mlx5_1 -e RDMA_MACVLAN_NO_WAIT=1 "$IMAGE" sh -c "$RDMA_PROBE"
	expect "--net none with RDMA_MACVLAN_DEVICES=mlx5_1: that HCA's nodes" '((rc == 0)) && [[ $out == *"dev=rdma_cm uverbs1 "* ]]'
}

# lifecycle_checks: exec, restart, a restart policy across a dockerd restart, the plugin
# disabled. Runs inside e2e.
lifecycle_checks() {
	# exec, restart, a restart policy across a dockerd restart.
	dk run -d --name live --restart always --runtime rdma-macvlan --net ra --ip "$ipa" "${fake[@]}" "$IMAGE" \
		sh -c 'echo "gid=$NCCL_IB_GID_INDEX"; trap "exit 0" TERM; sleep 3600 & wait' >/dev/null
	run_cmd poll 30 bash -c '[[ $(docker logs live 2>&1) == *gid=* ]]'
	run_cmd dk exec live sh -c 'ls /dev/infiniband | tr "\n" " "; c=$(sed -n "s/^CapEff:\t//p" /proc/self/status); echo "ipc_lock=$(( (0x$c >> 14) & 1 ))"; tr "\0" "\n" </proc/1/environ | grep "^NCCL_IB_GID_INDEX="'
	expect "docker exec into it: its nodes, CAP_IPC_LOCK as the workload holds it, and so the workload's environment readable (NCCL_IB_GID_INDEX=$nra)" \
		'((rc == 0)) && [[ $out == "rdma_cm uverbs0 ipc_lock=1"*"NCCL_IB_GID_INDEX=$nra" ]]'
	dk restart -t 3 live >/dev/null
	run_cmd poll 30 bash -c '(( $(docker logs live 2>&1 | grep -c "^gid=$0$") == 2 ))' "$nra"
	expect "docker restart: rdma-exec runs again and gives the same index" '((rc == 0))'
	if restart_dockerd "$ddir"; then
		run_cmd poll 60 bash -c '[[ $(docker exec live ls /dev/infiniband 2>&1 | tr "\n" " ") == "rdma_cm uverbs0 " ]]'
		expect "a dockerd restart (no live-restore): the restart policy brings it back RDMA-ready" '((rc == 0))'
		((rc == 0)) || detail "$(grep -v 'IPv4 forwarding' "$ddir/dockerd.log" | tail -n 40)"
	else
		fail "dockerd restarts"
	fi
	run_cmd jq -c '."live-restore" = true' "$ddir/daemon.json"
	printf '%s\n' "$out" >"$ddir/daemon.json"
	kill -HUP "$(cat "$ddir/dockerd.spawned")"
	pid=$(cpid live)
	if poll 20 bash -c '[[ $(docker info -f "{{.LiveRestoreEnabled}}") == true ]]' && restart_dockerd "$ddir"; then
		run_cmd dk exec live sh -c 'ls /dev/infiniband | tr "\n" " "'
		expect "--live-restore: the container kept running across a dockerd restart (same pid) and docker exec works" \
			'((rc == 0)) && [[ $out == "rdma_cm uverbs0 " && $(cpid live) == "$pid" ]]'
	else
		fail "live-restore on and a dockerd restart"
	fi
	run_cmd dk rm -f live
	expect "docker rm -f of it (delete through the runtime)" '((rc == 0))'

	# The plugin disabled: other containers still start through the runtime.
	dk plugin disable -f "$PLUGIN" >/dev/null
	run_cmd dk run --rm --runtime rdma-macvlan --net brnet "$IMAGE" true
	expect "the plugin disabled: a container on a user bridge starts through the runtime" '((rc == 0))'
	dk plugin enable "$PLUGIN" >/dev/null
}

# default_runtime_checks: the README's runtime-install block (--default), then plain docker
# run and plain docker compose up. Runs inside e2e.
default_runtime_checks() {
	# --default: the README's block as written but for the engine's config file, the runtime's
	# path and the dockerd to signal; then plain docker run and plain docker compose up.
	block=$(readme_block runtime-install)
	[[ $block == *"docker rdma runtime install --default"* && $block == *'kill -HUP "$(pidof dockerd)"'* ]] ||
		die "README's e2e:runtime-install block is not docker rdma runtime install --default and a SIGHUP: $block"
	block=${block//sudo /}
	block=${block//docker rdma runtime install --default/docker rdma runtime install --default --config-file $ddir/daemon.json --path $work/bin/rdma-macvlan-runtime}
	block=${block//'"$(pidof dockerd)"'/$(cat "$ddir/dockerd.spawned")}
	run_cmd bash -euo pipefail -c "$block"
	expect "the README's runtime install block: --default set" '((rc == 0)) && [[ $(jq -r ".\"default-runtime\"" "$ddir/daemon.json") == rdma-macvlan ]]'
	run_cmd hup rdma-macvlan rtcheck rdma-macvlan
	expect "after its SIGHUP rdma-macvlan is the default runtime" '((rc == 0))'
	quick=$(readme_block quickstart-run)
	[[ $quick == "docker run --rm --net roce IMAGE "* ]] || die "README's quick start run line is not docker run --rm --net roce IMAGE ...: $quick"
	quick=${quick//--net roce IMAGE /--net ra --ip $ipa ${fake[*]} $IMAGE }
	run_cmd bash -euo pipefail -c "$quick"
	expect "the README's quick start: plain docker run prints the container's GID index ($nra) and HCA" \
		'((rc == 0)) && [[ $out == "GID index $nra on =mlx5_0:1" ]]'
	run_cmd dk run --rm --net ra --ip "$ipa" "${fake[@]}" "$IMAGE" sh -c "$RDMA_PROBE"
	expect "--default: plain docker run --net ra is RDMA-ready" '((rc == 0)) && [[ $out == *"dev=rdma_cm uverbs0 "* && $out == *"gid=$nra hca==mlx5_0:1"* ]]'
	run_cmd dk run --rm --net none "$IMAGE" sh -c "$RDMA_PROBE"
	expect "--default: plain docker run --net none is untouched" '((rc == 0)) && [[ $out == *"ipc_lock=0"* && $out != *uverbs* ]]'
	mkdir -p "$e/proj"
	cat >"$e/proj/compose.yaml" <<EOF
services:
  worker:
    image: $IMAGE
    command: ["sh", "-c", $(jq -Rn --arg s "${RDMA_PROBE//\$/\$\$}" '$s')]
    environment:
      RDMA_EXEC_SYSFS_ROOT: /rdma-fake
    volumes:
      - $e/fs:/rdma-fake:ro
    networks:
      ra:
        ipv4_address: $ipa
networks:
  ra:
    external: true
EOF
	run_cmd docker compose -f "$e/proj/compose.yaml" -p "rt$id" up --abort-on-container-exit
	expect "--default: a user's compose file with plain docker compose up is RDMA-ready" \
		'((rc == 0)) && [[ $out == *"dev=rdma_cm uverbs0 "* && $out == *"gid=$nra hca==mlx5_0:1"* ]]'
	docker compose -f "$e/proj/compose.yaml" -p "rt$id" down >/dev/null 2>&1 || true
}

# example_checks: examples/compose.yaml as written, with the test's override. Runs inside e2e.
example_checks() {
	# examples/compose.yaml as written, with an override of the test's own: this image, a probe
	# and a ping of rank0 by name for the command, the fake tree, addresses the fake kernel has
	# entries for, and the network ra for roce.
	ip0=10.81.$sub.21 ip1=10.81.$sub.22
	nr0=$("$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$ip0" -ndev eth0)
	nr1=$("$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$ip1" -ndev eth0)
	nr0=${nr0##* } nr1=${nr1##* }
	probe=${RDMA_PROBE//\$/\$\$}
	cat >"$e/proj/example-test.yaml" <<EOF
services:
  rank0:
    command: ["sh", "-c", $(jq -Rn --arg s "$probe; sleep 20" '$s')]
    environment: {RDMA_EXEC_SYSFS_ROOT: /rdma-fake}
    volumes: ["$e/fs:/rdma-fake:ro"]
    networks: {roce: {ipv4_address: $ip0}}
  rank1:
    command: ["sh", "-c", $(jq -Rn --arg s "$probe; ping -c 1 -W 5 rank0 >/dev/null && echo rank0 answers" '$s')]
    environment: {RDMA_EXEC_SYSFS_ROOT: /rdma-fake}
    volumes: ["$e/fs:/rdma-fake:ro"]
    networks: {roce: {ipv4_address: $ip1}}
networks:
  roce: {name: ra}
EOF
	run_cmd env IMAGE="$IMAGE" docker compose -f "$repo/examples/compose.yaml" -f "$e/proj/example-test.yaml" -p "ex$id" \
		up --abort-on-container-exit --exit-code-from rank1
	expect "examples/compose.yaml: both ranks RDMA-ready with their own GID index ($nr0, $nr1), rank 1 reaches rank0 by name" \
		'((rc == 0)) && [[ $out == *"gid=$nr0 hca==mlx5_0:1"* && $out == *"gid=$nr1 hca==mlx5_0:1"* && $out == *"rank0 answers"* ]]'
	IMAGE=$IMAGE docker compose -f "$repo/examples/compose.yaml" -f "$e/proj/example-test.yaml" -p "ex$id" down >/dev/null 2>&1 || true
}

select_engines --middle "$@"
e2e_preflight jq:apt-get\ install\ jq
suite_start runtime rdma-macvlan docker-rdma rdma-exec rdma-macvlan-runtime fakesysfs
bash "$scripts/engines.sh" install compose
make_plugin_dir "$work/plugin" >/dev/null
run_engines e2e
