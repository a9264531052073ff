#!/usr/bin/env bash
# Installs the Debian packages the test suites need, only those missing.
# Needs: root and Debian's apt. Leaves behind: the installed packages.
set -euo pipefail

need=()
command -v shellcheck >/dev/null || need+=(shellcheck)
command -v nsenter >/dev/null || need+=(util-linux)
command -v ip >/dev/null || need+=(iproute2)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
# prometheus and promtool: test/e2e/e2e-metrics.sh scrapes the plugin with a real Prometheus.
command -v promtool >/dev/null || need+=(prometheus)
# What scripts/engines.sh (Debian's engine; the built ones' containerd, libseccomp and cgo) and
# test/kernel/vm/build.sh (qemu, debootstrap and the image tools) would install themselves: here
# first, so that the two can run side by side (scripts/check.sh) without taking apt's lock.
# missing_pkgs PKG...: those not installed.
missing_pkgs() {
  local p
  for p in "$@"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || need+=("$p")
  done
}
missing_pkgs docker.io busybox-static docker-compose containerd libseccomp-dev pkg-config \
  qemu-system-x86 debootstrap zstd cpio kmod dpkg debian-archive-keyring
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "deps: installing ${need[*]}"
# No package's service is started while apt runs (prometheus would start one for the host on
# :9090; the tests only want its binaries and run their own on loopback): a policy-rc.d that
# denies starts exists while apt runs, unless the host has its own.
policy=""
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
	policy=/usr/sbin/policy-rc.d
	trap 'rm -f "$policy"' EXIT
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
if [[ " ${need[*]} " == *" prometheus "* ]]; then
	# Nor at the next boot.
	if [[ -d /run/systemd/system ]]; then
		systemctl disable --now prometheus.service >/dev/null 2>&1 || true
	else
		update-rc.d prometheus disable >/dev/null 2>&1 || true
	fi
fi
