#!/usr/bin/env bash
# Runs the real-kernel tests: builds the daemon and kerneltest (static, from
# the working tree), appends them with vm-test.sh as a second cpio to the
# cached initramfs (build.sh makes it on first use), boots the Soft-RoCE VM
# with qemu (TCG), collects the results from the VM's second serial port,
# prints them and exits with the status of the tests in the VM.
#
# Needs: root, go, and what build.sh needs (it installs missing host
# packages through apt). Leaves nothing behind but the cache build.sh
# fills: the VM, its files and the qemu process go on any exit.
#
# Usage: scripts/vm/run.sh [-t SECONDS] [-o FILE] [-v] [--keep] [-- KERNELTEST-ARGS...]
#   -t, --timeout SECONDS  stop the VM after that long (default 900;
#                          env RDMA_MACVLAN_VM_TIMEOUT); exit 124
#   -o, --out FILE         also copy the results to FILE
#   -v, --verbose          stream the VM console to stderr
#   --keep                 keep the work directory (initrd, console log)
#   KERNELTEST-ARGS        e.g. -run 'endpoint|vlan' (phases), -wait 90s
# Env: RDMA_MACVLAN_VM_CACHE (see build.sh), RDMA_MACVLAN_VM_MEM (MiB,
#      default 1024), RDMA_MACVLAN_VM_SMP (default 2), GO (default go).
# Exit: the in-VM status (0 all checks passed, 1 a check failed), 124 on
#       timeout, 2 on bad usage, other non-zero when the VM did not report.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
timeout=${RDMA_MACVLAN_VM_TIMEOUT:-900}
mem=${RDMA_MACVLAN_VM_MEM:-1024}
smp=${RDMA_MACVLAN_VM_SMP:-2}
go=${GO:-go}
out="" verbose=0 keep=0
kt_args=()

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    -t | --timeout) timeout=${2:?}; shift 2 ;;
    -o | --out) out=${2:?}; shift 2 ;;
    -v | --verbose) verbose=1; shift ;;
    --keep) keep=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; kt_args=("$@"); break ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$timeout" in '' | *[!0-9]*) echo "run.sh: --timeout wants seconds" >&2; exit 2 ;; esac

t0=$SECONDS
say() { echo "vm-run: [$((SECONDS - t0))s] $*" >&2; }
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (build.sh: debootstrap)" >&2; exit 1; }
command -v "$go" >/dev/null || [ -x /usr/local/go/bin/go ] || { echo "run.sh: no go in PATH" >&2; exit 1; }
command -v "$go" >/dev/null || go=/usr/local/go/bin/go

img=$(bash "$here/build.sh" --print-dir)

work=$(mktemp -d /tmp/rmv-vm.XXXXXX)
qemu_pid="" tail_pid=""
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  local rc=$?
  if [ -n "$tail_pid" ]; then kill "$tail_pid" 2>/dev/null || true; fi
  if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
    kill "$qemu_pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$qemu_pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -9 "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
  fi
  if [ "$keep" = 1 ]; then
    echo "vm-run: kept $work" >&2
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "building the daemon and kerneltest"
ov=$work/overlay
mkdir -p "$ov/opt/rmv/bin"
(
  cd "$repo"
  CGO_ENABLED=0 "$go" build -trimpath -o "$ov/opt/rmv/bin/rdma-macvlan" ./cmd/rdma-macvlan
  CGO_ENABLED=0 "$go" build -trimpath -o "$ov/opt/rmv/bin/kerneltest" ./kerneltest
)
install -m 0755 "$here/vm-test.sh" "$ov/opt/rmv/vm-test.sh"
if [ "${#kt_args[@]}" -gt 0 ]; then printf '%s\n' "${kt_args[@]}" >"$ov/opt/rmv/args"; fi
: >>"$ov/opt/rmv/args"
chmod 0755 "$ov/opt" "$ov/opt/rmv" "$ov/opt/rmv/bin"
# No "." entry: it would re-mode the VM's / to the work directory's 0700.
(cd "$ov" && find . -mindepth 1 -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) >"$work/overlay.cpio"
cat "$img/initrd.base" "$work/overlay.cpio" >"$work/initrd"

: >"$work/console.log"
: >"$work/results.txt"
say "booting $(cat "$img/kernel-release") (TCG, ${smp} CPUs, ${mem} MiB; timeout ${timeout}s)"
qemu-system-x86_64 -accel tcg,thread=multi -cpu max -M q35 -m "$mem" -smp "$smp" \
  -nodefaults -nographic -no-reboot \
  -kernel "$img/vmlinuz" -initrd "$work/initrd" \
  -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=4" \
  -serial "file:$work/console.log" -serial "file:$work/results.txt" \
  </dev/null >"$work/qemu.log" 2>&1 &
qemu_pid=$!
if [ "$verbose" = 1 ]; then
  tail -n +1 -f "$work/console.log" >&2 &
  tail_pid=$!
fi

deadline=$((SECONDS + timeout))
timed_out=0
while kill -0 "$qemu_pid" 2>/dev/null; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    timed_out=1
    say "timeout after ${timeout}s: stopping the VM"
    kill "$qemu_pid" 2>/dev/null || true
    break
  fi
  sleep 0.5
done
qemu_rc=0
wait "$qemu_pid" 2>/dev/null || qemu_rc=$?
qemu_pid=""
say "VM stopped"

status=$(awk '/^rmv-vm-status: / {s = $2} END {print s}' "$work/results.txt")
grep -v '^rmv-vm-status: ' "$work/results.txt" || true
if [ -n "$out" ]; then cp "$work/results.txt" "$out"; fi
if [ "$timed_out" = 1 ] || [ -z "$status" ]; then
  echo "vm-run: the VM did not report a result (qemu exit $qemu_rc); console tail:" >&2
  tail -n 40 "$work/console.log" >&2
  if [ -s "$work/qemu.log" ]; then cat "$work/qemu.log" >&2; fi
  if [ "$timed_out" = 1 ]; then exit 124; fi
  exit 1
fi
if [ "$status" != 0 ] && [ "$verbose" = 0 ]; then
  echo "vm-run: console tail:" >&2
  tail -n 20 "$work/console.log" >&2
fi
say "done: in-VM status $status"
exit "$status"
