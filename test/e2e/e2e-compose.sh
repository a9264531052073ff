#!/usr/bin/env bash
# e2e-compose.sh: `docker rdma compose` with Compose v2 (the docker CLI plugin, built from its Go
# module by scripts/engines.sh install compose, version pinned there) on private engines.
#
# For each engine (debian: Docker 20.10 and its CLI, device nodes; current: moby v2 with the newer
# CLI and CDI specs read from a private directory): two veth pairs as RoCE parents, a fake sysfs
# tree (test/fakesysfs) with mlx5_0 and mlx5_1 on them, fake device nodes, the managed plugin on
# the tree; docker-rdma and docker-compose in a private CLI plugins dir (DOCKER_CONFIG). A stack
# whose two networks compose creates (driver rdma-macvlan:latest, driver_opts.parent): w1 and w2 on
# one network (w2 with `user:` and its own `entrypoint:`), multi on both, bare (an image without a
# shell) and plain (no rdma-macvlan network). Then:
#   - before the runtime is installed, `docker rdma compose up` is refused (125), nothing created;
#     then rdma-macvlan-runtime (rdma-exec beside it) is registered with `docker rdma runtime
#     install` and SIGHUP;
#   - the README's blocks: `docker rdma compose --print-override` writes the override (runtime:
#     rdma-macvlan, and the options given as the runtime's variables and ulimits); plain is not
#     in it and `docker compose config` shows plain the same with and without it;
#   - `docker rdma compose up -d` (the README's block): each workload waits in rdma-exec until the
#     fake kernel adds its entries, then runs with its own GID index, only its HCAs' devices (CDI on
#     current, nodes on 20.10), CAP_IPC_LOCK and the memlock limit; multi gets both rails; w2 runs
#     as uid 65534 through its own entrypoint; bare runs its image's ENTRYPOINT and CMD; plain runs
#     with runc, unchanged;
#   - `docker compose down`: no macvlan on either parent, no CDI spec, no network or endpoint state;
#   - the printed override with plain `docker compose -f compose.yaml -f OVERRIDE up -d`: the same
#     results, and down leaves nothing again.
# No traffic is sent.
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines and builds compose), iproute2, jq.
# Leaves behind: nothing, also when a check or a step fails (links, engine, nodes, files).
#
# Usage: e2e-compose.sh [debian] [current]   (default: debian, and current when built)
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
NOSHELL=rdma-macvlan-test/noshell:latest

# run_cmd and expect: test/e2e/lib/e2e.sh.

teardown_hook() { fake_dev_remove; }
e2e_traps

# What every workload prints once rdma-exec starts it (a compose file's $$ is a $).
SHOW='echo "uid=$$(id -u) gid=$$NCCL_IB_GID_INDEX hca=$$NCCL_IB_HCA devs=$$(ls /dev/infiniband | tr "\n" " ")cap=$$(grep CapEff /proc/self/status | cut -f2) memlock=$$(grep "Max locked" /proc/self/limits | tr -s " " | cut -d" " -f4)"; trap "exit 0" TERM; sleep 3600 & wait'

# write_stack DIR: the project's compose.yaml.
write_stack() {
	cat >"$1/compose.yaml" <<EOF
x-fake: &fake
  image: $IMAGE
  volumes: ["$e/fs:/rdma-fake:ro"]
  environment: {RDMA_EXEC_SYSFS_ROOT: /rdma-fake}
services:
  w1:
    <<: *fake
    command: ["sh", "-c", '$SHOW']
    networks: {roce: {ipv4_address: "$a.11"}}
  w2:
    <<: *fake
    user: "65534"
    entrypoint: ["sh", "-c", '$SHOW']
    networks: {roce: {ipv4_address: "$a.12"}}
  multi:
    <<: *fake
    command: ["sh", "-c", '$SHOW']
    networks:
      roce: {ipv4_address: "$a.13"}
      roce2: {ipv4_address: "$b.13"}
  bare:
    <<: *fake
    image: $NOSHELL
    networks: {roce: {ipv4_address: "$a.14"}}
  plain:
    image: $IMAGE
    command: ["sh", "-c", 'trap "exit 0" TERM; sleep 3600 & wait']
    network_mode: none
networks:
  roce:
    driver: rdma-macvlan:latest
    driver_opts: {parent: $p0}
    ipam: {config: [{subnet: "$a.0/24"}]}
  roce2:
    driver: rdma-macvlan:latest
    driver_opts: {parent: $p1}
    ipam: {config: [{subnet: "$b.0/24"}]}
EOF
}

# add_entries: the fake kernel adds each container's v1/v2 pair, as it would once the address is
# on the macvlan in the container; sets idx[NAME] (the RoCE v2 index). multi's pairs come first, so
# that its own entries have the same index on both rails (see "Several NICs per container").
declare -A idx=()
add_entries() {
	local s ip if0 if1 n
	# The interface names of multi's two networks, as the engine gave them.
	for ((n = 0; n < 50; n++)); do
		out=$(docker exec "$proj-multi-1" ip -o -4 addr show 2>/dev/null || true)
		if0=$(awk -v p="$a.13/" 'index($4, p) == 1 {print $2}' <<<"$out")
		if1=$(awk -v p="$b.13/" 'index($4, p) == 1 {print $2}' <<<"$out")
		[[ -n $if0 && -n $if1 ]] && break
		sleep 0.2
	done
	out=$("$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_1 -ip "$b.13" -ndev "${if1:-eth1}")
	idx[multi1]=${out##* }
	out=$("$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$a.13" -ndev "${if0:-eth0}")
	idx[multi]=${out##* }
	for s in w1:$a.11 w2:$a.12 bare:$a.14; do
		ip=${s#*:}
		out=$("$work/bin/fakesysfs" add-ip -root "$e/fs" -hca mlx5_0 -ip "$ip" -ndev eth0)
		idx[${s%%:*}]=${out##* }
	done
	ifs=$if0,$if1
}
del_entries() {
	local ip
	for ip in "$a.11" "$a.12" "$a.13" "$a.14"; do
		"$work/bin/fakesysfs" del-ip -root "$e/fs" -hca mlx5_0 -ip "$ip" >/dev/null 2>&1 || true
	done
	"$work/bin/fakesysfs" del-ip -root "$e/fs" -hca mlx5_1 -ip "$b.13" >/dev/null 2>&1 || true
}

# ipc_lock LINE: the cap=HEX of a workload's line has CAP_IPC_LOCK (bit 14).
ipc_lock() {
	local c=${1#*cap=}
	c=${c%% *}
	(((16#$c >> 14) & 1))
}

# logs_of SERVICE: the service's output once it has some (rdma-exec holds it until then).
logs_of() {
	local n
	for ((n = 0; n < 150; n++)); do
		out=$(docker compose -p "$proj" logs --no-log-prefix "$1" 2>/dev/null || true)
		[[ -n $out ]] && return 0
		sleep 0.2
	done
	return 1
}

# stack_checks HOW: the running stack, each workload RDMA-ready with its own index.
stack_checks() {
	local how=$1 d0="rdma_cm uverbs0 " d01="rdma_cm uverbs0 uverbs1 "
	run_cmd docker compose -p "$proj" logs --no-log-prefix w1
	expect "$how: w1's workload has not started before its GID entries exist" '((rc == 0)) && [[ -z $out ]]'
	add_entries
	logs_of w1 || true
	expect "$how: w1 runs with its own GID index ${idx[w1]}, mlx5_0's devices only, IPC_LOCK and memlock $MEMLOCK" \
		'[[ $out == "uid=0 gid=${idx[w1]} hca==mlx5_0:1 devs=${d0}cap="* ]] && ipc_lock "$out" && [[ ${out##*memlock=} == "$MEMLOCK" ]]'
	logs_of w2 || true
	expect "$how: w2 (user: 65534, its own entrypoint) runs as 65534 with its own index ${idx[w2]}" \
		'[[ $out == "uid=65534 gid=${idx[w2]} hca==mlx5_0:1 devs=$d0"* && ${out##*memlock=} == "$MEMLOCK" ]] && ((idx[w1] != idx[w2]))'
	logs_of multi || true
	expect "$how: multi (two rdma-macvlan networks) sees both rails and both HCAs' devices" \
		'[[ $out == "uid=0 gid=${idx[multi]} hca==mlx5_0:1,mlx5_1:1 devs=$d01"* ]] && ((idx[multi] == idx[multi1]))'
	logs_of bare || true
	expect "$how: bare (no shell) runs its image's ENTRYPOINT and CMD with its index ${idx[bare]}" \
		'grep -qx "NCCL_IB_GID_INDEX=${idx[bare]}" <<<"$out" && grep -qx "NCCL_IB_HCA==mlx5_0:1" <<<"$out"'
	run_cmd docker inspect -f '{{.HostConfig.CapAdd}} {{len .HostConfig.Devices}} {{len .HostConfig.DeviceRequests}} {{.Config.Entrypoint}} {{.HostConfig.Runtime}}' "$proj-plain-1" "$proj-w1-1"
	expect "$how: plain has no capability, device or entrypoint added and runs with runc; w1 with rdma-macvlan" \
		'((rc == 0)) && [[ $out == $'"'"'[] 0 0 [] runc\n[] 0 0 [] rdma-macvlan'"'"' ]]'
}

# down_clean HOW: docker compose down leaves no link, CDI spec or state.
down_clean() {
	local how=$1
	run_cmd docker compose -p "$proj" down -t 3
	expect "$how: docker compose down" '((rc == 0))'
	del_entries
	run_cmd ip -o link show type macvlan
	expect "$how: no macvlan left on $p0 or $p1" '((rc == 0)) && [[ $out != *"@$p0:"* && $out != *"@$p1:"* ]]'
	run_cmd entries "${cdi:-$e/cdi}"
	expect "$how: no CDI spec left" '[[ -d ${cdi:-$e/cdi} && -z $out ]]'
	run_cmd find "$e/state/networks" "$e/state/endpoints" -type f
	expect "$how: no network or endpoint state left" '((rc == 0)) && [[ -z $out ]]'
}

e2e() {
	engine=$1
	local cli extra=() t0=$SECONDS t1 pdir stopped
	local sub own
	stopped=0
	compose_setup; ((!stopped)) || return 0
	# The README's blocks, with this machine's memlock limit and a longer wait for the entries.
	run_cmd bash -euo pipefail -c "$(readme_block compose-print | sed "s/docker rdma compose /docker rdma compose ${own[*]} /")"
	expect "README block: docker rdma compose --print-override writes compose.rdma.yaml" '((rc == 0)) && [[ -s compose.rdma.yaml ]]'
	run_cmd cat compose.rdma.yaml
	expect "the override gives w1 runtime: rdma-macvlan, RDMA_MACVLAN_GID_TIMEOUT and memlock, nothing else; plain is not in it" \
		'[[ $out == *"\"w1\":"*"    runtime: \"rdma-macvlan\""*"\"RDMA_MACVLAN_GID_TIMEOUT\": \"120s\""*"soft: $MEMLOCK"* && $out != *"\"plain\""* && $out != *devices* && $out != *entrypoint* && $out != *cap_add* ]]'
	local before after
	before=$(docker compose config --format json | jq -S '.services.plain')
	after=$(docker rdma compose "${own[@]}" config --format json | jq -S '.services.plain')
	run_cmd docker rdma compose "${own[@]}" config --format json
	expect "plain's config is the same with docker rdma compose (and w1 keeps its own volumes and environment, with the runtime's variable added)" \
		'[[ -n $before && $before == "$after" ]] && jq -e ".services.w1.runtime == \"rdma-macvlan\" and .services.w1.environment.RDMA_EXEC_SYSFS_ROOT == \"/rdma-fake\" and .services.w1.environment.RDMA_MACVLAN_GID_TIMEOUT == \"120s\" and (.services.w1.volumes | length) == 1" <<<"$out" >/dev/null'

	run_cmd bash -euo pipefail -c "$(readme_block compose-up | sed "s/docker rdma compose /docker rdma compose ${own[*]} /")"
	expect "README block: docker rdma compose up -d" '((rc == 0))'
	stack_checks "docker rdma compose"
	down_clean "docker rdma compose"

	run_cmd bash -euo pipefail -c "$(readme_block compose-plain)"
	expect "README block: plain docker compose -f compose.yaml -f compose.rdma.yaml up -d" '((rc == 0))'
	stack_checks "plain compose with the printed override"
	down_clean "plain compose with the printed override"

	run_cmd docker rdma compose -f compose.yaml -f missing.yml up -d
	expect "an error of compose's own is passed on with the fix's context" '((rc != 0)) && [[ $err == *"docker rdma compose: read the project"*"missing.yml"* ]]'
	sed -i "s/driver_opts: {parent: $p1}/driver_opts: {parent: rmvo${id}nope}/" compose.yaml
	run_cmd docker rdma compose up -d
	expect "a parent without an RDMA device is refused (by the plugin, at network create) naming it, before any container is created" \
		'((rc != 0)) && [[ $err == *"rmvo${id}nope"* ]] && [[ -z $(docker ps -aq) ]]'
	cd "$work"
	unset COMPOSE_PROJECT_NAME
	timings+=("$engine: checks took $((SECONDS - t1)) s, $((SECONDS - t0)) s with setup")
}

# compose_setup: the docker CLI with docker-rdma and compose, two parents and their fake HCAs,
# the engine, the plugin, the stack, compose up refused before the runtime is installed, the
# runtime; sets stopped when a step failed (it says which). Runs inside e2e.
compose_setup() {
	cdi=""
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
	pdir=$e/proj
	mkdir -p "$e/bin" "$e/config/cli-plugins" "$e/state" "${cdi:-$e/cdi}" "$pdir"
	ln -s "$cli" "$e/bin/docker"
	install -m 0755 "$work/bin/docker-rdma" "$e/config/cli-plugins/docker-rdma"
	ln -s "$compose_bin" "$e/config/cli-plugins/docker-compose"
	export PATH=$e/bin:$ORIG_PATH DOCKER_CONFIG=$e/config
	p0=rmvo${id}p0 p1=rmvo${id}p1
	veth_parent "$p0" "rmvo${id}q0"
	veth_parent "$p1" "rmvo${id}q1"
	fake_hca "$e/fs" mlx5_0 "$p0"
	fake_hca "$e/fs" mlx5_1 "$p1" -uverbs 1 -pci 0000:04:00.0
	if ! fake_dev_nodes "$e/fs" || ! fake_dev_uverbs 2; then
		fail "fake device nodes: /dev/infiniband could not be made, or has other numbers than the fake tree's"
		stopped=1; return 0
	fi
	if ! engine_up "$work/d-$engine" "$engine" "${extra[@]}" 2>"$work/dockerd.err"; then
		fail "private dockerd starts" "$(cat "$work/dockerd.err")"
		stopped=1; return 0
	fi
	plugin_up "$work/plugin" "$e/state" "${cdi:-$e/cdi}" "$e/fs/sys" 2>/dev/null
	mkdir -p "$work/noshell"
	cp /bin/busybox "$work/noshell/busybox"
	tar --numeric-owner --owner=0 --group=0 -C "$work/noshell" -c busybox |
		docker import -c 'ENTRYPOINT ["/busybox"]' -c 'CMD ["env"]' - "$NOSHELL" >/dev/null
	sub=$((RANDOM % 250 + 1))
	a=10.83.$sub b=10.84.$sub proj=rmvo$id
	write_stack "$pdir"
	cd "$pdir"
	export COMPOSE_PROJECT_NAME=$proj
	own=(--memlock "$MEMLOCK" --gid-timeout 120s)
	run_cmd docker rdma compose "${own[@]}" up -d
	expect "compose up on an engine without the rdma-macvlan runtime: status 125, naming docker rdma runtime install, nothing created" \
		'((rc == 125)) && [[ $err == *"the engine has no rdma-macvlan runtime"* && $err == *"docker rdma runtime install"* && -z $(docker ps -aq) ]]'
	if ! out=$(runtime_up 2>&1); then
		fail "docker rdma runtime install and SIGHUP: dockerd lists rdma-macvlan" "$out"
		stopped=1; return 0
	fi
	say "set up in $((SECONDS - t0)) s; $(docker compose version)"
	t1=$SECONDS
}

e2e_preflight ip:iproute2 jq:jq
select_engines "$@"
new_id rmvo
e=""
a="" b="" ifs="" p0="" p1="" proj="" cdi="" engine=""
ORIG_PATH=$PATH
bash "$scripts/engines.sh" install compose
compose_bin=$(bash "$scripts/engines.sh" compose)
BUILD_VERSION=e2e-$id suite_start compose docker-rdma rdma-exec rdma-macvlan-runtime fakesysfs rdma-macvlan
make_plugin_dir "$work/plugin" 2>/dev/null
run_engines e2e
