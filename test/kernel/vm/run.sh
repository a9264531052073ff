#!/usr/bin/env bash
# Runs the real-kernel tests: builds the daemon, kerneltest and docker-rdma
# (static, from the working tree) and the managed plugin's directory, puts
# them, vm-test.sh, vm-docker.sh and the current Docker engine (dockerd and
# runc that scripts/engines.sh built, stripped; the newer docker CLI) into a
# second cpio appended to the cached initramfs (build.sh makes it on first
# use), boots the Soft-RoCE VM with qemu (TCG), collects the results from
# the VM's second serial port, prints them and exits with the status of the
# tests in the VM. In the VM: kerneltest (the daemon driven like
# libnetwork), then vm-docker.sh per engine (real dockerd, managed plugin,
# docker rdma, containers).
#
# Needs: root, go, and what build.sh needs (it installs missing host
# packages through apt); for the current engine, scripts/engines.sh install
# current run before and the docker CLI at DOCKER_CLI_CURRENT. Leaves nothing
# behind but the cache build.sh fills: the VM, its files and the qemu
# process go on any exit.
#
# Usage: test/kernel/vm/run.sh [-t SECONDS] [-o FILE] [-v] [--keep] [--engines LIST]
#                                [--no-kerneltest] [--demo] [-- KERNELTEST-ARGS...]
#   -t, --timeout SECONDS  stop the VM after that long (default 2400;
#                          env RDMA_MACVLAN_VM_TIMEOUT); exit 124
#   -o, --out FILE         also copy the results to FILE
#   -v, --verbose          stream the VM console to stderr
#   --keep                 keep the work directory (initrd, console log)
#   --engines LIST         engines to test in the VM, space separated:
#                          "debian current" (default; env
#                          RDMA_MACVLAN_VM_ENGINES), "" for none
#   --no-kerneltest        skip the daemon-level kerneltest
#   --demo                 run the narrated demo (vm-demo.sh, Debian's engine)
#                          instead of the tests, its output streamed as it comes
#   KERNELTEST-ARGS        e.g. -run 'endpoint|vlan' (phases), -wait 90s
# Env: RDMA_MACVLAN_VM_CACHE (see build.sh), RDMA_MACVLAN_VM_MEM (MiB,
#      default 3072), RDMA_MACVLAN_VM_SMP (default 2), GO (default go),
#      RDMA_MACVLAN_VM_LOCKUP (default 90: a guest CPU reported stuck that
#      many seconds stops the VM, which boots once more with one vCPU),
#      DOCKER_CLI_CURRENT (default /usr/local/bin/docker).
# Exit: the in-VM status (0 all checks passed, 1 a check failed), 124 on
#       timeout, 2 on bad usage, other non-zero when the VM did not report.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
timeout=${RDMA_MACVLAN_VM_TIMEOUT:-2400}
mem=${RDMA_MACVLAN_VM_MEM:-3072}
engines=${RDMA_MACVLAN_VM_ENGINES-debian current}
cli_current=${DOCKER_CLI_CURRENT:-/usr/local/bin/docker}
kerneltest=1 demo=0
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
    --engines) engines=${2?}; shift 2 ;;
    --no-kerneltest) kerneltest=0; shift ;;
    --demo) demo=1; kerneltest=0; engines=debian; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; kt_args=("$@"); break ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$timeout" in '' | *[!0-9]*) echo "run.sh: --timeout wants seconds" >&2; exit 2 ;; esac

t0=$SECONDS
say() { echo "vm-run: [$((SECONDS - t0))s] $*" >&2; }
# lockup_seconds FILE: the longest "soft lockup - CPU#N stuck for Ns" the
# guest's console reports, 0 when none.
lockup_seconds() {
  sed -n 's/.*soft lockup - CPU#[0-9]* stuck for \([0-9][0-9]*\)s!.*/\1/p' "$1" | sort -n | tail -n1 | grep . || echo 0
}
# A CPU stuck this long is taken for a dead guest (the kernel reports every
# ~26 s from 22 s on). A guest starved by a loaded host can report a
# lockup too, and would be booted again for nothing: how long such false
# reports last was not measured; the one real lockup seen lasted 20 min.
lockup_limit=${RDMA_MACVLAN_VM_LOCKUP:-90}
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

for e in $engines; do
  case "$e" in debian | current) ;; *) echo "run.sh: unknown engine $e (want debian, current)" >&2; exit 2 ;; esac
done
say "building the daemon, kerneltest, docker-rdma and the plugin dir"
ov=$work/overlay
mkdir -p "$ov/opt/rmv/bin" "$ov/opt/rmv/scripts"
(
  cd "$repo"
  CGO_ENABLED=0 "$go" build -trimpath -o "$ov/opt/rmv/bin/rdma-macvlan" ./cmd/rdma-macvlan
  if [ "$kerneltest" = 1 ]; then CGO_ENABLED=0 "$go" build -trimpath -o "$ov/opt/rmv/bin/kerneltest" ./test/kernel; fi
  CGO_ENABLED=0 "$go" build -trimpath -ldflags "-X github.com/rdma-macvlan/rdma-macvlan/internal/version.version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)" \
    -o "$ov/opt/rmv/bin/docker-rdma" ./cmd/docker-rdma
  CGO_ENABLED=0 "$go" build -trimpath -ldflags "-s -w" -o "$ov/opt/rmv/bin/rdma-exec" ./cmd/rdma-exec
  CGO_ENABLED=0 "$go" build -trimpath -ldflags "-s -w" -o "$ov/opt/rmv/bin/rdma-macvlan-runtime" ./cmd/rdma-macvlan-runtime
  if [ "$kerneltest" = 1 ]; then
    # The privileged tests this host's kernel skips for want of 802.1Q,
    # as test binaries, with the daemons the crash-point test would build.
    t=$ov/opt/rmv/tests
    mkdir -p "$t/daemons"
    for pkg in netns plugin cmd/rdma-macvlan; do
      CGO_ENABLED=0 "$go" test -c -trimpath -ldflags "-s -w" -o "$t/$(basename "$pkg").test" "./$pkg"
    done
    CGO_ENABLED=0 "$go" build -trimpath -tags crashpoints -ldflags "-s -w -X github.com/rdma-macvlan/rdma-macvlan/internal/version.version=v0.0.0-test.1" \
      -o "$t/daemons/rdma-macvlan-crashpoints" ./cmd/rdma-macvlan
  fi
)
if [ -n "$engines" ]; then
  PLUGIN_DIR=$ov/opt/rmv/plugin PLUGIN_BINARY=$ov/opt/rmv/bin/rdma-macvlan bash "$repo/scripts/plugin.sh" build 2>/dev/null
fi
case " $engines " in
  *" current "*)
    bindir=$(bash "$repo/scripts/engines.sh" bindir) || { echo "run.sh: the current engine is not built: scripts/engines.sh install current" >&2; exit 1; }
    [ -x "$cli_current" ] || { echo "run.sh: no docker CLI at $cli_current (DOCKER_CLI_CURRENT): the current engine's tests need a CLI that knows CDI devices" >&2; exit 1; }
    edir=$ov/opt/rmv/engines/$(basename "$(dirname "$bindir")")/bin
    mkdir -p "$edir" "$ov/opt/rmv/cli"
    # Stripped: the VM holds every file in memory.
    for b in dockerd runc; do strip -o "$edir/$b" "$bindir/$b"; done
    cp "$cli_current" "$ov/opt/rmv/cli/docker"
    say "current engine: $("$bindir/dockerd" --version) ($(du -sh "$edir" | cut -f1) stripped), CLI $("$cli_current" --version)"
    ;;
esac
install -m 0755 "$here/vm-test.sh" "$ov/opt/rmv/vm-test.sh"
install -m 0755 "$here/vm-docker.sh" "$here/vm-bond.sh" "$here/vm-runtime.sh" "$here/vm-demo.sh" "$here/vm-image.sh" "$here/rmvq.py" "$ov/opt/rmv/"
install -m 0755 "$repo/scripts/dockerd.sh" "$repo/scripts/engines.sh" "$ov/opt/rmv/scripts/"
# dockerd.sh sources both, engines.sh the second.
install -D -m 0644 "$repo/scripts/lib/proc.sh" "$ov/opt/rmv/scripts/lib/proc.sh"
install -D -m 0644 "$repo/scripts/lib/engines.sh" "$ov/opt/rmv/scripts/lib/engines.sh"
printf '%s\n' "kerneltest=$kerneltest" "demo=$demo" "engines=$engines" >"$ov/opt/rmv/mode"
if [ "${#kt_args[@]}" -gt 0 ]; then printf '%s\n' "${kt_args[@]}" >"$ov/opt/rmv/args"; fi
: >>"$ov/opt/rmv/args"
chmod 0755 "$ov/opt" "$ov/opt/rmv" "$ov/opt/rmv/bin"
if [ -d "$ov/opt/rmv/tests" ]; then chmod 0755 "$ov/opt/rmv/tests" "$ov/opt/rmv/tests/daemons"; fi
# No "." entry: it would re-mode the VM's / to the work directory's 0700.
(cd "$ov" && find . -mindepth 1 -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) >"$work/overlay.cpio"
cat "$img/initrd.base" "$work/overlay.cpio" >"$work/initrd"

# boot_vm CPUS: boots the VM with CPUS vCPUs and waits until it stops, the
# overall deadline passes (timed_out=1) or its kernel locks up (lockup=1).
# Under TCG a guest has been seen to lock up for good with two vCPUs
# (-cpu max; both CPUs in "soft lockup" for 20 minutes, the test then ran
# into its timeout): that is not a result of the tests, so the caller boots
# again with one vCPU, where no CPU can wait on another.
boot_vm() {
  local cpus=$1
  : >"$work/console.log"
  : >"$work/results.txt"
  lockup=0
  say "booting $(cat "$img/kernel-release") (TCG, ${cpus} CPUs, ${mem} MiB; $((deadline - SECONDS))s left of ${timeout}s)"
  qemu-system-x86_64 -accel tcg,thread=multi -cpu max -M q35 -m "$mem" -smp "$cpus" \
    -nodefaults -nographic -no-reboot \
    -kernel "$img/vmlinuz" -initrd "$work/initrd" \
    -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=4" \
    -serial "file:$work/console.log" -serial "file:$work/results.txt" \
    </dev/null >"$work/qemu.log" 2>&1 &
  qemu_pid=$!
  if [ "$verbose" = 1 ]; then
    tail -n +1 -f --pid="$qemu_pid" "$work/console.log" >&2 &
    tail_pid=$!
  elif [ "$demo" = 1 ]; then
    # tail ends by itself when qemu does.
    (tail -n +1 -f --pid="$qemu_pid" "$work/results.txt" | grep --line-buffered -v '^rmv-vm-status: ') &
    tail_pid=$!
  fi
  local n=0 stuck
  while kill -0 "$qemu_pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      timed_out=1
      say "timeout after ${timeout}s: stopping the VM"
      kill "$qemu_pid" 2>/dev/null || true
      break
    fi
    n=$((n + 1))
    if [ $((n % 20)) = 0 ]; then
      stuck=$(lockup_seconds "$work/console.log")
      if [ "$stuck" -ge "$lockup_limit" ]; then
        lockup=1
        say "the VM's kernel reports a CPU stuck for ${stuck}s (soft lockup): stopping it"
        kill "$qemu_pid" 2>/dev/null || true
        break
      fi
    fi
    sleep 0.5
  done
  qemu_rc=0
  wait "$qemu_pid" 2>/dev/null || qemu_rc=$?
  qemu_pid=""
  say "VM stopped"
}

deadline=$((SECONDS + timeout))
timed_out=0
boot_vm "$smp"
if [ "$lockup" = 1 ] && [ "$((deadline - SECONDS))" -gt 60 ]; then
  cp "$work/console.log" "$work/console-lockup.log"
  say "the lockup is the emulator's, not a test result: console tail of that boot:"
  grep -m 3 'soft lockup' "$work/console.log" | sed 's/^/vm-run:   /' >&2 || true
  if [ -n "$tail_pid" ]; then wait "$tail_pid" 2>/dev/null || true; tail_pid=""; fi
  boot_vm 1
fi

status=$(awk '/^rmv-vm-status: / {s = $2} END {print s}' "$work/results.txt")
if [ "$demo" = 1 ]; then
  wait "$tail_pid" 2>/dev/null || true
  tail_pid=""
else
  grep -v '^rmv-vm-status: ' "$work/results.txt" || true
fi
if [ -n "$out" ]; then cp "$work/results.txt" "$out"; fi
if [ "$lockup" = 1 ]; then
  echo "vm-run: the VM's kernel locked up (soft lockup over ${lockup_limit}s) and no time was left to boot it again; console tail:" >&2
  tail -n 40 "$work/console.log" >&2
  exit 1
fi
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
