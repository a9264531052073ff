#!/bin/bash
# Runs inside the Soft-RoCE test VM (vm-test.sh calls it once per engine):
# a real Docker engine with the managed rdma-macvlan plugin and the `docker
# rdma` CLI plugin, on the VM's real rxe0, real sysfs and real device nodes.
# What a user sees in containers is compared with what the kernel shows.
#
# Usage: vm-docker.sh debian|current
#   debian   Debian's docker.io 20.10 (dockerd, containerd, runc of the image)
#   current  the dockerd and runc scripts/engines.sh builds (put by run.sh
#            under /opt/rmv/engines), on the image's containerd, driven by the
#            newer docker CLI at /opt/rmv/cli/docker (CDI needs it)
# Needs: /opt/rmv/{bin/docker-rdma,plugin/,scripts/dockerd.sh,rmvq.py}
#   (run.sh), the RoCE parent p0 with rxe0 on it (made here when missing).
# Output: "ok - ..."/"not ok - ..." per check, "# ..." notes, "# measured: ..."
#   for what the engine and kernel do that the README describes, and
#   "N passed, N failed"; exit 1 when a check failed.
# Leaves: nothing of the engine (dockerd.sh stop), its networks or containers.
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

engine=${1:?engine: debian or current}
R=/opt/rmv
HCA=rxe0
PORT=1
PARENT=p0
IMAGE=rmv/rdma:test
PLUGIN=rdma-macvlan:latest
ddir=/run/rmv-docker-$engine
export RDMA_MACVLAN_ENGINES_DIR=$R/engines
export DOCKERD_START_TIMEOUT=300 DOCKERD_STOP_TIMEOUT=60
export DOCKER_CONFIG=/run/rmv-dockercfg-$engine
CMD_TIMEOUT=${RMV_CMD_TIMEOUT:-180}
# The 256 MiB the issue asks for, and the 64 KiB of kernels before 5.16.
BIG=$((256 << 20))
SMALL=65536
if [ "$engine" = current ]; then
  export PATH=$R/cli:$PATH
fi

passed=0 failed=0
t0=$SECONDS
say() { echo "# [$engine $((SECONDS - t0))s] $*"; }
measured() { echo "# measured: [$engine] $*"; }
pass() { passed=$((passed + 1)); echo "ok - [$engine] $1"; }
fail() {
  failed=$((failed + 1))
  echo "not ok - [$engine] $1"
  shift
  local l lines
  # No pipe into head: sed would die of SIGPIPE on a long text, and pipefail end the run.
  for l in "$@"; do
    mapfile -t -n 30 lines <<<"$l"
    printf '#     %s\n' "${lines[@]}"
  done
}
# check NAME CMD...: pass when CMD succeeds; its output is shown on failure.
check() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$out"; fi
}
dk() { timeout -k 5 "$CMD_TIMEOUT" docker "$@"; }
q() { python3 "$R/rmvq.py" "$@"; }
# poll SECONDS CMD...: until CMD succeeds.
poll() {
  local end=$((SECONDS + $1))
  shift
  while :; do
    "$@" >/dev/null 2>&1 && return 0
    [ "$SECONDS" -ge "$end" ] && return 1
    sleep 0.5
  done
}

teardown() {
  set +e
  if [ -S "$ddir/docker.sock" ]; then
    ids=$(timeout 30 docker ps -aq 2>/dev/null)
    # shellcheck disable=SC2086 # one word per container
    [ -n "$ids" ] && timeout 120 docker rm -f $ids >/dev/null 2>&1
    for n in $(timeout 30 docker network ls -q --filter type=custom 2>/dev/null); do
      timeout 60 docker network rm "$n" >/dev/null 2>&1
    done
    timeout 60 docker plugin disable -f "$PLUGIN" >/dev/null 2>&1
    timeout 60 docker plugin rm -f "$PLUGIN" >/dev/null 2>&1
  fi
  if [ -n "${fill:-}" ]; then ip link del "$fill" 2>/dev/null; fi
  if declare -F bond_teardown >/dev/null; then bond_teardown; fi
  if declare -F runtime_teardown >/dev/null; then runtime_teardown; fi
  if [ -d "$ddir" ]; then bash "$R/scripts/dockerd.sh" stop "$ddir" >/dev/null 2>&1 || say "dockerd.sh stop $ddir failed"; fi
  rm -rf "$DOCKER_CONFIG" /var/lib/rdma-macvlan/* 2>/dev/null
}
trap teardown EXIT

summary() {
  say "took $((SECONDS - t0)) s"
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ]
}
# abort NAME DETAIL: a step the rest depends on failed.
abort() {
  fail "$@"
  summary
  exit 1
}

# --- the RoCE parent and the engine ------------------------------------------------------------
if ! [ -e /sys/class/infiniband/$HCA ]; then
  if ! { ip link add $PARENT type veth peer name ${PARENT}peer && ip link set $PARENT up &&
    ip link set ${PARENT}peer up && rdma link add $HCA type rxe netdev $PARENT; }; then
    abort "setup: rxe0 on a veth parent p0"
  fi
fi
[ "$(cat /sys/class/infiniband/$HCA/ports/$PORT/gid_attrs/ndevs/0 2>/dev/null)" = $PARENT ] ||
  abort "setup: rxe0 is on p0" "$(rdma link show)"
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup || abort "setup: mount cgroup2"
mkdir -p /var/lib/rdma-macvlan /etc/cdi "$DOCKER_CONFIG/cli-plugins"
install -m 0755 $R/bin/docker-rdma "$DOCKER_CONFIG/cli-plugins/docker-rdma"
# docker rdma run mounts rdma-exec from where make install-cli puts it.
install -D -m 0755 $R/bin/rdma-exec /usr/local/lib/rdma-macvlan/rdma-exec

say "starting the engine (dockerd.sh start $ddir $engine -- --live-restore)"
if ! env_line=$(bash $R/scripts/dockerd.sh start "$ddir" "$engine" -- --live-restore 2>"/tmp/dockerd-start.$engine"); then
  abort "setup: $engine dockerd starts" "$(tail -n 20 "/tmp/dockerd-start.$engine")"
fi
eval "$env_line"
say "engine $(docker version --format 'server {{.Server.Version}}, client {{.Client.Version}}' 2>&1) answers"

say "importing the test image (from the VM's root: rdma-core tools, pyverbs)"
bash $R/vm-image.sh /run/rmv-image.tar || abort "setup: the test image's tar (vm-image.sh)"
dk import /run/rmv-image.tar "$IMAGE" >/dev/null || abort "setup: docker import of the test image"
say "image imported ($(du -m /run/rmv-image.tar | cut -f1) MB)"

# --- the managed plugin -----------------------------------------------------------------------
if ! out=$(dk plugin create "$PLUGIN" $R/plugin 2>&1 && dk plugin set "$PLUGIN" RDMA_MACVLAN_LOG_LEVEL=debug 2>&1 &&
  dk plugin enable "$PLUGIN" 2>&1); then
  abort "setup: docker plugin create + enable of the managed plugin (default mounts: real /sys)" "$out"
fi
pid=$(dk plugin inspect -f '{{.Id}}' "$PLUGIN")
SOCK=/run/docker/plugins/$pid/rdma-macvlan.sock
pass "the managed plugin is enabled and serves $SOCK"

# The runtime, registered (not as the default): docker rdma run starts containers through it.
install -D -m 0755 $R/bin/rdma-macvlan-runtime /usr/local/lib/rdma-macvlan/rdma-macvlan-runtime
check "docker rdma runtime install (the runtime docker rdma run uses)" dk rdma runtime install --config-file "$ddir/daemon.json"
kill -HUP "$(cat "$ddir/dockerd.spawned")"
# shellcheck disable=SC2016 # a Go template
check "dockerd lists the runtime rdma-macvlan after SIGHUP" \
  poll 30 sh -c 'docker info -f "{{range \$k, \$v := .Runtimes}}{{\$k}} {{end}}" | grep -qw rdma-macvlan'

# --- docker rdma doctor, networks ---------------------------------------------------------------
out=$(dk rdma doctor 2>&1)
rc=$?
# The VM's root file system is in memory: the plugin's default mount sources (/var/lib/rdma-macvlan,
# /etc/cdi) are on it, and doctor rightly fails them as emptied by a reboot. Nothing else may fail.
others=$(printf '%s\n' "$out" | grep '^FAIL' | grep -v '^FAIL  mount \(state\|cdi\) .*on a tmpfs that a reboot empties')
mounts=$(printf '%s\n' "$out" | grep -c '^FAIL  mount \(state\|cdi\) .*on a tmpfs that a reboot empties')
root=$(stat -f -c %T /)
if [ $rc = 0 ]; then
  pass "docker rdma doctor: exit 0"
elif [ -z "$others" ] && [ "$mounts" = 2 ] && { [ "$root" = tmpfs ] || [ "$root" = ramfs ]; }; then
  pass "docker rdma doctor: only the state and cdi mounts fail, on the VM's in-memory root ($root)"
else
  fail "docker rdma doctor: nothing fails but the mounts on the VM's in-memory root (got $rc; root $root)" "$out"
fi

# IPv4-only; dual stack with gid_check=strict.
check "docker network create rn4 (IPv4 only) on p0" \
  dk network create -d $PLUGIN --subnet 10.30.0.0/24 -o parent=$PARENT rn4
check "docker network create rn6 (dual stack, gid_check=strict) on p0" \
  dk network create -d $PLUGIN --ipv6 --subnet 10.31.0.0/24 --subnet fd00:31::/64 -o parent=$PARENT -o gid_check=strict rn6

# The fabric checks of the networks' parent: p0 is a veth, whose driver has no DCB, so the real
# kernel answers "operation not supported" and doctor says "not reported by this NIC" (an INFO);
# nothing but the two in-memory mounts may fail.
out=$(dk rdma doctor --traffic-class 106 2>&1)
others=$(printf '%s\n' "$out" | grep '^FAIL' | grep -v '^FAIL  mount \(state\|cdi\) .*on a tmpfs that a reboot empties')
if printf '%s\n' "$out" | grep -Eq "^INFO +DCB $PARENT +PFC, trust mode and the DSCP map: .*not reported by this NIC" && [ -z "$others" ]; then
  pass "docker rdma doctor --traffic-class 106: DCB of $PARENT not reported by this NIC, and nothing fails for it"
else
  fail "docker rdma doctor --traffic-class 106: DCB of $PARENT not reported by this NIC, and nothing fails for it" "$out"
fi

# --- two RDMA containers -----------------------------------------------------------------------
ip1=10.30.0.11 ip2=10.30.0.12
check "docker rdma run c1 on rn4" dk rdma run -d --name c1 --net rn4 --ip $ip1 "$IMAGE" sleep infinity
if [ "$engine" = current ]; then
  # CDI, the plain docker way.
  check "docker run --device rdma-macvlan/hca=$HCA c2 on rn4 (CDI)" dk run -d --name c2 --net rn4 --ip $ip2 \
    --device rdma-macvlan/hca=$HCA --cap-add IPC_LOCK --ulimit memlock=-1:-1 "$IMAGE" sleep infinity
else
  check "docker rdma run c2 on rn4" dk rdma run -d --name c2 --net rn4 --ip $ip2 "$IMAGE" sleep infinity
fi
out=$(dk rdma run --dry-run --net rn4 "$IMAGE" true 2>&1)
say "docker rdma run --dry-run: $out"

# One exec per container (each costs seconds under emulation): its device nodes, CapEff,
# ulimit -l, eth0's MAC and disable_ipv6, and ibv_devinfo -v once its IPv4 GID is in sysfs.
# shellcheck disable=SC2016 # expanded in the container
probe_cmd='ls /dev/infiniband | tr "\n" " "; echo; sed -n "s/^CapEff:[[:space:]]*//p" /proc/self/status
ulimit -l; cat /sys/class/net/eth0/address; cat /proc/sys/net/ipv6/conf/eth0/disable_ipv6 2>/dev/null || echo absent
ibv_devinfo -v -d '$HCA' 2>&1'
# probe CONTAINER: writes /tmp/probe.CONTAINER; line 1 nodes, 2 CapEff, 3 ulimit -l, 4 MAC, 5 disable_ipv6, then ibv_devinfo.
probe() { dk exec "$1" sh -c "$probe_cmd" >"/tmp/probe.$1" 2>&1; }
pline() { sed -n "$2p" "/tmp/probe.$1"; }
poll 30 q index $HCA $PORT $ip1 || true
poll 30 q index $HCA $PORT $ip2 || true
for c in c1 c2; do
  probe $c
  nodes=$(pline $c 1)
  if [ "$nodes" = "rdma_cm uverbs0 " ]; then pass "$c: /dev/infiniband holds only rdma_cm and uverbs0"; else fail "$c: /dev/infiniband holds only rdma_cm and uverbs0" "got: $nodes" "$(head -n 5 /tmp/probe.$c)"; fi
  capeff=$(pline $c 2)
  if [[ $capeff =~ ^[0-9a-f]+$ ]] && (((0x$capeff >> 14) & 1)); then pass "$c: CapEff has CAP_IPC_LOCK ($capeff)"; else fail "$c: CapEff has CAP_IPC_LOCK" "CapEff $capeff"; fi
  lim=$(pline $c 3)
  if [ "$lim" = unlimited ]; then pass "$c: ulimit -l is unlimited"; else fail "$c: ulimit -l is unlimited" "got $lim"; fi
done

# GID index of each container's IPv4 address: ibv_devinfo in it, docker rdma inspect, /v1/status, sysfs.
declare -A idx
inspect_has_index() { docker rdma inspect --format json "$1" >"/tmp/inspect.$1" 2>&1 && q inspect-index "/tmp/inspect.$1"; }
for c in c1 c2; do
  ip=$ip1
  [ $c = c2 ] && ip=$ip2
  k=$(q index $HCA $PORT "$ip")
  d=$(q devinfo-index /tmp/probe.$c "$ip")
  poll 30 inspect_has_index $c || true
  i=$(q inspect-index /tmp/inspect.$c)
  s=$(q status-gids "$SOCK" "$ip" | awk '$2 == "RoCE_v2" && $3 == "::ffff:'"$ip"'" {print $1}')
  idx[$c]=$k
  say "$c ($ip): sysfs $k, ibv_devinfo in the container ${d:-none}, docker rdma inspect ${i:-none}, /v1/status ${s:-none}"
  if [ -n "$k" ] && [ "$k" = "$d" ] && [ "$k" = "$i" ] && [ "$k" = "$s" ]; then
    pass "$c: its IPv4 GID is RoCE v2 at index $k in ibv_devinfo -v (in the container), docker rdma inspect, /v1/status and sysfs"
  else
    fail "$c: its IPv4 GID index agrees in ibv_devinfo, docker rdma inspect, /v1/status and sysfs" \
      "sysfs '$k' devinfo '$d' inspect '$i' status '$s'" "$(grep GID /tmp/probe.$c)" "$(cat /tmp/inspect.$c)"
  fi
done
# docker rdma run started the workload through rdma-exec: its environment (PID 1's; docker exec
# does not inherit it) has the kernel's index.
for c in c1 c2; do
  [ $c = c2 ] && [ "$engine" = current ] && continue # c2 is a plain docker run there
  g=$(dk exec $c cat /proc/1/environ 2>&1 | tr '\0' '\n' | sed -n 's/^NCCL_IB_GID_INDEX=//p')
  if [ -n "${idx[$c]}" ] && [ "$g" = "${idx[$c]}" ]; then
    pass "$c: the workload's NCCL_IB_GID_INDEX ($g) is the kernel's index of its IPv4 RoCE v2 GID"
  else
    fail "$c: the workload's NCCL_IB_GID_INDEX is the kernel's index" "env '$g' sysfs '${idx[$c]}'"
  fi
done
# perftest with what the workload was given: an ib_write_bw server and client in c1, both with
# GID index $NCCL_IB_GID_INDEX, connect with the container's own GID and bring their QPs to RTR
# (the writes themselves fail: rxe does not carry traffic through macvlan children); with the
# index of an empty slot (60; perftest takes 0-64) the same run fails as users see it with a
# wrong index, so the check can fail. rdma_cm binds the address of $NCCL_SOCKET_IFNAME.
# shellcheck disable=SC2016 # expanded in the container
out=$(dk exec c1 sh -c 'eval "$(tr "\0" "\n" </proc/1/environ | grep -E "^(NCCL_IB_GID_INDEX|NCCL_SOCKET_IFNAME)=" | sed "s/^/export /")"
  echo "index $NCCL_IB_GID_INDEX ifname $NCCL_SOCKET_IFNAME"
  bw() { # INDEX: server and client on 127.0.0.1, a few iterations, bounded
    timeout 20 ib_write_bw -d '$HCA' -x "$1" -n 5 -F >/dev/shm/bw.srv 2>&1 &
    sleep 2
    timeout 15 ib_write_bw -d '$HCA' -x "$1" -n 5 -F 127.0.0.1 >/dev/shm/bw.cli 2>&1
    echo "bw $1 client $?"; wait; cat /dev/shm/bw.srv /dev/shm/bw.cli | grep -iE "fail|error|BW|bytes|GID" | head -n 8
  }
  bw "$NCCL_IB_GID_INDEX"
  bw 60
  i=$(echo "$NCCL_SOCKET_IFNAME" | sed "s/^=*//")
  a=$(busybox ip -4 -o addr show dev "$i" | sed -n "s/.* inet \([0-9.]*\)\/.*/\1/p")
  o=$(timeout 3 rping -s -a "$a" -C 1 2>&1); echo "rping $? $a"; echo "$o" | tail -n 3' 2>&1)
good=$(sed -n "/^bw ${idx[c1]:-x} client/,/^bw 60 client/p" <<<"$out")
bad=$(sed -n '/^bw 60 client/,/^rping /p' <<<"$out")
if grep -Eq "GID index +: ${idx[c1]:-x} *\$" <<<"$good" && ! grep -q 'Failed to modify QP' <<<"$good" && grep -q 'Failed to modify QP' <<<"$bad"; then
  pass "c1: ib_write_bw -x \$NCCL_IB_GID_INDEX (the workload's) brings its QPs to RTR; an empty slot's index fails as a wrong index does"
else
  fail "c1: ib_write_bw -x \$NCCL_IB_GID_INDEX brings its QPs to RTR; an empty slot's index fails" "$out"
fi
say "ib_write_bw in c1: $(tr '\n' ' ' <<<"$out" | cut -c1-600)"
if grep -q "^rping 124 $ip1\$" <<<"$out"; then
  pass "c1: rdma_cm binds the address of \$NCCL_SOCKET_IFNAME ($ip1)"
else
  fail "c1: rdma_cm binds the address of \$NCCL_SOCKET_IFNAME" "$out"
fi
if [ -n "${idx[c1]}" ] && [ "${idx[c1]}" != "${idx[c2]}" ]; then
  pass "c1 and c2 have different GID indexes (${idx[c1]}, ${idx[c2]})"
else
  fail "c1 and c2 have different GID indexes" "c1 '${idx[c1]}' c2 '${idx[c2]}'"
fi

# What an IPv4-only network's container holds: IPv6 on or off in it, a link-local GID or not.
linklocal_probe() { # CONTAINER NETWORK-LABEL: sets ll_count, the link-local GIDs it got
  local c=$1 label=$2 ll n
  ll=$(q linklocal "$(pline "$c" 4)")
  n=$(q gids $HCA $PORT | awk -v g="$ll" '$3 == g' | wc -l)
  measured "$label: container $c eth0 disable_ipv6=$(pline "$c" 5), link-local $ll, its GID entries: $n"
  ll_count=$n
}
sleep 2 # a link-local GID would follow the address's DAD; give it time
linklocal_probe c1 "IPv4-only network"
ll4=$ll_count
ep=$(q status-ep "$SOCK" $ip1)
case "$ep" in
  rdma_ready=true*) pass "c1: /v1/status says rdma_ready (the driver expected exactly what the kernel added: $ll4 link-local GID)" ;;
  *) fail "c1: /v1/status says rdma_ready" "$ep" ;;
esac

# rdma_cm: binds the container's own address, refuses the other container's.
out=$(dk exec c1 timeout 3 rping -s -a $ip1 -C 1 2>&1)
rc=$?
if [ $rc = 124 ]; then pass "c1: rdma_cm binds its own address $ip1 (rping -s listens until killed)"; else fail "c1: rdma_cm binds $ip1" "exit $rc: $out"; fi
out=$(dk exec c1 timeout 3 rping -s -a $ip2 -C 1 2>&1)
rc=$?
if [ $rc != 124 ] && [ $rc != 0 ]; then pass "c1: rdma_cm refuses c2's address $ip2 (exit $rc: $(printf '%s' "$out" | tail -n1))"; else fail "c1: rdma_cm refuses $ip2" "exit $rc: $out"; fi

# Memlock: 256 MiB under docker rdma run; ENOMEM under a plain docker run with 64 KiB.
out=$(dk exec c1 python3 $R/rmvq.py regmr $HCA $BIG 2>&1)
rc=$?
if [ $rc = 0 ]; then pass "c1 (docker rdma run): ibv_reg_mr of 256 MiB succeeds ($out)"; else fail "c1: ibv_reg_mr of 256 MiB succeeds" "exit $rc: $out"; fi
out=$(dk run --rm --net none --device /dev/infiniband/uverbs0 --ulimit memlock=$SMALL "$IMAGE" python3 $R/rmvq.py regmr $HCA $BIG 2>&1)
rc=$?
if [ $rc = 12 ]; then pass "plain docker run --ulimit memlock=$SMALL: ibv_reg_mr of 256 MiB fails with ENOMEM"; else fail "plain docker run --ulimit memlock=$SMALL: ibv_reg_mr fails with ENOMEM" "exit $rc: $out"; fi

# edge_probe NEED: fills the GID table on another link (fill0 on p0) until NEED slots are free,
# what a dual-stack container measured to take here; one is admitted and gets them all (the
# admission counts what the engine really gives), the next is refused with the reason.
used_at_least() { [ "$(q gids $HCA $PORT | wc -l)" -ge "$1" ]; }
edge_probe() {
  local need=$1 size used n batch i out rc
  size=$(find /sys/class/infiniband/$HCA/ports/$PORT/gids -mindepth 1 | wc -l)
  used=$(q gids $HCA $PORT | wc -l)
  n=$((size - used - need))
  fill=fill0
  if ! { ip link add $fill link $PARENT type macvlan mode bridge && sysctl -q -w net.ipv6.conf.$fill.disable_ipv6=1 &&
    ip link set $fill up; }; then
    fail "edge: filler link fill0" "$(ip link show)"
    return
  fi
  batch=$(for ((i = 0; i < n; i++)); do echo "address add 10.50.$((i / 250)).$((i % 250 + 1))/32 dev $fill"; done)
  ip -batch - <<<"$batch" || { fail "edge: $n filler addresses"; return; }
  if ! poll 120 used_at_least $((size - need)); then fail "edge: the kernel fills the table to $need free" "$(q gids $HCA $PORT | wc -l) used"; return; fi
  say "edge: $n filler addresses; $need of $size GID slots free"
  out=$(dk rdma run -d --name c4 --net rn6 --ip 10.31.0.14 --ip6 fd00:31::14 "$IMAGE" sleep infinity 2>&1)
  rc=$?
  if [ $rc = 0 ]; then
    if poll 30 q index $HCA $PORT fd00:31::14 && poll 10 q index $HCA $PORT 10.31.0.14; then
      pass "edge: with exactly $need slots free a dual-stack container is admitted and gets its GIDs"
    else
      fail "edge: with exactly $need slots free a dual-stack container gets its GIDs" "$(q status-gids "$SOCK" 10.31.0.14)"
    fi
  else
    fail "edge: with exactly $need slots free a dual-stack container is admitted (the driver's admission matches the kernel)" "exit $rc: $out" "$(q status-net "$SOCK")"
  fi
  out=$(dk rdma run -d --name c5 --net rn6 --ip 10.31.0.15 --ip6 fd00:31::15 "$IMAGE" sleep infinity 2>&1)
  rc=$?
  if [ $rc != 0 ] && printf '%s' "$out" | grep -q 'too full'; then
    pass "edge: the next dual-stack container on the strict network is refused: table full ($(printf '%s' "$out" | grep -o 'NetworkDriver.CreateEndpoint.*' | cut -c1-160))"
  else
    fail "edge: the next container is refused with the table full" "exit $rc: $out"
  fi
  dk rm -f c4 c5 >/dev/null 2>&1
  ip link del $fill
  fill=""
}

# --- dual stack, gid_check=strict ----------------------------------------------------------------
ip3=10.31.0.13 ip3v6=fd00:31::13
out=$(dk rdma run -d --name c3 --net rn6 --ip $ip3 --ip6 $ip3v6 "$IMAGE" sleep infinity 2>&1)
rc=$?
if [ $rc = 0 ]; then
  pass "docker rdma run c3 on rn6 (dual stack, gid_check=strict) starts"
  for a in $ip3 $ip3v6; do
    if poll 30 q index $HCA $PORT "$a"; then pass "c3: the kernel holds a RoCE v2 GID for $a (index $(q index $HCA $PORT "$a"))"; else fail "c3: a RoCE v2 GID for $a" "$(q gids $HCA $PORT)"; fi
  done
  sleep 2
  probe c3
  linklocal_probe c3 "dual-stack network"
  ll6=$ll_count
  want=$((2 + ll6))
  got=$(q status-gids "$SOCK" $ip3 | wc -l)
  ep=$(q status-ep "$SOCK" $ip3)
  say "c3 /v1/status: $ep; GIDs $(q status-gids "$SOCK" $ip3 | tr '\n' ' ')"
  if [ "$got" = "$want" ]; then pass "c3: /v1/status lists its $want GIDs (IPv4, IPv6, link-local: $ll6)"; else fail "c3: /v1/status lists $want GIDs" "got $got: $(q status-gids "$SOCK" $ip3)"; fi
  case "$ep" in
    rdma_ready=true*) pass "c3: rdma_ready" ;;
    *) fail "c3: rdma_ready" "$ep" ;;
  esac
  note=$(q strict-note "$SOCK")
  measured "gid_check=strict note in /v1/status: '${note}'"
  if [ "$engine" = debian ]; then
    # Docker 20.10 asks (ProgramExternalConnectivity) before the container has its addresses.
    if [ -n "$note" ]; then pass "20.10: strict falls back to the watch and /v1/status says why"; else fail "20.10: strict falls back to the watch and /v1/status says why" "no gid_check_note"; fi
  else
    if [ -z "$note" ]; then pass "current engine: strict holds the start (no gid_check_note)"; else fail "current engine: strict holds the start (no gid_check_note)" "$note"; fi
  fi
  edge_probe $((2 + ll6))
else
  fail "docker rdma run c3 on rn6 (dual stack, gid_check=strict) starts" "exit $rc: $out"
fi

# --- plugin disable/enable, dockerd restart with running containers ------------------------------
rping_ok() { dk exec c1 timeout 3 rping -s -a $ip1 -C 1 >/dev/null 2>&1; [ $? = 124 ]; }
same_gid() { [ "$(q index $HCA $PORT $ip1)" = "${idx[c1]}" ]; }
check "docker plugin disable -f with c1 running" dk plugin disable -f "$PLUGIN"
check "c1 keeps its GID at index ${idx[c1]} while the plugin is disabled" same_gid
check "docker plugin enable" dk plugin enable "$PLUGIN"
pid=$(dk plugin inspect -f '{{.Id}}' "$PLUGIN")
SOCK=/run/docker/plugins/$pid/rdma-macvlan.sock
kept() { same_gid && rping_ok; }
check "after plugin disable/enable: c1 keeps GID index ${idx[c1]} and rdma_cm binds $ip1" kept
ready1() { q status-ep "$SOCK" $ip1 | grep -q rdma_ready=true; }
if poll 30 ready1; then pass "after plugin disable/enable: /v1/status lists c1 rdma_ready"; else fail "after plugin disable/enable: /v1/status lists c1 rdma_ready" "$(q status-ep "$SOCK" $ip1)"; fi

restart_dockerd() {
  local p path
  local -a argv
  p=$(cat "$ddir/dockerd.spawned")
  mapfile -d '' -t argv <"/proc/$p/cmdline"
  path=$(tr '\0' '\n' <"/proc/$p/environ" | sed -n 's/^PATH=//p')
  kill -TERM "$p"
  for _ in $(seq 600); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$p" 2>/dev/null && { echo "dockerd $p did not stop"; return 1; }
  PATH=$path setsid "${argv[@]}" </dev/null >>"$ddir/dockerd.log" 2>&1 &
  printf '%s\n' "$!" >"$ddir/dockerd.spawned"
  poll 240 docker info || { echo "dockerd did not answer again"; return 1; }
}
t1=$SECONDS
check "dockerd restarted (--live-restore) with c1 running" restart_dockerd
say "dockerd restart took $((SECONDS - t1)) s"
check "after the dockerd restart c1 still runs" sh -c "[ \"\$(docker inspect -f '{{.State.Running}}' c1)\" = true ]"
check "after the dockerd restart c1 keeps GID index ${idx[c1]}" poll 30 same_gid
if rping_ok; then pass "after the dockerd restart rdma_cm in c1 binds $ip1"; else fail "after the dockerd restart rdma_cm in c1 binds $ip1"; fi

# --- docker rdma selftest: as far as Soft-RoCE can go ----------------------------------------------
# Two containers on rn4: each sees only its HCA and has the kernel's index; the data path between
# two macvlan children of p0 is what rxe cannot carry, and the self-test must say exactly that at
# the first data step (or pass, were rxe to carry it).
out=$(timeout -k 5 600 docker rdma selftest --json --timeout 60s rn4 "$IMAGE" 2>/tmp/selftest.err)
rc=$?
verdict=$(python3 -c '
import json, sys
r = json.loads(sys.argv[1]); rc = int(sys.argv[2])
steps = r["steps"]; names = [s["name"] for s in steps]; st = [s["status"] for s in steps]
setup = ["network", "start", "devices", "gid index", "devices", "gid index", "tools"]
if names[:7] != setup or any(s != "ok" for s in st[:7]):
    print("bad setup steps: %s" % [(s["name"], s["status"], s["detail"][:200]) for s in steps]); sys.exit()
if r["passed"] and rc == 0:
    print("passed: %s" % "; ".join(s["name"] + " " + s["status"] for s in steps[7:])); sys.exit()
last = steps[-1]
if rc == 1 and last["status"] == "fail" and last["name"] in ("rc pingpong", "rdma_cm", "ib_write_bw", "ib_write_lat") and \
   "is Soft-RoCE (rxe), which cannot carry RDMA between macvlan children of its parent" in last["detail"] and last["command"]:
    print("rxe-limit: %s: %s" % (last["name"], last["detail"][:300])); sys.exit()
print("unexpected: rc %d, last %s" % (rc, last))
' "$out" "$rc" 2>&1)
measured "docker rdma selftest rn4: $verdict"
case "$verdict" in
  passed:* | rxe-limit:*) pass "docker rdma selftest: network, both containers ready, only their HCA, the kernel's index, the tools; then ${verdict%%:*}" ;;
  *) fail "docker rdma selftest: up to the data path, then a pass or rxe's limit said as such" "$verdict" "$(head -c 2000 /tmp/selftest.err)" ;;
esac
left=$(docker ps -aq --filter name=rdma-selftest-)
if [ -z "$left" ]; then pass "docker rdma selftest removed its containers"; else fail "docker rdma selftest removed its containers" "$left"; fi

# --- removal --------------------------------------------------------------------------------------
gone() { ! q index $HCA $PORT "$1" >/dev/null; }
present=()
for a in $ip1 $ip2 $ip3 $ip3v6; do
  if q index $HCA $PORT "$a" >/dev/null; then present+=("$a"); fi
done
say "GID entries present before docker rm -f: ${present[*]}"
check "docker rm -f c1 c2 c3" dk rm -f c1 c2 c3
for a in "${present[@]}"; do
  check "the GID entry of $a is gone after docker rm -f" poll 30 gone "$a"
done
check "docker network rm rn4 rn6" dk network rm rn4 rn6
links=$(ip -o link show | awk -F': ' '$2 ~ /^rmv/ {print $2}')
if [ -z "$links" ]; then pass "no rmv* link left in the host namespace"; else fail "no rmv* link left" "$links"; fi
if [ ! -e /etc/cdi/rdma-macvlan-$HCA.json ]; then pass "no CDI spec left"; else fail "no CDI spec left" "$(ls /etc/cdi)"; fi
left=$(find /var/lib/rdma-macvlan -name '*.json' 2>/dev/null)
if [ -z "$left" ]; then pass "no network or endpoint state left"; else fail "no network or endpoint state left" "$left"; fi

# --- bonds and VLANs (on the current engine: what is checked is the kernel's and the plugin's; the
# engine only passes the parent option on, and Docker 20.10 took twice as long here under TCG) ------
if [ "$engine" = current ]; then
  # shellcheck source=test/kernel/vm/vm-bond.sh
  . "$R/vm-bond.sh"
  bond_checks
fi

# --- the runtime, two Soft-RoCE devices (on the current engine: Docker 20.10 runs make e2e-runtime) --
if [ "$engine" = current ]; then
  # shellcheck source=test/kernel/vm/vm-runtime.sh
  . "$R/vm-runtime.sh"
  runtime_checks
fi

# --- the plugin's log lines in the engine's log ---------------------------------------------------
plog=$(grep -F "plugin=$pid" "$ddir/dockerd.log")
infos=$(printf '%s\n' "$plog" | grep -c '^time=.* level=info msg=.*level=\(info\|debug\)')
bad=$(printf '%s\n' "$plog" | grep '^time=.* level=error msg=.*level=\(info\|debug\|warn\)')
say "dockerd.log: $(printf '%s\n' "$plog" | grep -c .) lines of the plugin; e.g. $(printf '%s\n' "$plog" | grep -m1 'msg=ready')"
if [ "$infos" -gt 0 ] && [ -z "$bad" ]; then
  pass "the engine logs the plugin's info and debug lines at level=info ($infos lines), none at level=error"
else
  fail "the engine logs the plugin's info and debug lines at level=info, none at level=error" "info: $infos" "$(printf '%s\n' "$bad" | head -n 5)"
fi

summary
