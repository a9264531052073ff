# shellcheck shell=bash
# The sourcing scripts read run_failed, IMAGE, SLEEPER, LOG_LINES, ...; they set rdir, work, here.
# shellcheck disable=SC2034,SC2154
# lib/e2e.sh: the harness the end-to-end scripts share (sourced, never run). It gives:
#   - output: say (progress on fd 3, the script's stderr), die, detail, pass, fail, skip; every
#     check prints `ok - [TAG] ...` or `not ok - [TAG] ...` and counts in PASSED / FAILED;
#   - checks: check, check_v, check_here, refused; poll; now_ms, took;
#   - the suite: select_engines, e2e_preflight, build_bins, make_plugin_dir, e2e_traps (teardown,
#     summary, exit status), new_id;
#   - a run: veth_parent, fake_hca, engine_up (a private dockerd of scripts/dockerd.sh with the
#     test image), plugin_up (the managed plugin on the run's dirs), runtime_up (the OCI runtime
#     registered and loaded), restart_dockerd, teardown (engines, links, namespaces, the run's
#     dir), leftovers, show_logs;
#   - the docker CLI and the plugin: dk (the docker CLI with a deadline), status, net_line,
#     ep_lines, field, net_endpoints, cpid, pings, running, run_c, stop_and_rm;
#   - small predicates: link_absent, no_host_link, entries, no_endpoint_state.
# What it reads from the sourcing script: here (its directory), tag (the run's label), rdir (a
# temp dir of the run), work (the suite's temp dir), CMD_TIMEOUT (seconds a docker command may
# take; default E2E_CMD_TIMEOUT or 90). It sets PASSED, FAILED, run_failed and t_start, and keeps
# the script's stdout on fd 4 and its stderr on fd 3.

repo=$(cd "$here/../.." && pwd)
# The engine set-up and packaging scripts the suites drive (dockerd.sh, engines.sh, plugin.sh, ...).
scripts=$repo/scripts
# shellcheck source=scripts/lib/proc.sh
source "$scripts/lib/proc.sh"
IMAGE=rdma-macvlan-test/busybox:latest
PLUGIN=rdma-macvlan:latest
HCA=mlx5_0
# What test containers run: a sleep that exits at once on SIGTERM (a plain sleep as PID 1 ignores
# it, so every stop and every dockerd shutdown would wait for the engine's 10 s timeout).
SLEEPER=(sh -c 'trap "exit 0" TERM; sleep 3600 & wait')
CMD_TIMEOUT=${CMD_TIMEOUT:-${E2E_CMD_TIMEOUT:-90}}
# Lines of daemon logs shown after a failed run.
LOG_LINES=${E2E_LOG_LINES:-40}

PASSED=0
FAILED=0
run_failed=""
t_start=$(date +%s)
tag=${tag:-setup}

# Progress goes to fd 3, the script's stderr, also from steps whose output a check captures; fd 4
# keeps the script's stdout for the summary of a run interrupted inside such a step.
exec 3>&2 4>&1
say() { printf '%s +%4ds [%s] %s\n' "$(date +%H:%M:%S)" "$(($(date +%s) - t_start))" "$tag" "$*" >&3; }
die() { say "error: $*"; exit 1; }

# detail prints its arguments as indented comment lines (at most 15 lines each). No pipe: with
# printf | head, printf writing a long text after head has its 15 lines dies of SIGPIPE, and
# pipefail made that a failed step.
detail() {
	local s lines
	for s in "$@"; do
		[[ -n $s ]] || continue
		mapfile -t -n 15 lines <<<"$s"
		printf '#   %s\n' "${lines[@]}"
	done
}
pass() { PASSED=$((PASSED + 1)); printf 'ok - [%s] %s\n' "$tag" "$1"; shift; detail "$@"; }
fail() { FAILED=$((FAILED + 1)); run_failed=1; printf 'not ok - [%s] %s\n' "$tag" "$1"; shift; detail "$@"; }
skip() { printf '# skip - [%s] %s\n' "$tag" "$*"; }

# run_cmd CMD...: runs CMD; its status, stdout and stderr land in rc, out and err (uses the
# suite's $work for a temp file).
rc=0
out=""
err=""
run_cmd() {
	local ef
	ef=$(mktemp "$work/err.XXXXXX")
	rc=0
	out=$("$@" 2>"$ef") || rc=$?
	err=$(cat "$ef")
	rm -f "$ef"
}

# expect DESC EXPR: ok when the bash expression EXPR holds for the last run_cmd.
expect() {
	if eval "$2"; then
		pass "$1"
	else
		fail "$1" "failed: $2" "status: $rc" "stdout: $out" "stderr: $err"
	fi
}

# check DESC CMD...: one check; the output of a failing CMD is shown under it. CMD runs in a
# subshell: use check_here for steps that record state (pids).
check() {
	local desc=$1 out t0
	shift
	t0=$(now_ms)
	if out=$("$@" 2>&1); then pass "$desc$(took "$t0")"; else fail "$desc$(took "$t0")" "$out"; fi
}

# check_v DESC CMD...: check, showing CMD's output under a pass too.
check_v() {
	local desc=$1 out t0
	shift
	t0=$(now_ms)
	if out=$("$@" 2>&1); then pass "$desc$(took "$t0")" "$out"; else fail "$desc$(took "$t0")" "$out"; fi
}

# check_here DESC CMD...: check, with CMD run in this shell (its output goes to $rdir/step.out).
check_here() {
	local desc=$1 t0
	shift
	t0=$(now_ms)
	if "$@" >"$rdir/step.out" 2>&1; then
		pass "$desc$(took "$t0")"
	else
		fail "$desc$(took "$t0")" "$(cat "$rdir/step.out")"
	fi
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# took T0 prints " (N.N s)" when more than a second passed since T0 (ms).
took() {
	local ms=$(($(now_ms) - $1))
	((ms < 1000)) || printf ' (%d.%d s)' $((ms / 1000)) $((ms % 1000 / 100))
}

# poll SECONDS CMD...: runs CMD every 0.2 s until it succeeds; fails at the deadline with CMD's
# last output on stdout.
poll() {
	local secs=$1 end out
	shift
	end=$(($(date +%s%N) / 1000000 + secs * 1000))
	while :; do
		if out=$("$@" 2>&1); then return 0; fi
		if (($(date +%s%N) / 1000000 >= end)); then
			printf '%s\n(still failing after %ss)\n' "$out" "$secs"
			return 1
		fi
		sleep 0.2
	done
}

# dk runs the docker CLI ($DOCKER_CLI, default docker from PATH) with a deadline, without its
# warning about IPv4 forwarding (disabled on purpose in the private engines).
dk() {
	timeout -k 5 "$CMD_TIMEOUT" "${DOCKER_CLI:-docker}" "$@" 2> >(grep -v 'IPv4 forwarding is disabled' >&2 || true)
}

# refused DESC WANT... -- CMD...: CMD fails and its output (the docker CLI's) contains every WANT.
refused() {
	local desc=$1 out w miss=""
	local -a want=()
	shift
	while [[ $1 != -- ]]; do want+=("$1"); shift; done
	shift
	if out=$("$@" 2>&1 </dev/null); then
		fail "$desc: accepted, want a refusal" "$out"
		return 0
	fi
	for w in "${want[@]}"; do grep -qF -- "$w" <<<"$out" || miss+=" '$w'"; done
	if [[ -z $miss ]]; then pass "$desc" "docker said: $out"; else fail "$desc: the CLI does not show$miss" "$out"; fi
}

link_absent() { ! ip link show dev "$1" 2>/dev/null; }

# entries DIR: the names in DIR, one a line, sorted; nothing when DIR is missing.
entries() { { find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null || true; } | sort; }

# dockerd_down DIR stops the private dockerd of scripts/dockerd.sh in DIR by its pid (containerd
# and, with --live-restore, the containers keep running) and keeps in dockerd_argv, dockerd_path
# and dockerd_pre what dockerd_up DIR needs to start the same command line again, in the same
# network namespace, keeping its data root (scripts/dockerd.sh stop finds the new pid).
dockerd_argv=()
dockerd_path=""
dockerd_pre=()
dockerd_down() {
	local dir=$1 pid t0
	pid=$(cat "$dir/dockerd.spawned")
	[[ $(readlink "/proc/$pid/exe") == */dockerd ]] || { echo "pid $pid is not our dockerd"; return 1; }
	mapfile -d '' -t dockerd_argv <"/proc/$pid/cmdline"
	dockerd_path=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^PATH=//p')
	dockerd_pre=()
	[[ -s $dir/netns ]] && dockerd_pre=(nsenter "--net=/run/netns/$(cat "$dir/netns")")
	t0=$(now_ms)
	stop_pid "$pid" 40 "dockerd (pid $pid)"
	kill -0 "$pid" 2>/dev/null && { echo "dockerd $pid did not stop"; return 1; }
	say "dockerd stopped in $(($(now_ms) - t0)) ms"
}
dockerd_up() {
	local dir=$1 t0
	t0=$(now_ms)
	PATH=$dockerd_path setsid "${dockerd_pre[@]}" "${dockerd_argv[@]}" </dev/null >>"$dir/dockerd.log" 2>&1 &
	printf '%s\n' "$!" >"$dir/dockerd.spawned"
	poll 60 env DOCKER_HOST="unix://$dir/docker.sock" docker info --format '{{.ServerVersion}}' >/dev/null ||
		{ echo "dockerd did not answer again"; return 1; }
	say "dockerd answers again after $(($(now_ms) - t0)) ms"
}
restart_dockerd() { dockerd_down "$1" && dockerd_up "$1"; }

# runtime_up: rdma-macvlan-runtime ($work/bin/rdma-macvlan-runtime, its rdma-exec beside it, as
# build_bins puts them) registered in the private engine's daemon.json ($ddir) with docker rdma
# runtime install, then dockerd reloaded (SIGHUP) until docker info lists it. Needs docker rdma
# on the docker CLI and the managed plugin up (install takes the plugin's CDI directory).
runtime_up() {
	docker rdma runtime install --config-file "$ddir/daemon.json" --path "$work/bin/rdma-macvlan-runtime" >/dev/null || return 1
	kill -HUP "$(cat "$ddir/dockerd.spawned")"
	# shellcheck disable=SC2016 # expanded by the inner bash
	poll 20 bash -c '[[ " $(docker info -f "{{range \$k, \$v := .Runtimes}}{{\$k}} {{end}}") " == *" rdma-macvlan "* ]]'
}

# ---------------------------------------------------------------------------------------------
# The suite.

# The engines, oldest first, of scripts/lib/engines.sh (generated from internal/engines/engines.go):
# debian (Debian's Docker 20.10), v27 and v28 (the last Docker 27 and 28 releases) and current
# (moby v2), the last three built by scripts/engines.sh. MIDDLE_ENGINES lie between the oldest and
# the newest; the suites that run them run a subset there (cold CI time). By default they are the
# table's middle ones (make check: v28); E2E_MIDDLE_ENGINES="v27 v28" adds Docker 27, an on-demand
# engine (make e2e-v27 runs the suites on it alone): its build costs a cold CI run about 5 minutes.
# shellcheck source=scripts/lib/engines.sh
. "$scripts/lib/engines.sh"
ALL_ENGINES=("${ENGINE_NAMES[@]}")
read -ra MIDDLE_ENGINES <<<"${E2E_MIDDLE_ENGINES:-${ENGINE_MIDDLE[*]}}"

# select_engines [--both] [--middle] [ENGINE...]: sets engines to the engines named, or by default
# to the oldest (debian) and, when scripts/engines.sh has built it (or with --both: always, then
# scripts/engines.sh install builds it), the newest (current); with --middle also the middle
# engines (v28), on the same terms.
engines=()
select_engines() {
	local e both="" middle=""
	[[ ${1:-} == --both ]] && { both=1; shift; }
	[[ ${1:-} == --middle ]] && { middle=1; shift; }
	engines=("$@")
	if ((${#engines[@]} == 0)); then
		engines=("$ENGINE_OLDEST")
		if [[ -n $middle ]]; then
			for e in "${MIDDLE_ENGINES[@]}"; do
				if [[ -n $both ]] || bash "$scripts/engines.sh" bindir "$e" >/dev/null 2>&1; then
					engines+=("$e")
				else
					printf '# skip - the %s engine is not built (scripts/engines.sh install %s)\n' "$e" "$e"
				fi
			done
		fi
		if [[ -n $both ]] || bash "$scripts/engines.sh" bindir "$ENGINE_NEWEST" >/dev/null 2>&1; then
			engines+=("$ENGINE_NEWEST")
		else
			printf '# skip - the %s engine is not built (scripts/engines.sh install %s): %s only\n' "$ENGINE_NEWEST" "$ENGINE_NEWEST" "$ENGINE_OLDEST"
		fi
	fi
	for e in "${engines[@]}"; do
		[[ " ${ALL_ENGINES[*]} " == *" $e "* ]] || die "unknown engine '$e' (want: ${ALL_ENGINES[*]})"
	done
}

# engine_major ENGINE: the Docker major version of ENGINE (moby v2 is Docker 29).
engine_major() {
	[[ -n ${ENGINE_MAJOR[$1]-} ]] || die "engine_major: unknown engine '$1'"
	echo "${ENGINE_MAJOR[$1]}"
}

# engine_since ENGINE MAJOR: ENGINE is Docker MAJOR or later.
engine_since() { (($(engine_major "$1") >= $2)); }

# engine_middle ENGINE: ENGINE is one of the middle engines.
engine_middle() { [[ " ${MIDDLE_ENGINES[*]} " == *" $1 "* ]]; }

# e2e_preflight COMMAND:WHERE...: root, Go (also from /usr/local/go/bin) and each COMMAND are
# there; WHERE says where a missing one comes from.
e2e_preflight() {
	local c
	[[ $(id -u) -eq 0 ]] || die "needs root (links, namespaces, private dockerds)"
	command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
	command -v go >/dev/null || die "go not found (install Go, or put it in /usr/local/go)"
	for c in "$@"; do
		command -v "${c%%:*}" >/dev/null || die "${c%%:*} not found (${c#*:})"
	done
}

# build_bins NAME...: builds the repository's programs into $work/bin: rdma-macvlan, rdma-exec and
# docker-rdma (static; docker-rdma with version BUILD_VERSION when set), fakesysfs, rmvstatus,
# tcpunix and elfcheck.
build_bins() {
	local n pkg
	local -a flags
	mkdir -p "$work/bin"
	say "building $* from the working tree"
	for n in "$@"; do
		flags=()
		case $n in
		rdma-macvlan | rdma-exec | rdma-macvlan-runtime) pkg=./cmd/$n flags=(-trimpath -ldflags '-s -w') ;;
		docker-rdma)
			pkg=./cmd/$n flags=(-trimpath)
			[[ -z ${BUILD_VERSION:-} ]] ||
				flags+=(-ldflags "-X github.com/rdma-macvlan/rdma-macvlan/internal/version.version=$BUILD_VERSION")
			;;
		fakesysfs) pkg=./test/fakesysfs ;;
		rmvstatus) pkg=./test/e2e/rmvstatus ;;
		tcpunix) pkg=./test/e2e/tcpunix ;;
		elfcheck) pkg=./tools/elfcheck ;;
		*) die "build_bins: unknown program $n" ;;
		esac
		if [[ $pkg == ./cmd/* ]]; then
			(cd "$repo" && CGO_ENABLED=0 go build "${flags[@]}" -o "$work/bin/$n" "$pkg")
		else
			(cd "$repo" && go build -o "$work/bin/$n" "$pkg")
		fi
	done
}

# suite_start NAME PROGRAM...: the selected engines installed (scripts/engines.sh install), the
# suite's temp dir $work (/tmp/rmv-NAME-work.*, removed at exit) and the PROGRAMs built into it.
suite_start() {
	local name=$1
	shift
	say "engines: ${engines[*]}"
	bash "$scripts/engines.sh" install "${engines[@]}"
	work=$(mktemp -d "/tmp/rmv-$name-work.XXXXXX")
	build_bins "$@"
}

# run_engines FUNC: FUNC ENGINE for each selected engine, each followed by teardown (a run that
# stopped early has not torn down yet), then the summary.
run_engines() {
	local e
	for e in "${engines[@]}"; do
		"$1" "$e"
		teardown
	done
	summary
}

# make_plugin_dir DIR: the managed plugin's dir (scripts/plugin.sh build) with $work/bin/rdma-macvlan.
make_plugin_dir() { PLUGIN_DIR=$1 PLUGIN_BINARY=$work/bin/rdma-macvlan bash "$scripts/plugin.sh" build; }

# new_id PREFIX: sets id to 4 hex digits that no link and no network namespace with PREFIX uses.
new_id() {
	local n
	for ((n = 0; n < 20; n++)); do
		id=$(od -An -N2 -tx2 /dev/urandom | tr -d ' \n')
		# grep reads to the end: grep -q would leave ip writing into a closed
		# pipe on a host with many links, and its SIGPIPE reads as "free".
		ip -o link show | grep -F "$1$id" >/dev/null || ip netns list | grep -F "$1$id" >/dev/null || break
	done
}

# ---------------------------------------------------------------------------------------------
# A run: what it made is recorded here, and teardown undoes exactly that.
rdir=""   # temp dir of one run
ddir=""   # the last private dockerd's dir (scripts/dockerd.sh)
ddirs=()  # every private dockerd's dir
links=()  # host links the run created (one end of each veth pair)
nss=()    # network namespaces the run created

# veth_parent NAME PEER: a veth pair in the host netns, both ends up, as a RoCE parent.
veth_parent() {
	ip link add "$1" type veth peer name "$2"
	links+=("$1")
	ip link set "$1" up
	ip link set "$2" up
}

# fake_hca ROOT HCA NETDEV [ARGS...]: a fake mlx5 sysfs tree under ROOT (test/fakesysfs)
# with HCA on the host link NETDEV, carrying its MAC.
fake_hca() {
	local root=$1 hca=$2 nd=$3
	shift 3
	"$work/bin/fakesysfs" build -root "$root" -kind mlx5 -hca "$hca" -netdev "$nd" \
		-mac "$(cat "/sys/class/net/$nd/address")" "$@"
}

# engine_up DIR ENGINE [ARGS...]: a private dockerd (scripts/dockerd.sh start DIR ENGINE ARGS),
# DOCKER_HOST pointed at it, and the test image.
engine_up() {
	local dir=$1 env
	ddirs+=("$dir")
	ddir=$dir
	env=$(bash "$scripts/dockerd.sh" start "$@") || return 1
	eval "$env"
	say "dockerd $(dk version -f '{{.Server.Version}} (API {{.Server.APIVersion}})') ready in $dir"
	bash "$scripts/mkimage.sh"
}

# plugin_up DIR STATE CDI SYSFS [SETTING...]: the managed plugin from plugin dir DIR created, its
# mounts set to STATE, CDI and SYSFS (plus SETTINGs), enabled (scripts/plugin.sh create, install).
plugin_up() {
	local dir=$1
	PLUGIN_DIR=$dir bash "$scripts/plugin.sh" create
	dk plugin set "$PLUGIN" state.source="$2" cdi.source="$3" sysfs.source="$4" "${@:5}"
	PLUGIN_DIR=$dir bash "$scripts/plugin.sh" install
}

# engine_clean DIR: when the dockerd in DIR answers: out of any swarm, no container, no network.
engine_clean() {
	local ids
	[[ -S $1/docker.sock ]] || return 0
	export DOCKER_HOST=unix://$1/docker.sock
	timeout 10 docker info >/dev/null 2>&1 || return 0
	timeout 30 docker swarm leave --force >/dev/null 2>&1
	ids=$(timeout 30 docker ps -aq 2>/dev/null)
	# shellcheck disable=SC2086 # one word per container
	[[ -n $ids ]] && timeout 120 docker rm -f $ids >/dev/null 2>&1
	ids=$(timeout 30 docker network ls -q --filter type=custom 2>/dev/null)
	# shellcheck disable=SC2086 # one word per network
	[[ -n $ids ]] && timeout 60 docker network rm $ids >/dev/null 2>&1
	return 0
}

# teardown removes everything of the current run, whatever state it is in; idempotent. The
# engines are emptied, then the script's teardown_hook (if it has one) runs, then the engines
# stop and the links, namespaces and the run's dir go.
teardown() {
	local d
	set +e
	trap - ERR
	[[ -n $rdir ]] && say "teardown of $rdir"
	for d in "${ddirs[@]}"; do engine_clean "$d"; done
	unset DOCKER_HOST
	declare -F teardown_hook >/dev/null && teardown_hook
	for d in "${ddirs[@]}"; do
		say "stopping the private dockerd in $d"
		bash "$scripts/dockerd.sh" stop "$d" 2>/dev/null || say "warning: dockerd.sh stop $d failed"
	done
	ddirs=()
	ddir=""
	for d in "${links[@]}"; do ip link del "$d" 2>/dev/null; done
	links=()
	# Links moved into them go with them.
	for d in "${nss[@]}"; do ip netns del "$d" 2>/dev/null; done
	nss=()
	if [[ -n $rdir ]]; then
		rm -rf --one-file-system "$rdir"
		say "teardown done"
	fi
	rdir=""
	trap on_err ERR
	set -e
}

# show_logs: the last lines of the legacy daemon's log ($rdir/legacy.log) and of dockerd's.
show_logs() {
	if [[ -n $rdir && -f $rdir/legacy.log ]]; then
		detail "last lines of the legacy daemon's log:" "$(tail -n "$LOG_LINES" "$rdir/legacy.log")"
	fi
	if [[ -n $ddir && -f $ddir/dockerd.log ]]; then
		detail "last lines of dockerd's log (plugin lines are prefixed with its id):" \
			"$(grep -iE 'error|warn|rdma|plugin' "$ddir/dockerd.log" | grep -v 'IPv4 forwarding' | tail -n "$LOG_LINES")"
	fi
}

# leftovers LINK-PREFIX RUNDIR [PLUGIN-ID...]: fails listing what of a run is still on the
# machine: links named LINK-PREFIX*, network namespaces, mounts and processes naming RUNDIR,
# RUNDIR itself, each managed plugin's dir under /run/docker/plugins and process. Other tests may
# run on the same host at the same time: only what carries the run's names or paths counts.
leftovers() {
	local pfx=$1 d=$2 out="" p
	shift 2
	out+=$(ip -o link show | awk -F': ' -v id="$pfx" 'index($2, id) {print "link " $2}')
	out+=$(ip netns list 2>/dev/null | grep -F -e "$pfx" -e "$d" | sed 's/^/\nnetns /')
	out+=$(findmnt -rn -o TARGET | grep -F -- "$d" | sed 's/^/\nmount /')
	out+=$(pgrep -af -- "$d" | sed 's/^/\nprocess /')
	[[ -e $d ]] && out+=$'\ndir '$d
	for p in "$@"; do
		[[ -n $p ]] || continue
		[[ -e /run/docker/plugins/$p ]] && out+=$'\nplugin dir /run/docker/plugins/'$p
		grep -lF -- "$p" /proc/[0-9]*/cgroup >/dev/null 2>&1 && out+=$'\nplugin process of '${p:0:12}
	done
	out=$(sed '/^$/d' <<<"$out")
	[[ -z $out ]] || { printf '%s\n' "$out"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# The docker CLI and the plugin in a run: they read the script's sock, net and parent.

# status prints the plugin's /v1/status on $sock as lines (see test/e2e/rmvstatus).
status() { "$work/bin/rmvstatus" -socket "$sock"; }

# net_line NID prints the status line of network NID.
net_line() { status | awk -v id="$1" '$1 == "network" && $2 == id'; }

# ep_lines NID prints the status lines of the endpoints of network NID.
ep_lines() { status | awk -v id="$1" '$1 == "endpoint" && $2 == id'; }

# field NAME LINE prints the value of NAME=... in LINE.
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -n 1; }

# net_endpoints NID N: network NID is listed with N endpoints.
net_endpoints() {
	local l
	l=$(net_line "$1")
	[[ -n $l ]] || { echo "network $1 not in /v1/status:"; status; return 1; }
	[[ $(field endpoints "$l") == "$2" ]] || { echo "want $2 endpoints: $l"; return 1; }
}

cpid() { dk inspect -f '{{.State.Pid}}' "$1"; }

# cip NAME: the container's address on the run's network, from docker inspect.
cip() { dk inspect -f "{{(index .NetworkSettings.Networks \"$net\").IPAddress}}" "$1"; }

pings() { dk exec "$1" ping -c 2 -W 2 "$2"; }

# running NAME: the container runs.
running() { [[ $(dk inspect -f '{{.State.Running}}' "$1" 2>&1) == true ]]; }

# run_c NAME IP [ARGS...] [-- CMD...]: a detached busybox on the run's network (default command:
# the sleeper).
run_c() {
	local name=$1 ip=$2
	local -a args=() cmd=("${SLEEPER[@]}")
	shift 2
	while (($#)); do
		if [[ $1 == -- ]]; then
			shift
			cmd=("$@")
			break
		fi
		args+=("$1")
		shift
	done
	dk run -d --name "$name" --network "$net" --ip "$ip" "${args[@]}" "$IMAGE" "${cmd[@]}" >/dev/null
}

stop_and_rm() { dk stop -t 3 "$1" >/dev/null && dk rm "$1" >/dev/null; }

# parent_children: the macvlan links on the run's parent in the host netns, one a line.
parent_children() { ip -o link show type macvlan | grep -F "@$parent:" || true; }

# no_host_link NAME...: none of the links exists in the host netns, and no macvlan hangs off the
# parent there.
no_host_link() {
	local l bad=""
	for l in "$@"; do
		[[ -n $l ]] || continue
		ip link show dev "$l" >/dev/null 2>&1 && bad+=" $l"
	done
	[[ -z $bad ]] || { echo "host links still there:$bad"; return 1; }
	l=$(parent_children)
	[[ -z $l ]] || { echo "macvlan children of $parent in the host netns: $l"; return 1; }
}

no_endpoint_state() {
	local f
	f=$(entries "$rdir/state/endpoints")
	[[ -z $f ]] || { echo "endpoint state left: $f"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# e2e_traps installs the exit handling of a suite: on any exit the run's teardown runs, then the
# script's suite_teardown (if it has one), $work (the suite's temp dir, if set) goes, and the
# summary (`# time` lines from the timings array, then `N passed, N failed`) is printed once; an
# interrupt or a step failing outside the checks counts as a failed check (with show_logs of the
# run). The exit status is 1 when a check failed.
summary_done=""
timings=()
summary() {
	local t
	tag="summary"
	for t in "${timings[@]}"; do printf '# time %s\n' "$t"; done
	printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
	summary_done=1
}
on_exit() {
	local rc=$?
	trap - EXIT ERR
	exec 1>&4 2>&3
	if ((rc == 130)) && [[ -z $summary_done ]]; then
		fail "interrupted"
	elif ((rc != 0)) && [[ -z $summary_done ]]; then
		fail "aborted: a step outside the checks failed (exit $rc; see the lines above)"
		[[ -n $rdir ]] && show_logs
	fi
	teardown
	declare -F suite_teardown >/dev/null && suite_teardown
	[[ -n ${work:-} ]] && rm -rf --one-file-system "$work"
	[[ -n $summary_done ]] || summary
	((rc == 0)) || exit "$rc"
	((FAILED == 0)) || exit 1
}
# on_err says where a step outside the checks failed.
on_err() { say "command failed (exit $?): $BASH_COMMAND"; }
e2e_traps() {
	trap on_exit EXIT
	trap 'exit 130' INT TERM
	trap on_err ERR
}

# A local registry (Debian's docker-registry, on 127.0.0.1 only) for `docker plugin push/install`.
# registry_bin prints the path of a docker-registry binary: the one on PATH, or Debian's, fetched
# with apt-get download and unpacked into $RDMA_MACVLAN_CACHE/registry (default
# /var/cache/rdma-macvlan; the package is never installed, so no service and no user is made).
# Uses $work (the suite's temp dir) for the download.
registry_bin() {
	local cache=${RDMA_MACVLAN_CACHE:-/var/cache/rdma-macvlan} tmp deb bin
	bin=$cache/registry/docker-registry
	if command -v docker-registry >/dev/null; then command -v docker-registry; return 0; fi
	if [[ -x $bin ]]; then printf '%s\n' "$bin"; return 0; fi
	tmp=$(mktemp -d "$work/deb.XXXXXX")
	say "fetching Debian's docker-registry (unpacked into $cache/registry, not installed)"
	if ! (cd "$tmp" && apt-get download docker-registry >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && apt-get download docker-registry >/dev/null 2>&1; }); then
		rm -rf "$tmp"
		echo "apt-get download docker-registry failed"
		return 1
	fi
	deb=$(find "$tmp" -maxdepth 1 -name 'docker-registry_*.deb' | head -n 1)
	dpkg-deb -x "$deb" "$tmp/x"
	mkdir -p "$cache/registry"
	install -m 0755 "$tmp/x/usr/bin/docker-registry" "$bin.new"
	mv -f "$bin.new" "$bin"
	rm -rf "$tmp"
	printf '%s\n' "$bin"
}

# free_port: a TCP port of 127.0.0.1 nothing listens on, below the kernel's ephemeral range
# (ip_local_port_range, from 32768 by default), so that no connection the suite or a test beside
# it makes (make check runs the Go tests beside the suites) takes it before it is bound.
free_port() {
	local port n low
	read -r low _ </proc/sys/net/ipv4/ip_local_port_range
	((low > 21000)) || low=32768
	for ((n = 0; n < 50; n++)); do
		port=$((20000 + RANDOM % (low - 20000)))
		ss -Hltn "sport = :$port" | grep -q . || { echo "$port"; return 0; }
	done
	return 1
}

# registry_start BIN DIR: a registry on a free port of 127.0.0.1 with its storage and log in DIR.
# Sets reg (127.0.0.1:PORT) and reg_pid; run it in the script's shell. registry_stop ends it.
reg=""
reg_pid=""
registry_start() {
	local bin=$1 dir=$2 port
	port=$(free_port) || { echo "registry_start: no free port of 127.0.0.1 found" >&2; return 1; }
	mkdir -p "$dir/data"
	cat >"$dir/config.yml" <<EOC
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/data
http:
  addr: 127.0.0.1:$port
  secret: rmv-$RANDOM$RANDOM
EOC
	setsid "$bin" serve "$dir/config.yml" </dev/null >"$dir/log" 2>&1 &
	reg_pid=$!
	reg=127.0.0.1:$port
	poll 15 registry_up || { cat "$dir/log"; return 1; }
}

# registry_up: the registry answers its API root (bash's /dev/tcp; no curl needed).
registry_up() {
	local host=${reg%:*} port=${reg#*:} line
	exec 5<>"/dev/tcp/$host/$port" || return 1
	printf 'GET /v2/ HTTP/1.0\r\nHost: %s\r\n\r\n' "$reg" >&5
	read -r line <&5 || true
	exec 5<&- 5>&-
	[[ $line == *" 200 "* ]] || { echo "registry answered: $line"; return 1; }
}

registry_stop() {
	if [[ -n $reg_pid ]]; then
		stop_pid "$reg_pid" 10
		wait "$reg_pid" 2>/dev/null || true
		reg_pid=""
	fi
	return 0
}

# block_after MARKER FILE...: the lines of the first code block that follows the line MARKER.
block_after() {
	local m=$1
	shift
	awk -v m="$m" '
		$0 == m { on = 1; next }
		on == 1 && /^```/ { on = 2; next }
		on == 2 && /^```/ { exit }
		on == 2 { print }' "$@"
}

# readme_block NAME: the lines of the README's code block that follows the line
# `<!-- e2e:NAME -->`, so that a test runs exactly what the README tells users.
readme_block() { block_after "<!-- e2e:$1 -->" "${repo:?}/README.md" "$repo"/docs/*.md; }

# sample NAME SED-SCRIPT CMD...: runs CMD and checks `$ CMD` and its stdout, with SED-SCRIPT
# applied to both (the test's own names, ids and paths made the docs'), against the block that
# follows `<!-- sample:NAME -->` in docs/*.md.
# A sample that no longer matches fails the check with the difference; UPDATE_SAMPLES=1 writes the
# output into the block instead (review the diff, then commit it).
sample() {
	local name=$1 script=$2 file got want
	shift 2
	file=$(grep -lx -- "<!-- sample:$name -->" "${repo:?}"/docs/*.md | head -n 1)
	[[ -n $file ]] || { fail "sample $name: no <!-- sample:$name --> in docs/*.md"; return; }
	run_cmd "$@"
	want=$(block_after "<!-- sample:$name -->" "$file")
	got=$(sed -E "$script" <<<"\$ $*"$'\n'"$out")
	if [[ -n ${UPDATE_SAMPLES:-} && $got != "$want" ]]; then
		printf '%s\n' "$got" >"$work/sample.$name"
		awk -v m="<!-- sample:$name -->" -v f="$work/sample.$name" '
			$0 == m { on = 1; print; next }
			on == 1 && /^```/ { print; while ((getline l < f) > 0) print l; on = 2; next }
			on == 2 && /^```/ { on = 0; print; next }
			on == 2 { next }
			{ print }' "$file" >"$work/sample.md" && cat "$work/sample.md" >"$file"
		rm -f "$work/sample.$name" "$work/sample.md"
		say "sample $name: wrote the output into $file (UPDATE_SAMPLES)"
		want=$got
	fi
	if ((rc == 0)) && [[ $got == "$want" ]]; then
		pass "sample $name: ${want%%$'\n'*} prints what ${file#"$repo"/} shows"
	else
		fail "sample $name: ${file#"$repo"/} shows other output than ${want%%$'\n'*} prints (status $rc): update the block with UPDATE_SAMPLES=1 and review the diff" \
			"$(diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") || true)" "stderr: $err"
	fi
}
