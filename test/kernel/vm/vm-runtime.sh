# shellcheck shell=bash
# vm-docker.sh sets ddir, R, IMAGE, PLUGIN, PARENT; the single-quoted strings run in the container.
# shellcheck disable=SC2154,SC2016
# Sourced by vm-docker.sh (never run): rdma-macvlan-runtime on the VM's real kernel, with two
# Soft-RoCE devices (rxe0 on p0, rxe1 on a second veth p1). The runtime is installed as the
# engine's default runtime (docker rdma runtime install --default, then SIGHUP); containers are
# started by plain `docker run`. The checks: a container on rxe0's network gets the kernel's GID
# index of its address in NCCL_IB_GID_INDEX, an unlimited memlock and CAP_IPC_LOCK, and lists
# only rxe0 in /sys/class/infiniband and in ibv_devices (both devices with RDMA_MACVLAN_SYSFS=host);
# RDMA_MACVLAN_RDMA_LIMIT puts the kernel's RDMA cgroup limits on it: with hca_handle=2 the third
# ibv_open_device fails, with hca_object=4 the fifth protection domain on one context (the context
# itself is no object: measured), while the same container without a limit allocates all five
# (pyverbs, in the image).
# Uses vm-docker.sh's helpers (dk, q, check, pass, fail, poll, say, measured) and its ddir, IMAGE,
# PLUGIN, PARENT; leaves nothing (its links, network and containers go; uninstall takes the
# runtime out of daemon.json, which vm-docker.sh registered at its start).

runtime_teardown() {
  dk rm -f rt1 >/dev/null 2>&1
  dk network rm rr0 >/dev/null 2>&1
  rdma link del rxe1 2>/dev/null
  ip link del p1 2>/dev/null
}

# drun ARGS...: docker run's output and errors, without the engine's warning about IPv4 forwarding
# (off on purpose in the VM's engine).
drun() { dk run "$@" 2>&1 | grep -v 'IPv4 forwarding is disabled'; }

runtime_checks() {
  local ip=10.40.0.11 out idx want
  say "runtime: rxe1 on p1, rr0 on $PARENT, the runtime as the default runtime"
  if ! { ip link add p1 type veth peer name p1peer && ip link set p1 up && ip link set p1peer up &&
    rdma link add rxe1 type rxe netdev p1; }; then
    fail "runtime: a second Soft-RoCE device rxe1 on p1" "$(rdma link show 2>&1)"
    return
  fi
  check "runtime: docker rdma runtime install --default" dk rdma runtime install --default --config-file "$ddir/daemon.json"
  kill -HUP "$(cat "$ddir/dockerd.spawned")"
  check "runtime: dockerd's default runtime is rdma-macvlan after SIGHUP" \
    poll 30 sh -c '[ "$(docker info -f "{{.DefaultRuntime}}")" = rdma-macvlan ]'
  check "runtime: docker network create rr0 on $PARENT" dk network create -d "$PLUGIN" --subnet 10.40.0.0/24 -o parent="$PARENT" rr0

  # shellcheck disable=SC2016 # expanded in the container
  check "runtime: plain docker run -d rt1 on rr0" dk run -d --name rt1 --net rr0 --ip $ip "$IMAGE" sh -c \
    'echo "gid=$NCCL_IB_GID_INDEX hca=$NCCL_IB_HCA"; echo "sys=$(ls /sys/class/infiniband | tr "\n" " ")"; echo "verbs=$(ls /sys/class/infiniband_verbs | tr "\n" " ")"; echo "memlock=$(ulimit -l)"; echo "capeff=$(sed -n "s/^CapEff:[[:space:]]*//p" /proc/self/status)"; ibv_devices; echo done; sleep infinity'
  poll 120 sh -c 'docker logs rt1 2>&1 | grep -qx done'
  out=$(dk logs rt1 2>&1)
  want=$(q index rxe0 1 $ip)
  idx=$(printf '%s\n' "$out" | sed -n 's/^gid=\([0-9]*\) .*/\1/p')
  if [ -n "$want" ] && [ "$idx" = "$want" ]; then
    pass "runtime: plain docker run gets the kernel's GID index of $ip on rxe0 ($idx) in NCCL_IB_GID_INDEX"
  else
    fail "runtime: plain docker run gets the kernel's GID index of $ip on rxe0 in NCCL_IB_GID_INDEX" "kernel: $want" "$out"
  fi
  if printf '%s\n' "$out" | grep -qx 'sys=rxe0 ' && printf '%s\n' "$out" | grep -qx 'verbs=abi_version uverbs0 '; then
    pass "runtime: /sys/class/infiniband and infiniband_verbs show rxe0 only (the host has rxe0 and rxe1)"
  else
    # shellcheck disable=SC2012 # device names
    fail "runtime: /sys/class/infiniband and infiniband_verbs show rxe0 only" "$out" "host: $(ls /sys/class/infiniband | tr '\n' ' ')"
  fi
  if printf '%s\n' "$out" | grep -q '^ *rxe0 ' && ! printf '%s\n' "$out" | grep -q '^ *rxe1 '; then
    pass "runtime: ibv_devices in the container lists rxe0, not rxe1"
  else
    fail "runtime: ibv_devices in the container lists rxe0, not rxe1" "$out"
  fi
  local cap
  cap=$(printf '%s\n' "$out" | sed -n 's/^capeff=//p')
  if printf '%s\n' "$out" | grep -qx 'memlock=unlimited' && [[ $cap =~ ^[0-9a-f]+$ ]] && (((0x$cap >> 14) & 1)); then
    pass "runtime: memlock unlimited and CAP_IPC_LOCK (CapEff $cap)"
  else
    fail "runtime: memlock unlimited and CAP_IPC_LOCK" "$out"
  fi
  out=$(drun --rm --net rr0 -e RDMA_MACVLAN_SYSFS=host -e RDMA_MACVLAN_NO_WAIT=1 "$IMAGE" ls /sys/class/infiniband | tr '\n' ' ')
  if [ "$out" = "rxe0 rxe1 " ]; then pass "runtime: RDMA_MACVLAN_SYSFS=host shows both devices"; else fail "runtime: RDMA_MACVLAN_SYSFS=host shows both devices" "$out"; fi

  runtime_rdma_cgroup
  dk rm -f rt1 >/dev/null 2>&1
  check "runtime: docker rdma runtime uninstall" dk rdma runtime uninstall --config-file "$ddir/daemon.json"
  runtime_teardown
}

# The RDMA cgroup (rdma.max) through pyverbs in a container: RDMA_MACVLAN_RDMA_LIMIT stops the
# handle or object past the limit.
runtime_rdma_cgroup() {
  local out
  # shellcheck disable=SC2016 # python
  local py='
import sys
from pyverbs.device import Context
from pyverbs.pd import PD
what, n = sys.argv[1], int(sys.argv[2])
held, err = [], "none"
try:
    if what == "ctx":
        for _ in range(n + 1):
            held.append(Context(name="rxe0"))
    else:
        ctx = Context(name="rxe0")
        for _ in range(n + 1):
            held.append(PD(ctx))
except Exception as e:
    err = type(e).__name__ + ": " + str(e).splitlines()[0]
print(len(held), err)
'
  out=$(drun --rm --net rr0 -e RDMA_MACVLAN_NO_WAIT=1 -e RDMA_MACVLAN_RDMA_LIMIT=hca_handle=2 "$IMAGE" python3 -c "$py" ctx 2)
  measured "rdma.max hca_handle=2, 3 ibv_open_device: $out"
  if [[ $out == "2 "* && $out != *" none" ]]; then pass "runtime: RDMA_MACVLAN_RDMA_LIMIT=hca_handle=2: the third ibv_open_device fails ($out)"; else fail "runtime: hca_handle=2: the third ibv_open_device fails" "$out"; fi
  out=$(drun --rm --net rr0 -e RDMA_MACVLAN_NO_WAIT=1 -e RDMA_MACVLAN_RDMA_LIMIT=hca_object=4 "$IMAGE" python3 -c "$py" pd 4)
  measured "rdma.max hca_object=4, 5 ibv_alloc_pd on one context: $out"
  local free
  free=$(drun --rm --net rr0 -e RDMA_MACVLAN_NO_WAIT=1 "$IMAGE" python3 -c "$py" pd 4)
  if [[ $out == "4 "* && $out != *" none" && $free == "5 none" ]]; then
    pass "runtime: RDMA_MACVLAN_RDMA_LIMIT=hca_object=4: the fifth ibv_alloc_pd fails ($out); without it all five succeed"
  else
    fail "runtime: hca_object=4 stops ibv_alloc_pd before the fifth; without it all five succeed" "limited: $out" "unlimited: $free"
  fi
}
