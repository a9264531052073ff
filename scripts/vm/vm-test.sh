#!/bin/bash
# Runs inside the test VM, started by /init; run.sh puts it at
# /opt/rmv/vm-test.sh with the binaries in /opt/rmv/bin and kerneltest's
# arguments, one a line, in /opt/rmv/args. Loads the modules listed in
# /etc/rmv-modules (build.sh), then runs kerneltest. Its exit status is the
# VM's result.
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

echo "# kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
while read -r m; do
  [ -n "$m" ] || continue
  if ! out=$(modprobe "$m" 2>&1); then
    echo "not ok - modprobe $m: $out"
    echo "0 passed, 1 failed"
    exit 1
  fi
done </etc/rmv-modules
echo "# modules: $(cut -d' ' -f1 /proc/modules | sort | tr '\n' ' ')"

args=()
if [ -s /opt/rmv/args ]; then mapfile -t args </opt/rmv/args; fi
/opt/rmv/bin/kerneltest -daemon /opt/rmv/bin/rdma-macvlan "${args[@]}"
