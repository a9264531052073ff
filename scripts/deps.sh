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
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
if [[ " ${need[*]} " == *" prometheus "* && -d /run/systemd/system ]]; then
	# The package starts a Prometheus for the host on :9090; the tests only want its binaries and
	# run their own on loopback.
	systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
