#!/bin/sh
# build.sh: the release binaries of one architecture, checked static, and the licences of what
# they link. scripts/release.sh runs it with the host's Go; the Dockerfile runs it in a Go image,
# so that a host with Docker and no Go builds the same files (make release BUILD=docker).
#
# POSIX sh (the Go image may have no bash). Needs: go, and the modules (the Go proxy, GOPROXY, or
# the module cache).
# Leaves behind: in OUT, rdma-macvlan-linux-ARCH, docker-rdma-linux-ARCH, rdma-exec-linux-ARCH,
#   rdma-macvlan-runtime-linux-ARCH, and licenses/ (LICENSE, NOTICE and, under MODULE/, each
#   linked Go module's licence and notice files as the module ships them).
#
# Usage: scripts/build.sh OUT
# Environment: GOARCH (default amd64), VERSION (default dev), COMMIT (default unknown), GO (go).
# The same commit, VERSION, COMMIT and Go version give the same bytes (-trimpath, no VCS stamp).
set -eu
cd "$(dirname "$0")/.."
out=${1:?usage: build.sh OUT}
arch=${GOARCH:-amd64}
go=${GO:-go}
pkg=github.com/rdma-macvlan/rdma-macvlan/internal/version
ld="-s -w -X $pkg.version=${VERSION:-dev} -X $pkg.commit=${COMMIT:-unknown}"
die() { echo "build.sh: error: $*" >&2; exit 1; }

mkdir -p "$out"
bins=""
for c in rdma-macvlan docker-rdma rdma-exec rdma-macvlan-runtime; do
	echo "build.sh: building $c for linux/$arch (${VERSION:-dev})" >&2
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$go" build -trimpath -buildvcs=false -ldflags "$ld" \
		-o "$out/$c-linux-$arch" "./cmd/$c"
	bins="$bins $out/$c-linux-$arch"
done
# shellcheck disable=SC2086 # a list of paths without spaces
env -u GOARCH -u GOOS "$go" run ./tools/elfcheck -arch "$arch" $bins >&2 || die "a linux/$arch binary is not a static $arch executable"

# Licences: this project's, then each linked module's (their build information lists them).
lic=$out/licenses
mkdir -p "$lic"
cp LICENSE NOTICE "$lic/"
# shellcheck disable=SC2086
"$go" version -m $bins | awk '$1 == "dep" {print $2}' | sort -u | while read -r m; do
	dir=$("$go" list -m -f '{{.Dir}}' "$m") || die "module $m: not downloaded"
	n=0
	for f in "$dir"/LICENSE* "$dir"/LICENCE* "$dir"/COPYING* "$dir"/NOTICE*; do
		[ -f "$f" ] || continue
		mkdir -p "$lic/$m"
		cp "$f" "$lic/$m/"
		case ${f##*/} in NOTICE*) ;; *) n=$((n + 1)) ;; esac
	done
	[ "$n" -gt 0 ] || die "module $m is linked but has no licence file in $dir"
done
