#!/usr/bin/env bash
# dockerd.sh: run a private Docker engine for tests, sharing nothing with the host's Docker.
#
# Needs: root; scripts/engines.sh run before (Debian's dockerd/containerd/runc; for the engines
# built from source, "current", "v28", ..., the dockerd, docker-proxy and runc it builds); the
# docker CLI on PATH. The engines are those of scripts/lib/engines.sh (internal/engines/engines.go).
#
# Usage:
#   dockerd.sh start DIR [ENGINE (default debian)] [--netns NAME [--bridge]] [-- EXTRA-ARGS...]
#       Starts containerd and dockerd under DIR (created; must be absent, empty or a stopped DIR of
#       this script), waits until `docker info` answers, writes DIR/env and prints
#       `export DOCKER_HOST=unix://DIR/docker.sock` on stdout (progress goes to stderr), so
#       `eval "$(scripts/dockerd.sh start DIR)"` works. On failure it shows the log tail, removes
#       everything it made and exits non-zero. With --netns NAME both daemons (and so the
#       containers' and managed plugins' host network) run in the network namespace
#       /run/netns/NAME (made by the caller, e.g. `ip netns add`; it is not removed by stop), in
#       the host's mount namespace, so their mounts and sockets stay visible to stop; the socket
#       DIR/docker.sock is reached from the host as usual.
#       Without --bridge the engine has no default bridge and touches no firewall (--bridge=none
#       --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false
#       --userland-proxy=false; Docker 27+ default to --ip6tables=true, which --iptables=false
#       does not turn off: they would add their chains to the host's ip6tables). --bridge
#       (only with --netns, so that the bridge, the iptables rules and the forwarding sysctls
#       the engine sets are those of that namespace, never the host's) runs the engine as
#       installed: default bridge docker0, iptables, ip-forward, masquerading, userland proxy.
#   dockerd.sh stop DIR      stops dockerd, its containers and plugins, and containerd (SIGTERM,
#                            SIGKILL after a deadline, each by the pid this script recorded),
#                            unmounts everything below DIR, removes the cgroups and host dirs
#                            the engine created and DIR itself. Safe to run twice or after a
#                            failed start.
#   dockerd.sh halt DIR      shuts the engine down as a host shutdown does and keeps its disk:
#                            dockerd (SIGTERM: it stops its containers and plugins), then
#                            containerd; then removes what a reboot removes with the host's tmpfs
#                            (its exec-root x/, containerd's state, the plugins' socket dirs under
#                            /run/docker/plugins, every mount below DIR). data/ stays.
#   dockerd.sh boot DIR      starts a halted DIR's containerd and dockerd again with the command
#                            line of its start (engine, --netns, extra args), as a boot does, and
#                            waits until `docker info` answers; prints the export line as start.
#   dockerd.sh logs DIR [dockerd|containerd]   prints the daemon's log (default dockerd)
#
# Layout of DIR: data/ (--data-root), x/ (--exec-root), docker.sock, dockerd.pid (--pidfile),
#   {dockerd,containerd}.spawned (pids as started), dockerd.log,
#   daemon.json (the host's /etc/docker/daemon.json is never read), key.json, containerd/ (its own
#   containerd: config, root, state, socket, log), env, engine, cgroup-parent, host-dirs,
#   netns (the --netns NAME, when given), bridge (present with --bridge), args (the extra dockerd
#   arguments, NUL-separated).
# Leaves behind: while running, the daemons; after stop, nothing. The engine itself puts managed
#   plugins' sockets under /run/docker/plugins/<plugin-id>/ and containerd 1.6 its shim sockets
#   under /run/containerd/s/ (both paths are fixed in the engines); stop removes this engine's
#   plugin dirs and any of these dirs that did not exist before start and are empty.
#
# Environment: DOCKERD_START_TIMEOUT (s, default 60), DOCKERD_STOP_TIMEOUT (s, default 30).
#   Containers get --shutdown-timeout 3, so stop is quick.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib/engines.sh
. "$here/lib/engines.sh"
START_TIMEOUT=${DOCKERD_START_TIMEOUT:-60}
STOP_TIMEOUT=${DOCKERD_STOP_TIMEOUT:-30}
MARKER=.rdma-macvlan-dockerd
SYS_PATH=/usr/sbin:/usr/bin:/sbin:/bin
# Fixed host paths that the engines use whatever their --exec-root.
HOST_DIRS=(/run/docker /run/docker/plugins /run/containerd /run/containerd/s)

say() { printf 'dockerd.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }

# abs_dir DIR prints DIR as an absolute, normalised path and rejects paths this script cannot
# handle safely (whitespace breaks /proc/self/mountinfo parsing; long paths break unix sockets).
abs_dir() {
	local d
	d=$(realpath -m -- "$1")
	[[ $d != / && $d =~ ^/[^[:space:]]+$ ]] || die "DIR must be a path without whitespace, not '$1'"
	((${#d} <= 64)) || die "DIR '$d' is too long: unix socket paths below it must stay < 108 bytes"
	printf '%s\n' "$d"
}

# pid_of DIR NAME prints the pid recorded at spawn of NAME (dockerd or containerd) if that process still
# runs the expected program for this DIR (guards against pid reuse).
pid_of() {
	local dir=$1 name=$2 pid exe
	pid=$(cat "$dir/$name.spawned" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	[[ ${exe##*/} == "$name" || ${exe##*/} == "$name (deleted)" ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/" || return 1
	printf '%s\n' "$pid"
}

# shellcheck source=scripts/lib/proc.sh
source "$here/lib/proc.sh"

# cgroup_dirs NAME prints NAME's directory in every mounted cgroup hierarchy (v1 and v2).
cgroup_dirs() {
	local name=$1 mnt
	while read -r mnt; do
		[[ -d $mnt/$name ]] && printf '%s\n' "$mnt/$name"
	done < <(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts)
}

# kill_cgroup NAME kills every process left in cgroup NAME (and below) and removes its dirs.
# Only used for cgroups this engine created (its --cgroup-parent, its plugins' cgroups).
kill_cgroup() {
	local name=$1 d pid procs i
	[[ -n $name && $name != / ]] || return 0
	for ((i = 0; i < 20; i++)); do
		procs=""
		while read -r d; do
			procs+=$(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | tr '\n' ' ')
		done < <(cgroup_dirs "$name")
		[[ -n ${procs// /} ]] || break
		for pid in $procs; do kill -KILL "$pid" 2>/dev/null || true; done
		sleep 0.1
	done
	while read -r d; do
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
		[[ -d $d ]] && say "warning: cgroup $d could not be removed"
	done < <(cgroup_dirs "$name")
	return 0
}

# kill_shims DIR kills containerd shims that serve the containerd of DIR (left when dockerd and
# containerd were killed; they hold the containers of this engine only) and removes their
# sockets, which containerd 1.6 puts at /run/containerd/s/sha256(ADDRESS/NAMESPACE/ID).
kill_shims() {
	local dir=$1 p exe i ns id addr
	local -a argv
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		[[ ${exe##*/} == containerd-shim* ]] || continue
		mapfile -d '' -t argv <"$p/cmdline" 2>/dev/null || continue
		ns="" id="" addr=""
		for ((i = 0; i + 1 < ${#argv[@]}; i++)); do
			case ${argv[i]} in
			-namespace) ns=${argv[i + 1]} ;;
			-id) id=${argv[i + 1]} ;;
			-address) addr=${argv[i + 1]} ;;
			esac
		done
		[[ $addr == "$dir/containerd/containerd.sock" ]] || continue
		kill -KILL "${p#/proc/}" 2>/dev/null || true
		if [[ -n $ns && -n $id ]]; then
			rm -f "/run/containerd/s/$(printf '%s' "$addr/$ns/$id" | sha256sum | cut -c1-64)"
		fi
	done
}

# unmount_below DIR unmounts every mount point below DIR, deepest first, until none is left.
unmount_below() {
	local dir=$1 m i
	local -a mnts
	for ((i = 0; i < 5; i++)); do
		mapfile -t mnts < <(awk -v d="$dir/" 'index($5, d) == 1 {print length($5), $5}' /proc/self/mountinfo |
			sort -rn | cut -d' ' -f2- | uniq)
		((${#mnts[@]})) || return 0
		for m in "${mnts[@]}"; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done
	done
	awk -v d="$dir/" 'index($5, d) == 1 {print "dockerd.sh: warning: still mounted: " $5}' /proc/self/mountinfo >&2
}

# shut_down DIR stops the engine in DIR and everything it left running, unmounts what is mounted
# below DIR and removes its plugins' socket dirs; DIR itself stays.
shut_down() {
	local dir=$1 pid id
	local -a plugin_ids=()
	# Plugin ids before anything goes: their sockets and cgroups live outside DIR.
	for id in "$dir"/data/plugins/*/; do
		id=${id%/}
		id=${id##*/}
		[[ $id =~ ^[0-9a-f]{64}$ ]] && plugin_ids+=("$id")
	done
	if pid=$(pid_of "$dir" dockerd); then
		say "stopping dockerd (pid $pid)"
		stop_pid "$pid" "$STOP_TIMEOUT" "dockerd (pid $pid)"
	fi
	# Whatever dockerd did not stop (it was killed, or never came up): containers and plugins.
	[[ -s $dir/cgroup-parent ]] && kill_cgroup "$(cat "$dir/cgroup-parent")"
	for id in "${plugin_ids[@]}"; do kill_cgroup "$id"; done
	kill_shims "$dir"
	if pid=$(pid_of "$dir" containerd); then
		say "stopping containerd (pid $pid)"
		stop_pid "$pid" "$STOP_TIMEOUT" "containerd (pid $pid)"
	fi
	kill_shims "$dir"
	unmount_below "$dir"
	for id in "${plugin_ids[@]}"; do rm -rf "/run/docker/plugins/$id"; done
}

do_stop() {
	local dir=$1 name
	[[ -d $dir ]] || return 0
	if [[ ! -e $dir/$MARKER ]]; then
		say "warning: $dir was not made by dockerd.sh; not touching it"
		return 1
	fi
	shut_down "$dir"
	if [[ -s $dir/host-dirs ]]; then
		# Deepest first; only empty ones, and only those that did not exist before start.
		while read -r name; do
			rmdir "$name" 2>/dev/null || true
		done < <(sort -r "$dir/host-dirs")
	fi
	rm -rf --one-file-system "$dir" || die "could not remove $dir (still mounted: $(findmnt -rn -o TARGET | grep -F "$dir/" | head -3 | tr '\n' ' '))"
	say "stopped and removed $dir"
}

do_halt() {
	local dir=$1
	[[ -e $dir/$MARKER && -s $dir/engine ]] || die "$dir is not an engine of this script"
	shut_down "$dir"
	# What lives on the host's tmpfs on a real host (/run/docker, /run/containerd) and goes with a
	# reboot: the exec-root and containerd's state.
	rm -rf --one-file-system "$dir/x" "$dir/containerd/state" "$dir/containerd/containerd.sock" "$dir/docker.sock" "$dir/dockerd.pid"
	mkdir -p "$dir/containerd/state"
	say "halted $dir (data kept)"
}

write_containerd_config() {
	local dir=$1 c=$1/containerd
	mkdir -p "$c/root" "$c/state" "$c/opt"
	cat >"$c/config.toml" <<EOF
# containerd for the private dockerd in $dir only.
version = 2
root = "$c/root"
state = "$c/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$c/containerd.sock"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
EOF
}

# wait_for WHAT SECONDS PID CMD...: polls CMD until it succeeds; fails when PID exits or at the
# deadline.
wait_for() {
	local what=$1 secs=$2 pid=$3 i
	shift 3
	for ((i = 0; i < secs * 10; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || { say "$what exited while starting"; return 1; }
		sleep 0.1
	done
	say "$what did not answer within ${secs}s"
	return 1
}

docker_info() { DOCKER_HOST="unix://$1/docker.sock" docker info --format '{{.ServerVersion}}'; }

failed_start() {
	local dir=$1 f=dockerd.log
	# The log of whichever daemon failed: dockerd's once it was started, else containerd's.
	[[ -e $dir/$f ]] || f=containerd/containerd.log
	if [[ -s $dir/$f ]]; then
		say "last lines of $dir/$f:"
		tail -n 25 "$dir/$f" >&2
	fi
	do_stop "$dir" || true
}

# engine_bin ENGINE sets dockerd (its binary) and path (the PATH it runs with) for ENGINE.
engine_bin() {
	local bindir
	case ${ENGINE_BUILD[$1]-} in
	debian)
		dockerd=/usr/sbin/dockerd
		path=$SYS_PATH
		;;
	?*)
		bindir=$(bash "$here/engines.sh" bindir "$1") || die "$1 engine not built: run scripts/engines.sh install $1"
		dockerd=$bindir/dockerd
		# The new runc (and the engine's docker-proxy) come first for this engine only
		# (containerd's shims find runc on PATH, dockerd its docker-proxy).
		path=$bindir:$SYS_PATH
		;;
	*) die "unknown engine '$1' (want one of: ${ENGINE_NAMES[*]})" ;;
	esac
	[[ -x $dockerd ]] || die "$dockerd not found: run scripts/engines.sh install $1"
}

# cdi_feature DOCKERD: true when the engine resolves CDI devices only with the cdi feature on
# (Docker 25.0 to 28.1; 28.2 turned it on by default, 20.10 has no CDI). Read from the binary, not
# the engine table's CDI column: a version override (DOCKER28_VERSION=v28.1.1) may cross 28.2.
cdi_feature() {
	local v major minor
	v=$("$1" --version | sed -nE 's/^Docker version ([0-9]+)\.([0-9]+).*/\1 \2/p')
	read -r major minor <<<"$v"
	[[ -n $major ]] && ((major >= 25 && (major < 28 || (major == 28 && minor < 2))))
}

do_start() {
	local dir=$1 engine=$2 netns=$3 bridge=$4 dockerd path d
	shift 4
	engine_bin "$engine"
	[[ -z $bridge || -n $netns ]] || die "--bridge needs --netns: the default bridge and its iptables rules must not go into the host's namespace"
	command -v containerd >/dev/null || [[ -x /usr/bin/containerd ]] || die "containerd not found: run scripts/engines.sh"
	command -v docker >/dev/null || die "docker CLI not found on PATH"

	if [[ -e $dir ]]; then
		if pid_of "$dir" dockerd >/dev/null || pid_of "$dir" containerd >/dev/null; then
			die "an engine already runs in $dir (stop it first: $0 stop $dir)"
		fi
		if [[ -e $dir/$MARKER ]]; then
			do_stop "$dir"
		elif [[ -n $(ls -A "$dir") ]]; then
			die "$dir exists and is not empty"
		fi
	fi
	mkdir -p "$dir"
	chmod 0711 "$dir"
	: >"$dir/$MARKER"
	trap 'failed_start "$dir"' EXIT

	for d in "${HOST_DIRS[@]}"; do
		[[ -e $d ]] || printf '%s\n' "$d" >>"$dir/host-dirs"
	done
	printf '%s\n' "$engine" >"$dir/engine"
	if [[ -n $netns ]]; then
		[[ -e /run/netns/$netns ]] || die "network namespace $netns not found (/run/netns/$netns): create it first (ip netns add $netns)"
		printf '%s\n' "$netns" >"$dir/netns"
	fi
	[[ -z $bridge ]] || : >"$dir/bridge"
	# One cgroup parent per engine, so stop can find (and remove) everything its containers left.
	printf '/rmv-%s\n' "$(printf '%s' "$dir" | sha256sum | cut -c1-12)" >"$dir/cgroup-parent"
	# Never read the host's /etc/docker/daemon.json. Docker 20.10 also writes a trust key to
	# /etc/docker/key.json unless told otherwise (newer engines have no such key).
	if [[ ${ENGINE_BUILD[$engine]} == debian ]]; then
		printf '{"deprecated-key-path": "%s/key.json"}\n' "$dir" >"$dir/daemon.json"
	elif cdi_feature "$dockerd"; then
		printf '{"features": {"cdi": true}}\n' >"$dir/daemon.json"
	else
		printf '{}\n' >"$dir/daemon.json"
	fi
	write_containerd_config "$dir"
	: >"$dir/args"
	(($# == 0)) || printf '%s\0' "$@" >"$dir/args"
	launch "$dir"
	trap - EXIT
}

# launch DIR starts containerd and dockerd with DIR's recorded engine, network namespace and extra
# arguments, waits until dockerd answers and prints the export line.
launch() {
	local dir=$1 netns="" dockerd path pid cpid ver
	local -a pre=() args=() net=()
	engine_bin "$(cat "$dir/engine")"
	[[ -s $dir/netns ]] && netns=$(cat "$dir/netns")
	[[ -s $dir/args ]] && mapfile -d '' -t args <"$dir/args"
	if [[ -n $netns ]]; then
		[[ -e /run/netns/$netns ]] || die "network namespace $netns not found (/run/netns/$netns): create it first (ip netns add $netns)"
		# nsenter execs the daemon: the pid recorded below is the daemon's own.
		pre=(nsenter "--net=/run/netns/$netns")
	fi

	say "starting containerd for $dir"
	PATH=$path setsid "${pre[@]}" /usr/bin/containerd --config "$dir/containerd/config.toml" \
		</dev/null >>"$dir/containerd/containerd.log" 2>&1 &
	cpid=$!
	printf '%s\n' "$cpid" >"$dir/containerd.spawned"
	wait_for containerd 20 "$cpid" test -S "$dir/containerd/containerd.sock" || exit 1

	if [[ -e $dir/bridge ]]; then
		[[ -n $netns ]] || die "$dir has --bridge but no network namespace"
		# The engine's own defaults; the userland proxy must be there for published ports.
		PATH=$path command -v docker-proxy >/dev/null ||
			die "no docker-proxy on the PATH of this engine ($path): run scripts/engines.sh install $(cat "$dir/engine")"
	else
		net=(--iptables=false --ip6tables=false --ip-forward=false --ip-masq=false --bridge=none --userland-proxy=false)
	fi
	ver=$("$dockerd" --version)
	say "starting $ver for $dir"
	PATH=$path setsid "${pre[@]}" "$dockerd" \
		--config-file "$dir/daemon.json" \
		--data-root "$dir/data" \
		--exec-root "$dir/x" \
		--pidfile "$dir/dockerd.pid" \
		-H "unix://$dir/docker.sock" \
		--containerd "$dir/containerd/containerd.sock" \
		--cgroup-parent "$(cat "$dir/cgroup-parent")" \
		"${net[@]}" --shutdown-timeout 3 \
		"${args[@]}" </dev/null >>"$dir/dockerd.log" 2>&1 &
	pid=$!
	# Recorded at once (dockerd writes its --pidfile only later), so a failed start can be stopped.
	printf '%s\n' "$pid" >"$dir/dockerd.spawned"
	wait_for dockerd "$START_TIMEOUT" "$pid" docker_info "$dir" || exit 1
	printf 'export DOCKER_HOST=unix://%s/docker.sock\n' "$dir" >"$dir/env"
	say "ready after ${SECONDS}s: dockerd $(docker_info "$dir") (pid $pid) in $dir"
	cat "$dir/env"
}

do_boot() {
	local dir=$1
	[[ -e $dir/$MARKER && -s $dir/engine ]] || die "$dir is not an engine of this script"
	if pid_of "$dir" dockerd >/dev/null || pid_of "$dir" containerd >/dev/null; then
		die "an engine already runs in $dir (halt it first: $0 halt $dir)"
	fi
	# A boot that fails leaves the engine as a failed boot leaves a host: the caller looks at the
	# logs, then stops it.
	launch "$dir"
}

cmd=${1:-}
case $cmd in
start)
	(($# >= 2)) || usage
	dir=$(abs_dir "$2")
	engine=$ENGINE_OLDEST
	netns=""
	bridge=""
	shift 2
	if (($#)) && [[ $1 != -* ]]; then
		engine=$1
		shift
	fi
	if (($#)) && [[ $1 == --netns ]]; then
		(($# >= 2)) || usage
		netns=$2
		shift 2
	fi
	if (($#)) && [[ $1 == --bridge ]]; then
		bridge=1
		shift
	fi
	if (($#)); then
		[[ $1 == -- ]] || usage
		shift
	fi
	[[ $(id -u) -eq 0 ]] || die "needs root"
	do_start "$dir" "$engine" "$netns" "$bridge" "$@"
	;;
stop)
	(($# == 2)) || usage
	dir=$(abs_dir "$2")
	do_stop "$dir"
	;;
halt | boot)
	(($# == 2)) || usage
	[[ $(id -u) -eq 0 ]] || die "needs root"
	dir=$(abs_dir "$2")
	"do_$cmd" "$dir"
	;;
logs)
	(($# >= 2)) || usage
	dir=$(abs_dir "$2")
	case ${3:-dockerd} in
	dockerd) cat "$dir/dockerd.log" ;;
	containerd) cat "$dir/containerd/containerd.log" ;;
	*) usage ;;
	esac
	;;
*) usage ;;
esac
