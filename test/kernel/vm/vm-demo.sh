#!/bin/bash
# The narrated demo of `make demo`, inside the Soft-RoCE VM (vm-test.sh runs
# it when run.sh is given --demo): Debian's Docker 20.10 with the managed
# rdma-macvlan plugin and `docker rdma`, on a real kernel RDMA stack (rxe0 on
# the veth p0). It prints each command as a user would type it and what it
# answers, with a few words of explanation. Exit 1 when a step fails.
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
R=/opt/rmv
HCA=rxe0
PARENT=p0
IMAGE=rdma-demo
PLUGIN=rdma-macvlan:latest
ddir=/run/rmv-demo
export DOCKERD_START_TIMEOUT=300 DOCKER_CONFIG=/run/rmv-demo-cfg
t0=$SECONDS

step() { printf '\n[%3ds] %s\n' "$((SECONDS - t0))" "$*"; }
note() { printf '       %s\n' "$@"; }
# show CMD...: prints the command, runs it, prints its output indented.
show() {
  local out rc
  printf '  $ %s\n' "$*"
  out=$("$@" 2>&1)
  rc=$?
  [ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/    /'
  return $rc
}
die() {
  printf '\ndemo: %s\n' "$*"
  exit 1
}
q() { python3 "$R/rmvq.py" "$@"; }
cleanup() {
  if [ -d "$ddir" ]; then bash "$R/scripts/dockerd.sh" stop "$ddir" >/dev/null 2>&1; fi
}
trap cleanup EXIT

echo "rdma-macvlan on a real kernel RDMA stack: Linux $(uname -r) in a VM, Soft-RoCE (rdma_rxe)"
step "The RoCE parent: a veth p0 with the Soft-RoCE device rxe0 on it"
if ! { ip link add $PARENT type veth peer name ${PARENT}peer && ip link set $PARENT up &&
  ip link set ${PARENT}peer up; }; then
  die "veth p0"
fi
show rdma link add $HCA type rxe netdev $PARENT || die "rdma link add"
show rdma link show
sleep 1
base=$(q gids $HCA 1 | wc -l)
note "rxe0 port 1: $(find /sys/class/infiniband/$HCA/ports/1/gids -mindepth 1 | wc -l) GID slots, $base in use by p0 itself"

step "Starting Docker $(dockerd --version | awk '{print $3}' | tr -d ,) (private dockerd, containerd, runc)"
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mkdir -p /var/lib/rdma-macvlan /etc/cdi "$DOCKER_CONFIG/cli-plugins"
install -m 0755 $R/bin/docker-rdma "$DOCKER_CONFIG/cli-plugins/docker-rdma"
# docker rdma run mounts rdma-exec from where make install-cli puts it.
install -D -m 0755 $R/bin/rdma-exec /usr/local/lib/rdma-macvlan/rdma-exec
env_line=$(bash $R/scripts/dockerd.sh start "$ddir" debian 2>/run/demo-dockerd.err) ||
  die "dockerd did not start: $(tail -n 5 /run/demo-dockerd.err)"
eval "$env_line"
note "dockerd answers; importing an image made from the VM's root (rdma-core tools, pyverbs)"
{ bash $R/vm-image.sh /run/rmv-image.tar && docker import /run/rmv-image.tar $IMAGE >/dev/null; } || die "docker import"

step "Installing the managed plugin (what 'make install' does on a host)"
show docker plugin create $PLUGIN $R/plugin || die "plugin create"
show docker plugin enable $PLUGIN || die "plugin enable"

step "Registering the OCI runtime with dockerd (what 'docker rdma runtime install' does on a host)"
install -D -m 0755 $R/bin/rdma-macvlan-runtime /usr/local/lib/rdma-macvlan/rdma-macvlan-runtime
show docker rdma runtime install --config-file "$ddir/daemon.json" || die "runtime install"
kill -HUP "$(cat "$ddir/dockerd.spawned")"
sleep 2

step "An rdma-macvlan network on the RoCE parent"
show docker network create -d $PLUGIN --subnet 192.168.7.0/24 -o parent=$PARENT roce || die "network create"

step "Is this host ready for RDMA containers?"
show docker rdma doctor
note "(exit $?)"

step "Two containers: docker rdma run adds the HCA's device nodes, CAP_IPC_LOCK and memlock=unlimited"
show docker rdma run --dry-run --net roce $IMAGE true
show docker rdma run -d --name ra --net roce --ip 192.168.7.11 $IMAGE sleep infinity || die "docker rdma run ra"
show docker rdma run -d --name rb --net roce --ip 192.168.7.12 $IMAGE sleep infinity || die "docker rdma run rb"
# shellcheck disable=SC2016 # expanded in the container
show docker exec ra sh -c 'ls /dev/infiniband; grep CapEff /proc/self/status; echo "ulimit -l: $(ulimit -l)"'

step "Each container has its own RoCE GID; the plugin reports its index"
for _ in $(seq 20); do
  q index $HCA 1 192.168.7.12 >/dev/null && q index $HCA 1 192.168.7.11 >/dev/null && break
  sleep 0.5
done
show docker rdma ls
show docker rdma inspect ra
show docker rdma inspect rb
note "What the kernel shows inside each container:"
for c in ra rb; do
  ip=192.168.7.11
  [ $c = rb ] && ip=192.168.7.12
  printf '  $ docker exec %s ibv_devinfo -v | grep %s\n' $c "$ip"
  docker exec $c ibv_devinfo -v -d $HCA 2>&1 | grep -F "$ip" | sed 's/^[[:space:]]*/    /'
done
note "and in sysfs on the host:"
q gids $HCA 1 | awk '{printf "    GID[%4d] %-24s %-8s ndev %s\n", $1, $3, $2, $4}'

step "rdma_cm is namespace-aware: a container binds its own address, not its neighbour's"
printf '  $ docker exec ra timeout 3 rping -s -a 192.168.7.11 -C 1\n'
docker exec ra timeout 3 rping -s -a 192.168.7.11 -C 1 >/dev/null 2>&1
rc=$?
if [ $rc = 124 ]; then note "    listening on 192.168.7.11 until timeout stopped it (exit 124): bound"; else note "    exit $rc: not bound"; fi
show docker exec ra timeout 3 rping -s -a 192.168.7.12 -C 1
note "(exit $?: refused)"

step "Memlock: RDMA pins memory; the kernel charges it to RLIMIT_MEMLOCK"
show docker exec ra python3 $R/rmvq.py regmr $HCA $((256 << 20))
show docker run --rm --net none --device /dev/infiniband/uverbs0 --ulimit memlock=65536 $IMAGE \
  python3 $R/rmvq.py regmr $HCA $((256 << 20))
note "(exit $?: ENOMEM) - a plain docker run with a 64 KiB limit cannot register 256 MiB; docker rdma run can."

step "What Soft-RoCE cannot show"
note "Soft-RoCE (rxe) sends and receives only in the initial network namespace on its own netdev:" \
  "RDMA traffic between macvlan children does not pass here. ConnectX-class NICs do that in" \
  "hardware; this demo shows the device nodes, GIDs, rdma_cm binding and memlock, not traffic."

step "Clean-up"
show docker rm -f ra rb
show docker network rm roce
for _ in $(seq 20); do
  [ "$(q gids $HCA 1 | wc -l)" = "$base" ] && break
  sleep 0.5
done
note "GID entries in use: $(q gids $HCA 1 | wc -l) (p0's own: $base); rmv* links left: $(ip -o link show | grep -c ': rmv')"
step "Done in $((SECONDS - t0)) s. On a host with RoCE hardware: make install, then the same commands with -o parent=<your RoCE netdev>."
