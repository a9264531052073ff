#!/usr/bin/env bash
# engines.sh: make the Docker engines the end-to-end tests run against available on this machine.
#
# Needs: root, Debian 12 with apt, Go (go on PATH), the Debian archive and the Go module proxy.
# Leaves behind (on purpose, so the next run is fast):
#   - Debian packages: docker.io (Docker 20.10, with containerd and runc), busybox-static,
#     iproute2, docker-compose (1.29, the compose client of test/e2e/e2e-diff.sh); for the
#     current engine also containerd, libseccomp-dev, pkg-config, gcc. Nothing is started; when
#     the host has no /usr/sbin/policy-rc.d, one denying service starts exists only while apt
#     runs.
#   - the engines built from source (scripts/lib/engines.sh, generated from the table of
#     internal/engines/engines.go, names them, their modules and versions): dockerd, its
#     docker-proxy and a seccomp-enabled runc built from the Go module proxy, in
#     $RDMA_MACVLAN_ENGINES_DIR/{moby,docker}-<version>-runc-<version>/bin (default
#     /var/cache/rdma-macvlan/engines), plus Go's own module and build caches. A moby v2 engine
#     ("current") is a module with go.mod (go install); a Docker release up to 28 ("v28", "v27")
#     is github.com/docker/docker, a module without go.mod: its source comes from the Go module
#     proxy and is built with its own vendor.mod as go.mod, every dependency at the version that
#     file pins, also from the proxy. They run on Debian's containerd. The new runc is only ever
#     put on the PATH of the engines built here (scripts/dockerd.sh does that); Debian's engine
#     keeps Debian's runc. The default install is the oldest and the newest engine; name others
#     (`engines.sh install v28 v27`, or `all`).
#   - "compose": Compose v2, the docker CLI plugin, built from its Go module's source
#     (github.com/docker/compose/v2 from the module proxy, as for v28 and v27) into
#     $RDMA_MACVLAN_ENGINES_DIR/compose-<version>/docker-compose; test/e2e/e2e-compose.sh puts it
#     in a private CLI plugins dir. Not part of the default install: name it.
#
# Usage:
#   engines.sh [install] [ENGINE...] [compose] [all]
#                                      install the oldest and the newest engine (debian and
#                                      current; the default), the ones named, or every engine and
#                                      compose
#   engines.sh bindir [ENGINE]         print a built engine's bin dir (dockerd, runc,
#                                      docker-proxy; default the newest); fails when dockerd or
#                                      runc is not built yet
#   engines.sh compose                 print the path of the built docker-compose; fails when it is
#                                      not built yet
# Environment:
#   RDMA_MACVLAN_ENGINES_DIR  cache root        (default /var/cache/rdma-macvlan/engines)
#   MOBY_VERSION, DOCKER28_VERSION, ...
#                             an engine's version (the table's VersionEnv; default its Version:
#                             the newest moby v2 the proxy served, the last 28.x and 27.x)
#   RUNC_VERSION              runc version      (default v1.5.2)
#   COMPOSE_VERSION           Compose v2        (default v2.40.3: its docker client negotiates
#                                                down to Docker 20.10's API 1.41 and up to moby
#                                                v2's)
#
# Idempotent: a warm run only checks that everything is in place and takes seconds.
set -euo pipefail

# shellcheck source=scripts/lib/engines.sh
. "$(dirname "$0")/lib/engines.sh"
ENGINES_DIR=${RDMA_MACVLAN_ENGINES_DIR:-/var/cache/rdma-macvlan/engines}
RUNC_VERSION=${RUNC_VERSION:-v1.5.2}
COMPOSE_VERSION=${COMPOSE_VERSION:-v2.40.3}
BIN_DIR=""

# built ENGINE: ENGINE is one of the table's engines built from source.
built() { [[ -n ${ENGINE_BUILD[$1]+x} && ${ENGINE_BUILD[$1]} != debian ]]; }

# version_of ENGINE prints the version of ENGINE to build: its variable's, or the table's.
version_of() {
	local env=${ENGINE_VERSION_ENV[$1]}
	printf '%s\n' "${!env:-${ENGINE_VERSION[$1]}}"
}

# bin_dir ENGINE prints the cache dir of a built engine's binaries (or of compose).
bin_dir() {
	if [[ $1 == compose ]]; then
		printf '%s\n' "$ENGINES_DIR/compose-$COMPOSE_VERSION"
		return
	fi
	built "$1" || die "unknown built engine '$1' (want one of: $(built_names))"
	case ${ENGINE_BUILD[$1]} in
	moby-source) printf '%s\n' "$ENGINES_DIR/moby-$(version_of "$1")-runc-$RUNC_VERSION/bin" ;;
	docker-source) printf '%s\n' "$ENGINES_DIR/docker-$(version_of "$1")-runc-$RUNC_VERSION/bin" ;;
	esac
}

# built_names prints the engines built from source.
built_names() {
	local e out=()
	for e in "${ENGINE_NAMES[@]}"; do built "$e" && out+=("$e"); done
	printf '%s\n' "${out[*]}"
}

# Debian's engine; busybox-static for the test image; iproute2 for the test links; Debian's
# compose client (1.29.2 on Debian 12) for the compose scenario of test/e2e/e2e-diff.sh.
DEBIAN_PACKAGES=(docker.io busybox-static iproute2 docker-compose)
# The current engine runs on Debian's containerd; runc needs libseccomp and cgo to build.
CURRENT_PACKAGES=(containerd busybox-static iproute2 libseccomp-dev pkg-config gcc)

start_s=$SECONDS
say() { printf 'engines: [%4ds] %s\n' "$((SECONDS - start_s))" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# Cleanup state: what this run created and must remove on exit, whatever happens.
cleanup_policy=""
tmp_dir=""
heartbeat_pid=""
cleanup() {
	local rc=$?
	if [[ -n $heartbeat_pid ]]; then
		kill "$heartbeat_pid" 2>/dev/null || true
		wait "$heartbeat_pid" 2>/dev/null || true
	fi
	[[ -n $cleanup_policy ]] && rm -f "$cleanup_policy"
	[[ -n $tmp_dir ]] && rm -rf "$tmp_dir"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

missing_packages() {
	local p status
	for p in "$@"; do
		status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
		[[ $status == "install ok installed" ]] || printf '%s\n' "$p"
	done
}

apt_updated=""
apt_install() {
	local missing
	mapfile -t missing < <(missing_packages "$@")
	if ((${#missing[@]} == 0)); then
		say "apt packages present: $*"
		return 0
	fi
	[[ $(id -u) -eq 0 ]] || die "installing ${missing[*]} needs root"
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		# Keep the host's default Docker service from being started by the package's postinst.
		cleanup_policy=/usr/sbin/policy-rc.d
		printf '#!/bin/sh\nexit 101\n' >"$cleanup_policy"
		chmod 0755 "$cleanup_policy"
	fi
	export DEBIAN_FRONTEND=noninteractive
	if [[ -z $apt_updated ]]; then
		say "apt-get update"
		apt-get update -qq
		apt_updated=1
	fi
	say "apt-get install ${missing[*]}"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	if [[ -n $cleanup_policy ]]; then
		rm -f "$cleanup_policy"
		cleanup_policy=""
	fi
}

# heartbeat prints a line every minute while a long step runs, so CI logs show progress.
start_heartbeat() {
	local what=$1
	(
		while sleep 60; do say "still $what"; done
	) &
	heartbeat_pid=$!
}
stop_heartbeat() {
	kill "$heartbeat_pid" 2>/dev/null || true
	wait "$heartbeat_pid" 2>/dev/null || true
	heartbeat_pid=""
}

# go_build installs MODULE@VERSION's command into BIN_DIR as NAME, atomically.
go_build() {
	local name=$1 pkg=$2 version=$3
	shift 3
	command -v go >/dev/null || die "go is not on PATH (needed to build $name $version)"
	tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/rdma-macvlan-engines.XXXXXX")
	say "building $name from $pkg@$version (cold: several minutes on 2 cores)"
	start_heartbeat "building $name"
	# Build outside any module so the project's go.mod plays no part; GOTOOLCHAIN=local keeps the
	# installed Go instead of fetching another one.
	# The long list of "go: downloading" lines is left out of the log; errors still show.
	local rc=0
	(cd "$tmp_dir" && GOBIN="$tmp_dir/bin" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
		go install "$@" "$pkg@$version" 2>&1) | { grep -v '^go: downloading ' >&2 || true; }
	rc=${PIPESTATUS[0]}
	stop_heartbeat
	((rc == 0)) || die "go install $pkg@$version failed (exit $rc)"
	mkdir -p "$BIN_DIR"
	install -m 0755 "$tmp_dir/bin/$name" "$BIN_DIR/.$name.new"
	mv -f "$BIN_DIR/.$name.new" "$BIN_DIR/$name"
	rm -rf "$tmp_dir"
	tmp_dir=""
	say "built $BIN_DIR/$name"
}

install_debian() {
	apt_install "${DEBIAN_PACKAGES[@]}"
	[[ -x /usr/sbin/dockerd ]] || die "/usr/sbin/dockerd missing after installing docker.io"
	say "debian engine: $(/usr/sbin/dockerd --version)"
}

# build_dockerd_v1 VERSION: dockerd and docker-proxy of github.com/docker/docker@VERSION+incompatible
# into BIN_DIR. Docker up to 28 has no go.mod (the proxy serves it as "+incompatible", without
# its vendor/ tree); its vendor.mod and vendor.sum pin every dependency. So: the source from the
# proxy (go mod download), vendor.mod and vendor.sum as go.mod and go.sum in a copy, and a build
# in module mode that fetches exactly those versions from the proxy.
build_dockerd_v1() {
	local version=$1 mod=github.com/docker/docker src rc=0
	local v=$mod/dockerversion
	command -v go >/dev/null || die "go is not on PATH (needed to build dockerd $version)"
	tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/rdma-macvlan-engines.XXXXXX")
	say "fetching $mod@$version+incompatible from the module proxy"
	src=$(cd "$tmp_dir" && GOTOOLCHAIN=local go mod download -json "$mod@$version+incompatible" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || true
	[[ -n $src && -f $src/vendor.mod ]] || die "go mod download $mod@$version+incompatible gave no source with a vendor.mod"
	cp -r "$src" "$tmp_dir/src"
	chmod -R u+w "$tmp_dir/src"
	rm -rf "$tmp_dir/src/vendor"
	cp "$tmp_dir/src/vendor.mod" "$tmp_dir/src/go.mod"
	cp "$tmp_dir/src/vendor.sum" "$tmp_dir/src/go.sum"
	say "building dockerd and docker-proxy $version (cold: ten minutes or more on 2 cores)"
	start_heartbeat "building dockerd $version"
	(cd "$tmp_dir/src" && GOTOOLCHAIN=local GOFLAGS='-mod=mod -buildvcs=false' go build -o "$tmp_dir/bin/" \
		-ldflags "-X $v.Version=${version#v} -X $v.GitCommit=$version -X $v.PlatformName=rdma-macvlan-test" \
		./cmd/dockerd ./cmd/docker-proxy 2>&1) | { grep -v '^go: downloading ' >&2 || true; }
	rc=${PIPESTATUS[0]}
	stop_heartbeat
	((rc == 0)) || die "building dockerd $version from $mod@$version+incompatible failed (exit $rc)"
	mkdir -p "$BIN_DIR"
	for n in docker-proxy dockerd; do
		install -m 0755 "$tmp_dir/bin/$n" "$BIN_DIR/.$n.new"
		mv -f "$BIN_DIR/.$n.new" "$BIN_DIR/$n"
	done
	rm -rf "$tmp_dir"
	tmp_dir=""
	say "built $BIN_DIR/dockerd and docker-proxy"
}

# built_engine ENGINE: runc, dockerd and docker-proxy of ENGINE in its cache dir, built when
# missing. One builder at a time per engine (a lock of its own, so that a run that wants an engine
# already built does not wait on the build of another); a second run waits and then finds them built.
built_engine() {
	local e=$1 v
	apt_install "${CURRENT_PACKAGES[@]}"
	BIN_DIR=$(bin_dir "$e")
	mkdir -p "$ENGINES_DIR"
	exec 9>"$ENGINES_DIR/.lock-$e"
	flock 9
	if [[ ! -x $BIN_DIR/runc ]]; then
		go_build runc github.com/opencontainers/runc "$RUNC_VERSION" -tags seccomp
	fi
	case ${ENGINE_BUILD[$e]} in
	moby-source)
		local mod=${ENGINE_MODULE[$e]} version
		version=$(version_of "$e")
		v=$mod/dockerversion
		if [[ ! -x $BIN_DIR/dockerd ]]; then
			# Stamp the version as moby's release builds do, so `docker version` names it.
			go_build dockerd "$mod/cmd/dockerd" "$version" \
				-ldflags "-X $v.Version=${version#v} -X $v.GitCommit=$version -X $v.PlatformName=rdma-macvlan-test"
		fi
		# The userland proxy of published ports (test/e2e/e2e-bridge.sh runs the default bridge).
		if [[ ! -x $BIN_DIR/docker-proxy ]]; then
			go_build docker-proxy "$mod/cmd/docker-proxy" "$version"
		fi
		;;
	docker-source)
		[[ -x $BIN_DIR/dockerd && -x $BIN_DIR/docker-proxy ]] || build_dockerd_v1 "$(version_of "$e")"
		;;
	esac
	flock -u 9
	exec 9>&-
	"$BIN_DIR/runc" --version | grep seccomp >/dev/null || die "$BIN_DIR/runc was built without seccomp"
	say "$e engine: $("$BIN_DIR/dockerd" --version), runc $("$BIN_DIR/runc" --version | awk 'NR==1{print $3}') in $BIN_DIR"
}

# build_compose: docker-compose of github.com/docker/compose/v2@COMPOSE_VERSION into BIN_DIR. Its
# go.mod has exclude directives, which go install MODULE@VERSION refuses: the source comes from the
# module proxy (go mod download) and is built as the main module, every dependency at the version
# its go.mod and go.sum pin, also from the proxy; the version is stamped as compose's Makefile does.
build_compose() {
	local mod=github.com/docker/compose/v2 src rc=0
	command -v go >/dev/null || die "go is not on PATH (needed to build compose $COMPOSE_VERSION)"
	tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/rdma-macvlan-engines.XXXXXX")
	say "fetching $mod@$COMPOSE_VERSION from the module proxy"
	src=$(cd "$tmp_dir" && GOTOOLCHAIN=local go mod download -json "$mod@$COMPOSE_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || true
	[[ -n $src && -f $src/go.mod ]] || die "go mod download $mod@$COMPOSE_VERSION gave no source with a go.mod"
	cp -r "$src" "$tmp_dir/src"
	chmod -R u+w "$tmp_dir/src"
	say "building docker-compose $COMPOSE_VERSION (cold: several minutes on 2 cores)"
	start_heartbeat "building docker-compose $COMPOSE_VERSION"
	(cd "$tmp_dir/src" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS='-mod=mod -buildvcs=false' go build -trimpath \
		-ldflags "-s -w -X $mod/internal.Version=$COMPOSE_VERSION" -o "$tmp_dir/bin/docker-compose" ./cmd 2>&1) |
		{ grep -v '^go: downloading ' >&2 || true; }
	rc=${PIPESTATUS[0]}
	stop_heartbeat
	((rc == 0)) || die "building docker-compose from $mod@$COMPOSE_VERSION failed (exit $rc)"
	mkdir -p "$BIN_DIR"
	install -m 0755 "$tmp_dir/bin/docker-compose" "$BIN_DIR/.docker-compose.new"
	mv -f "$BIN_DIR/.docker-compose.new" "$BIN_DIR/docker-compose"
	rm -rf "$tmp_dir"
	tmp_dir=""
	say "built $BIN_DIR/docker-compose"
}

# built_compose: Compose v2's docker-compose in its cache dir, built when missing (one builder at a
# time, as for the engines).
built_compose() {
	BIN_DIR=$(bin_dir compose)
	mkdir -p "$ENGINES_DIR"
	exec 9>"$ENGINES_DIR/.lock-compose"
	flock 9
	[[ -x $BIN_DIR/docker-compose ]] || build_compose
	flock -u 9
	exec 9>&-
	say "compose: $("$BIN_DIR/docker-compose" version) in $BIN_DIR"
}

cmd=${1:-install}
case $cmd in
bindir)
	e=${2:-$ENGINE_NEWEST}
	BIN_DIR=$(bin_dir "$e")
	[[ -x $BIN_DIR/dockerd && -x $BIN_DIR/runc ]] ||
		die "$e engine not built in $BIN_DIR (run scripts/engines.sh install $e)"
	printf '%s\n' "$BIN_DIR"
	;;
compose)
	BIN_DIR=$(bin_dir compose)
	[[ -x $BIN_DIR/docker-compose ]] || die "compose not built in $BIN_DIR (run scripts/engines.sh install compose)"
	printf '%s\n' "$BIN_DIR/docker-compose"
	;;
install)
	shift || true
	engines=("$@")
	((${#engines[@]})) || engines=("$ENGINE_OLDEST" "$ENGINE_NEWEST")
	[[ " ${engines[*]} " != *" all "* ]] || engines=("${ENGINE_NAMES[@]}" compose)
	for e in "${engines[@]}"; do
		if [[ $e == compose ]]; then
			built_compose
		elif [[ ${ENGINE_BUILD[$e]-} == debian ]]; then
			install_debian
		elif built "$e"; then
			built_engine "$e"
		else
			die "unknown engine '$e' (want: ${ENGINE_NAMES[*]}, compose, all)"
		fi
	done
	say "done"
	;;
-h | --help | help)
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
	;;
*)
	die "unknown command '$cmd' (want: install [${ENGINE_NAMES[*]}] [compose] [all], bindir [ENGINE], compose, help)"
	;;
esac
