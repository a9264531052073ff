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
# vlan_tests: the privileged Go tests that need 802.1Q (the CI host's
# kernel has none, so they skip there), and the RDMA netlink port view
# (there only its error path runs): here each must pass, and a skip, of a
# test or of a subtest, counts as a failure.
vlan_tests() {
  local t=/opt/rmv/tests out st name
  local p=0 f=0
  run_go_test() { # BINARY PATTERN EXPECTED-PASS-NAMES...
    local bin=$1 pat=$2
    shift 2
    out=$(cd /tmp && RDMA_MACVLAN_TEST_DAEMONS=$t/daemons "$t/$bin" -test.run "$pat" -test.v -test.count=1 -test.timeout 600s 2>&1)
    st=$?
    for name in "$@"; do
      if grep -qE "^ *--- PASS: $name " <<<"$out"; then
        echo "ok - go test $bin: $name passed (the CI host's kernel cannot run it)"
        p=$((p + 1))
      else
        echo "not ok - go test $bin: $name did not pass"
        f=$((f + 1))
      fi
    done
    if grep -qE '^ *--- SKIP' <<<"$out"; then
      echo "not ok - go test $bin -run '$pat': something skipped on a kernel with 802.1Q: $(grep -E '^ *--- SKIP' <<<"$out" | tr '\n' ' ')"
      f=$((f + 1))
    fi
    if [ "$st" != 0 ] || grep -qE '^ *--- SKIP|^ *--- FAIL' <<<"$out"; then
      printf '%s\n' "$out" | tail -n 60 | sed 's/^/#   /'
      if [ "$st" != 0 ]; then
        echo "not ok - go test $bin -run '$pat': exit $st"
        f=$((f + 1))
      fi
    fi
  }
  echo "# privileged Go tests that need 802.1Q, and the RDMA netlink port view on a kernel with RDMA"
  run_go_test netns.test '^TestPrivilegedCreateVLAN$' TestPrivilegedCreateVLAN
  RDMA_MACVLAN_TEST_RDMA_NETLINK=required run_go_test netns.test '^TestRdmaPortNetdevsOfThisKernel$' TestRdmaPortNetdevsOfThisKernel
  run_go_test plugin.test '^TestPrivileged(VLANLifecycle|RestartRestoresVLAN|VLANOwnerMark)$' \
    TestPrivilegedVLANLifecycle TestPrivilegedRestartRestoresVLAN TestPrivilegedVLANOwnerMark
  run_go_test rdma-macvlan.test '^TestPrivilegedCrashPoints$/vlan-' \
    TestPrivilegedCrashPoints 'TestPrivilegedCrashPoints/create-network:vlan-created' 'TestPrivilegedCrashPoints/delete-network:vlan-deleted'
  echo "$p passed, $f failed"
  [ "$f" = 0 ]
}
if [ "$kerneltest" = 1 ] && [ -d /opt/rmv/tests ]; then
  vlan_tests | tee /run/rmv-part.out
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
