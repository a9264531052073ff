#!/usr/bin/env bash
# release.sh: build a release of rdma-macvlan for linux/amd64 and linux/arm64 and, with a registry,
# push the managed plugin to it. `make release` runs it.
#
# Needs: Go (cross-compiles; no cgo, no C toolchain), or Docker alone (BUILD=docker); with REGISTRY also the docker CLI and a daemon
#   at DOCKER_HOST (or the default one) that can create plugins from a directory (any Linux engine
#   the README lists; it need not run on the target architecture: the plugins are only created,
#   pushed and removed there, never enabled) and may push to the registry (`docker login` first
#   where the registry wants it).
# Leaves behind: build/release/ (replaced on every run):
#     plugin-linux-amd64/, plugin-linux-arm64/   the managed plugin (config.json, rootfs/) per arch;
#                                                the rootfs has the daemon /rdma-macvlan, and the CLI
#                                                plugin, its helper and the OCI runtime of that arch
#                                                in /cli-plugins/
#     rdma-macvlan-linux-ARCH                    the daemon (legacy mode: run on the host)
#     docker-rdma-linux-ARCH                     the docker rdma CLI plugin
#     rdma-exec-linux-ARCH                       its helper (docker rdma run puts it in containers)
#     rdma-macvlan-runtime-linux-ARCH            the OCI runtime (docker rdma runtime install)
#     licenses/                                  LICENSE, NOTICE and each linked Go module's licence
#                                                and notice files (also in each plugin's rootfs)
#     SHA256SUMS                                 sha256sum of every binary above
#     VERSION                                    the version, and the plugin references pushed
#   With REGISTRY, the plugin references below in the registry; nothing in the daemon (each
#   reference is created, pushed and removed).
#
# Plugin references (docker plugin push has no multi-architecture index: one reference per arch):
#     REPO:VERSION          linux/amd64
#     REPO:VERSION-amd64    linux/amd64 (the same plugin)
#     REPO:VERSION-arm64    linux/arm64
#   REPO is REGISTRY/rdma-macvlan, or REPO when given.
#
# Usage: release.sh
# Environment:
#   VERSION    the release version (default: git describe --tags --always --dirty); a Docker tag:
#              letters, digits, '_', '.', '-', at most 122 characters
#   REGISTRY   host[:port]/path to push to; empty: build only
#   REPO       the plugin's repository instead of REGISTRY/rdma-macvlan
#   COMMIT     the commit built in (default: git rev-parse HEAD)
#   OUT        output directory (default build/release of the repo)
#   GO         go (default go)
#   BUILD      go (scripts/build.sh with GO) or docker (scripts/docker-build.sh: the Dockerfile, in
#              GO_IMAGE); default go when GO is found, else docker
#   RELEASE_ARCHES  the architectures to build (default "amd64 arm64"; a push needs both)
#   GO_IMAGE   with BUILD=docker, the Go image (default the Dockerfile's, golang:1.26.8)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
OUT=${OUT:-$repo/build/release}
VERSION=${VERSION:-$(git -C "$repo" describe --tags --always --dirty 2>/dev/null || echo dev)}
REGISTRY=${REGISTRY:-}
REPO=${REPO:-${REGISTRY:+${REGISTRY%/}/rdma-macvlan}}
read -r -a ARCHES <<<"${RELEASE_ARCHES:-amd64 arm64}"
COMMIT=${COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)}

say() { printf 'release.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $VERSION =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,121}$ ]] ||
	die "VERSION '$VERSION' is not a Docker tag (letters, digits, _ . -; at most 122 characters, leaving room for -arm64)"
if [[ -n $REPO ]]; then
	# A repository name: lower case path components, an optional host[:port] first; no tag.
	[[ $REPO =~ ^([A-Za-z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$ ]] ||
		die "REPO '$REPO' is not a repository name (host[:port]/path, lower case, no tag)"
	command -v docker >/dev/null || die "pushing needs the docker CLI and a daemon (DOCKER_HOST)"
	docker version -f '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker daemon answers (DOCKER_HOST=${DOCKER_HOST:-unset}): pushing creates the plugin in one"
fi

# The binaries a release has: the daemon, docker rdma, its helper rdma-exec and the OCI runtime.
cmds=(rdma-macvlan docker-rdma rdma-exec rdma-macvlan-runtime)

# How they are built: scripts/build.sh with the host's Go, or in a Go image by the Dockerfile when
# the host has no Go (or BUILD=docker); the same commit and Go version give the same bytes.
BUILD=${BUILD:-$(command -v "$GO" >/dev/null && echo go || echo docker)}
case $BUILD in
go) ;;
docker)
	command -v docker >/dev/null || die "BUILD=docker: no docker CLI (and no $GO): install Go or Docker"
	docker version -f '{{.Server.Version}}' >/dev/null 2>&1 || die "BUILD=docker: no Docker daemon answers (DOCKER_HOST=${DOCKER_HOST:-unset})"
	;;
*) die "BUILD=$BUILD: want go or docker" ;;
esac

rm -rf "$OUT"
mkdir -p "$OUT"
for arch in "${ARCHES[@]}"; do
	say "building linux/$arch ($VERSION) with $BUILD"
	if [[ $BUILD == go ]]; then
		GO=$GO GOARCH=$arch VERSION=$VERSION COMMIT=$COMMIT sh "$repo/scripts/build.sh" "$OUT/$arch"
	else
		GOARCH=$arch VERSION=$VERSION COMMIT=$COMMIT bash "$repo/scripts/docker-build.sh" "$OUT/$arch"
	fi
	for c in "${cmds[@]}"; do mv "$OUT/$arch/$c-linux-$arch" "$OUT/"; done

	# The managed plugin: scripts/plugin.sh lays out the rootfs around the prebuilt daemon; the CLI
	# side rides along so that a host with only the plugin can install it (README: Install).
	pdir=$OUT/plugin-linux-$arch
	PLUGIN_DIR=$pdir PLUGIN_BINARY=$OUT/rdma-macvlan-linux-$arch bash "$repo/scripts/plugin.sh" build
	mkdir -p "$pdir/rootfs/cli-plugins"
	for c in "${cmds[@]}"; do
		[[ $c == rdma-macvlan ]] || install -m 0755 "$OUT/$c-linux-$arch" "$pdir/rootfs/cli-plugins/$c"
	done
	cp -r "$OUT/$arch/licenses" "$pdir/rootfs/licenses"
	rm -rf "$OUT/licenses"
	mv "$OUT/$arch/licenses" "$OUT/licenses" # the same modules for every architecture
	rmdir "$OUT/$arch"
done
sums=()
for c in "${cmds[@]}"; do for arch in "${ARCHES[@]}"; do sums+=("$c-linux-$arch"); done; done
(cd "$OUT" && sha256sum -- "${sums[@]}" >SHA256SUMS)
printf '%s\n' "$VERSION" >"$OUT/VERSION"
say "built $OUT ($(du -sh "$OUT" | cut -f1)):"
sed 's/^/  /' "$OUT/SHA256SUMS" >&2

[[ -n $REPO ]] || { say "no REGISTRY: nothing pushed"; exit 0; }
[[ " ${ARCHES[*]} " == *" amd64 "* && " ${ARCHES[*]} " == *" arm64 "* ]] || die "a push needs amd64 and arm64 (RELEASE_ARCHES=${ARCHES[*]})"

# push REF DIR: create REF from DIR in the daemon, push it, remove it again. A reference the daemon
# has already is not ours to replace.
created=""
cleanup() { [[ -z $created ]] || docker plugin rm -f "$created" >/dev/null 2>&1 || true; }
trap cleanup EXIT
push() {
	local ref=$1 dir=$2
	docker plugin inspect "$ref" >/dev/null 2>&1 &&
		die "the daemon has a plugin $ref already: remove it (docker plugin rm $ref) or pick another VERSION"
	docker plugin create "$ref" "$dir" >/dev/null
	created=$ref
	say "pushing $ref"
	docker plugin push "$ref" >&2
	docker plugin rm "$ref" >/dev/null
	created=""
	printf '%s\n' "$ref" >>"$OUT/VERSION"
}
push "$REPO:$VERSION" "$OUT/plugin-linux-amd64"
for arch in "${ARCHES[@]}"; do
	push "$REPO:$VERSION-$arch" "$OUT/plugin-linux-$arch"
done
say "pushed $REPO:$VERSION (amd64), $REPO:$VERSION-amd64, $REPO:$VERSION-arm64"
