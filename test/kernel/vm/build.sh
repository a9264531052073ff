#!/usr/bin/env bash
# Builds (once) and caches the kernel and base initramfs of the Soft-RoCE test
# VM: Debian's linux-image-6.1 (downloaded and unpacked, never installed on
# this host) and a trimmed debootstrap minbase bookworm with rdma-core,
# iproute2 and the kernel modules the tests load (rdma_rxe and its
# undeclared crc32_generic, ib_uverbs, rdma_ucm, ib_umad, macvlan, veth,
# dummy, 8021q, overlay; bonding and bridge on demand), with Debian's Docker 20.10 (docker.io, containerd,
# runc) and python3-pyverbs for the engine tests, packed as a zstd cpio padded to 4 bytes so run.sh can append
# a second cpio.
#
# Needs: root, apt with Debian's archive. Installs qemu-system-x86,
# debootstrap, zstd, cpio, kmod and dpkg when missing (apt only).
# Leaves: <cache>/<key>/{vmlinuz,initrd.base,manifest.txt} (and the host
# packages above); nothing on failure. The key hashes the package versions
# and this recipe, so a new kernel or rdma-core builds a new entry; older
# entries stay until removed (see --prune).
#
# Usage: build.sh [--print-dir] [--prune] [--force]
#   --print-dir  print only the cache entry's directory on stdout (run.sh)
#   --prune      remove cache entries other than the current one
#   --force      rebuild even if the entry exists
# Env: RDMA_MACVLAN_VM_CACHE (default /var/cache/rdma-macvlan/vm),
#      RDMA_MACVLAN_VM_MIRROR (default: the Debian mirror apt uses),
#      RDMA_MACVLAN_VM_KERNEL (default: what linux-image-amd64 depends on,
#      a linux-image-6.1.*-amd64 package).
set -euo pipefail

print_dir=0 prune=0 force=0
for a in "$@"; do
  case "$a" in
    --print-dir) print_dir=1 ;;
    --prune) prune=1 ;;
    --force) force=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument $a (see --help)" >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
cache=${RDMA_MACVLAN_VM_CACHE:-/var/cache/rdma-macvlan/vm}
suite=bookworm
t0=$SECONDS

say() { echo "vm-build: [$((SECONDS - t0))s] $*" >&2; }
die() { echo "vm-build: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, device nodes in the image)"

# Packages of the guest and the modules its tests load.
guest_pkgs=(iproute2 rdma-core ibverbs-providers ibverbs-utils rdmacm-utils kmod busybox procps util-linux
  docker.io containerd runc iptables ca-certificates python3-pyverbs perftest curl)
modules=(rdma_rxe crc32_generic ib_core ib_uverbs rdma_ucm ib_umad macvlan veth dummy 8021q overlay)
# In the image but not loaded: the kernel loads them on demand, as on a
# Debian host (netlink.NewHandle opens NETLINK_XFRM and NETLINK_NETFILTER
# sockets).
# bonding and bridge: the bond and bridge-port checks load them themselves.
autoload=(xfrm_user nfnetlink bonding bridge)

# Host tools, installed through apt only when missing.
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v zstd >/dev/null || need+=(zstd)
command -v cpio >/dev/null || need+=(cpio)
command -v depmod >/dev/null || need+=(kmod)
command -v dpkg-deb >/dev/null || need+=(dpkg)
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
apt_updated=0
apt_update() {
  if [ "$apt_updated" = 0 ]; then
    say "apt-get update"
    apt-get update -qq >&2
    apt_updated=1
  fi
}
if [ "${#need[@]}" -gt 0 ]; then
  apt_update
  say "installing host packages: ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

# The kernel package and the versions that make up the cache key.
# candidates PKG...: "PKG VERSION" lines, one apt-cache call (each costs ~0.4 s).
candidates() {
  apt-cache policy "$@" 2>/dev/null | awk '/^[^ ].*:$/ {p = substr($0, 1, length($0) - 1)} /^  Candidate:/ {print p, $2}'
}
if ! candidates linux-image-amd64 | grep -qv ' (none)$'; then
  apt_update
fi
kpkg=${RDMA_MACVLAN_VM_KERNEL:-}
if [ -z "$kpkg" ]; then
  kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-6\.1\.[0-9.-]*-amd64$/ {print $2; exit}')
  [ -n "$kpkg" ] || die "cannot tell which linux-image-6.1.*-amd64 package linux-image-amd64 pulls in (apt-cache depends linux-image-amd64); set RDMA_MACVLAN_VM_KERNEL"
fi
versions=$(candidates "$kpkg" "${guest_pkgs[@]}")
kver=$(awk -v p="$kpkg" '$1 == p {print $2}' <<<"$versions")
if [ -z "$kver" ] || [ "$kver" = "(none)" ]; then
  die "no candidate version for $kpkg (apt-cache policy $kpkg)"
fi

mirror=${RDMA_MACVLAN_VM_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(awk '/^URIs:/ {u=$2} /^Suites:/ && / '"$suite"'( |$)/ && u != "" {print u; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "'"$suite"'" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi

manifest=$(
  echo "kernel $kpkg $kver"
  awk '{print "package", $0}' <<<"$versions"
  echo "suite $suite"
  echo "modules ${modules[*]} autoload ${autoload[*]}"
  echo "recipe $(cat "$here/build.sh" "$here/init" | sha256sum | cut -c1-16)"
)
key=$(printf '%s\n' "$manifest" | sha256sum | cut -c1-16)
dest=$cache/$key

done_msg() {
  say "ready: $dest ($(du -sh "$dest/initrd.base" | cut -f1) initramfs, kernel $(cat "$dest/kernel-release"))"
  if [ "$print_dir" = 1 ]; then echo "$dest"; fi
}

# Entries of other keys go when --prune says so, or when unused for more
# than 7 days (each use touches .complete).
prune_others() {
  local d
  for d in "$cache"/*/; do
    d=${d%/}
    if [ "$d" = "$dest" ] || [ ! -e "$d/.complete" ]; then continue; fi
    if [ "$prune" = 1 ] || [ -n "$(find "$d/.complete" -mtime +7)" ]; then
      say "pruning $d"
      rm -rf "$d"
    fi
  done
}

if [ "$force" = 0 ] && [ -e "$dest/.complete" ]; then
  touch "$dest/.complete"
  prune_others
  done_msg
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -n 9; then
  say "another build holds $cache/.lock; waiting"
  flock 9
fi
if [ "$force" = 0 ] && [ -e "$dest/.complete" ]; then
  done_msg
  exit 0
fi

# remove_tree DIR: unmount what debootstrap mounted under DIR (proc, sys),
# then delete it; never deletes through a mount.
remove_tree() {
  local m
  while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done < <(awk -v w="$1/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r)
  if awk -v w="$1/" 'index($2, w) == 1 {found=1} END {exit !found}' /proc/mounts; then
    echo "vm-build: mounts left under $1; not removing it" >&2
    return 0
  fi
  rm -rf "$1"
}
# Work directories of builds killed outright (no trap ran); we hold the lock,
# so none is in use.
for d in "$cache"/.build-*; do
  if [ -d "$d" ]; then remove_tree "$d"; fi
done
work=$(mktemp -d "$cache/.build-$key.XXXXXX")
cleanup() { remove_tree "$work"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "building $dest: $kpkg $kver, $suite from $mirror"
mkdir -p "$work/deb" "$work/kernel" "$work/root"
chmod 755 "$work" "$work/deb"

say "downloading $kpkg"
(cd "$work/deb" && apt-get download -q -o APT::Sandbox::User=root "$kpkg=$kver" >/dev/null) ||
  die "apt-get download $kpkg=$kver failed"
say "unpacking the kernel"
dpkg-deb -x "$work"/deb/*.deb "$work/kernel"
rm -rf "$work/deb"
krel=$(ls "$work/kernel/lib/modules")
[ -f "$work/kernel/boot/vmlinuz-$krel" ] || die "no vmlinuz-$krel in $kpkg"
depmod -b "$work/kernel" "$krel"

say "debootstrap $suite (minbase + ${guest_pkgs[*]})"
inc=$(IFS=,; echo "${guest_pkgs[*]}")
if ! debootstrap --variant=minbase --components=main --include="$inc" "$suite" "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -n 30 "$work/debootstrap.log" >&2
  [ -f "$work/root/debootstrap/debootstrap.log" ] && tail -n 30 "$work/root/debootstrap/debootstrap.log" >&2
  die "debootstrap failed"
fi

say "trimming"
r=$work/root
rm -rf "$r"/usr/share/{doc,man,info,locale,lintian,common-licenses,zoneinfo} \
  "$r"/var/cache/apt/* "$r"/var/lib/apt/lists/* "$r"/var/log/* "$r"/debootstrap
find "$r/usr/share/i18n" -mindepth 1 -maxdepth 1 ! -name charmaps -exec rm -rf {} + 2>/dev/null || true

say "modules: ${modules[*]} (on demand: ${autoload[*]})"
kmods=$work/kernel/lib/modules/$krel
mapfile -t kos < <(for m in "${modules[@]}" "${autoload[@]}"; do
  modprobe -C /dev/null -d "$work/kernel" -S "$krel" --show-depends "$m" || echo "MISSING $m"
done | awk '$1 == "insmod" {print $2} $1 == "MISSING" {print}' | sort -u)
for ko in "${kos[@]}"; do
  case "$ko" in MISSING*) die "module ${ko#MISSING } not in $kpkg" ;; esac
  rel=${ko#"$kmods"/}
  mkdir -p "$r/lib/modules/$krel/$(dirname "$rel")"
  cp "$ko" "$r/lib/modules/$krel/$rel"
done
cp "$kmods"/modules.{order,builtin,builtin.modinfo} "$r/lib/modules/$krel/"
depmod -b "$r" "$krel"
printf '%s\n' "${modules[@]}" >"$r/etc/rmv-modules"

install -m 0755 "$here/init" "$r/init"
mkdir -p "$r/opt/rmv" "$r/run" "$r/tmp"

say "packing the initramfs"
(cd "$r" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) | zstd -q -T0 -10 >"$work/initrd.base"
# The kernel drops an archive appended after a compressed one unless the
# first ends on a 4-byte boundary.
pad=$(($(stat -c %s "$work/initrd.base") % 4))
if [ "$pad" != 0 ]; then head -c $((4 - pad)) /dev/zero >>"$work/initrd.base"; fi
cp "$work/kernel/boot/vmlinuz-$krel" "$work/vmlinuz"
echo "$krel" >"$work/kernel-release"
{
  printf '%s\n' "$manifest"
  echo "mirror $mirror"
  echo "built $(date -u +%FT%TZ)"
  for p in "${guest_pkgs[@]}"; do
    # shellcheck disable=SC2016 # dpkg-query's own format, not the shell's
    echo "installed $p $(chroot "$r" dpkg-query -W -f '${Version}' "$p" 2>/dev/null || echo '?')"
  done
} >"$work/manifest.txt"

# Install atomically: a reader sees the whole entry or none.
stage=$work/entry
mkdir "$stage"
mv "$work"/{vmlinuz,initrd.base,kernel-release,manifest.txt} "$stage/"
touch "$stage/.complete"
rm -rf "$dest"
mv -T "$stage" "$dest"
prune_others
say "built in $((SECONDS - t0))s"
done_msg
