#!/bin/bash
# Runs inside the test VM, started by /init; run.sh puts it at
# /opt/rmv/vm-test.sh with the binaries in /opt/rmv/bin, kerneltest's
# arguments, one a line, in /opt/rmv/args and what to run in /opt/rmv/mode
# (kerneltest=0|1, demo=0|1, engines=LIST). Loads the modules listed in
# /etc/rmv-modules (build.sh), then runs kerneltest and vm-docker.sh for each
# engine, or vm-demo.sh. Its exit status is the VM's result.
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

# devtmpfs has no /dev/fd: bash's process substitution (dockerd.sh) needs it.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
kerneltest=1 demo=0 engines=""
if [ -s /opt/rmv/mode ]; then
  kerneltest=$(sed -n 's/^kerneltest=//p' /opt/rmv/mode)
  demo=$(sed -n 's/^demo=//p' /opt/rmv/mode)
  engines=$(sed -n 's/^engines=//p' /opt/rmv/mode)
fi

if [ "$demo" != 1 ]; then
  echo "# kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
fi
while read -r m; do
  [ -n "$m" ] || continue
  if ! out=$(modprobe "$m" 2>&1); then
    echo "not ok - modprobe $m: $out"
    echo "0 passed, 1 failed"
    exit 1
  fi
done </etc/rmv-modules
if [ "$demo" = 1 ]; then
  exec /opt/rmv/vm-demo.sh
fi
echo "# modules: $(cut -d' ' -f1 /proc/modules | sort | tr '\n' ' ')"

rc=0 passed=0 failed=0
# tally FILE: adds the "N passed, N failed" line of one part to the totals.
tally() {
  local line p f
  line=$(awk '/^[0-9]+ passed, [0-9]+ failed$/ {print $1, $3}' "$1" | tail -n1)
  p=${line% *} f=${line#* }
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-1}))
}
if [ "$kerneltest" = 1 ]; then
  args=()
  if [ -s /opt/rmv/args ]; then mapfile -t args </opt/rmv/args; fi
  /opt/rmv/bin/kerneltest -daemon /opt/rmv/bin/rdma-macvlan "${args[@]}" | tee /run/rmv-part.out
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  tally /run/rmv-part.out
fi
for e in $engines; do
  echo "# engine $e: real dockerd, managed plugin, docker rdma"
  /opt/rmv/vm-docker.sh "$e" | tee /run/rmv-part.out
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  tally /run/rmv-part.out
done
echo "# total: $passed passed, $failed failed"
exit "$rc"
