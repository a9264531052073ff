#!/usr/bin/env bash
# mkimage.sh: import a tiny busybox image (sh, ip, ping, nc, ...) without any registry.
#
# Needs: Debian's busybox-static (/bin/busybox; scripts/engines.sh installs it), the docker CLI,
#   and DOCKER_HOST pointing at the daemon to import into (e.g. one from scripts/dockerd.sh).
# Leaves behind: the image ${IMAGE:-rdma-macvlan-test/busybox:latest} in that daemon; nothing
#   else (its temp dir is removed on exit). Idempotent: an existing image is kept.
#
# Usage: mkimage.sh [-f]    (-f: import again even if the image exists)
set -euo pipefail

IMAGE=${IMAGE:-rdma-macvlan-test/busybox:latest}
BUSYBOX=${BUSYBOX:-/bin/busybox}

say() { printf 'mkimage.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

force=""
case ${1:-} in
"") ;;
-f) force=1 ;;
*) die "usage: $0 [-f]" ;;
esac

[[ -n ${DOCKER_HOST:-} ]] || die "DOCKER_HOST is not set (source the env file of scripts/dockerd.sh)"
if [[ -z $force ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
	say "$IMAGE already present"
	exit 0
fi
[[ -x $BUSYBOX ]] || die "$BUSYBOX not found: apt-get install busybox-static (scripts/engines.sh)"
# A dynamically linked busybox would need its libraries in the image. grep reads the whole list:
# with -q it would stop at "sh", and busybox, still writing, would die of SIGPIPE, which pipefail
# takes for a failure (it did under load).
if ! "$BUSYBOX" --list | grep -x sh >/dev/null || ldd "$BUSYBOX" >/dev/null 2>&1; then
	die "$BUSYBOX is not a static busybox with sh"
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/rdma-macvlan-image.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/proc" "$root/sys" "$root/dev" "$root/root"
chmod 1777 "$root/tmp"
cp "$BUSYBOX" "$root/bin/busybox"
# Every applet as a symlink, except busybox itself: that link would replace the binary.
"$BUSYBOX" --list | while read -r applet; do
	[[ $applet == busybox || -e $root/bin/$applet ]] || ln -s busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' >"$root/etc/group"

tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
	docker import -c 'CMD ["/bin/sh"]' -c 'ENV PATH=/bin' - "$IMAGE" >/dev/null
say "imported $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE") bytes)"
