#!/usr/bin/env bash
# docker-build.sh: scripts/build.sh run by the Dockerfile, in a Go image, for a host with Docker and
# no Go; the files it builds copied out into OUT. The image and container it makes are removed.
#
# Needs: the docker CLI and an engine (DOCKER_HOST) that has or can pull GO_IMAGE.
# Usage: scripts/docker-build.sh [--bin] OUT   (--bin: the four binaries only, each under its own
#   name, as `make build` leaves them in build/bin; else NAME-linux-ARCH and licenses/)
# Environment: GOARCH (default the host's: amd64 or arm64), VERSION, COMMIT; GO_IMAGE (default the Dockerfile's);
#   GOPROXY, GOSUMDB, GOFLAGS passed to the build when set.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=""
if [[ ${1:-} == --bin ]]; then bin=1; shift; fi
out=${1:?usage: docker-build.sh [--bin] OUT}
say() { printf 'docker-build.sh: %s\n' "$*" >&2; }

if [[ -z ${GOARCH:-} ]]; then
	case $(uname -m) in
	x86_64) GOARCH=amd64 ;;
	aarch64) GOARCH=arm64 ;;
	*) printf 'docker-build.sh: error: no build for %s: set GOARCH (amd64 or arm64)\n' "$(uname -m)" >&2; exit 1 ;;
	esac
fi
args=(--build-arg "GOARCH=$GOARCH" --build-arg "VERSION=${VERSION:-dev}" --build-arg "COMMIT=${COMMIT:-unknown}")
for v in GO_IMAGE GOPROXY GOSUMDB GOFLAGS; do
	[[ -z ${!v:-} ]] || args+=(--build-arg "$v=${!v}")
done
tag=rdma-macvlan-build:$$-$RANDOM
cid=""
cleanup() {
	[[ -z $cid ]] || docker rm -f "$cid" >/dev/null 2>&1 || true
	docker rmi -f "$tag" >/dev/null 2>&1 || true
}
trap cleanup EXIT
say "docker build for linux/$GOARCH (Go image: ${GO_IMAGE:-the default of the Dockerfile})"
docker build "${args[@]}" -t "$tag" "$repo" >&2
# The image has no command (FROM scratch): one is named only so that it can be created.
cid=$(docker create "$tag" /none)
mkdir -p "$out"
for f in rdma-macvlan docker-rdma rdma-exec rdma-macvlan-runtime; do
	docker cp "$cid:/$f-linux-$GOARCH" "$out/${bin:+$f}"
done
if [[ -n $bin ]]; then
	say "copied out into $out"
	exit 0
fi
rm -rf "$out/licenses"
docker cp "$cid:/licenses" "$out/licenses"
say "copied out into $out"
