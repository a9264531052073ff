# shellcheck shell=bash
# Sourced by vm-docker.sh, with its engine, plugin ($SOCK), image and
# helpers (pass, fail, check, dk, q, poll, say, measured): bonds and VLANs
# on the real kernel, each check against what the kernel shows.
#   - bond0: an active-backup bond of two veths with Soft-RoCE (rxeb) on the
#     bond, as RoCE LAG gives a bond its own RDMA device: a network on it,
#     docker rdma doctor checking the bond's ports (a bond has no DCB),
#     two containers whose GID index is the kernel's; a failover; then a
#     re-registration of the device (what a firmware reset or devlink reload
#     does), which adds every entry again in the kernel's order; after each,
#     what /v1/status and docker rdma inspect say against the kernel's table.
#   - refused: a port of bond0, a port of a Linux bridge, and a bond whose
#     ports each have their own RDMA device (bond1, rxe on each port).
#   - VLANs on bond0: one the plugin creates (owner mark, deleted with its
#     network), one made by hand (kept), and a VLAN on an 802.1ad VLAN
#     (QinQ), each with a container whose GID entry is the kernel's and
#     whose link sits on that VLAN.
# Leaves nothing: bond_teardown deletes every link and device it made.

BHCA=rxeb
# What the refusal of a bond without a LAG device says (the driver's words).
BOND_NO_LAG_MSG='bond "bond1" has no RDMA device of its own, but its ports have theirs:'
bond_links=(bond0 bond1 rbr0 b0s1 b0s2 b1s1 b1s2 brp0)

bond_teardown() {
  local l
  for c in b1 b2 v1 v2 q1; do dk rm -f "$c" >/dev/null 2>&1; done
  for n in rb rv1 rv2 rq; do dk network rm "$n" >/dev/null 2>&1; done
  for d in $BHCA rxes1 rxes2 rxel1 rxel2 rxetmp0 rxetmp1 rxetmp2 rxetmp3; do rdma link delete "$d" 2>/dev/null; done
  for l in rmvtmp0 rmvtmp1 rmvtmp2 rmvtmp3; do ip link del "$l" 2>/dev/null; done
  for l in bond0.300.400 bond0.300 bond0.200 bond0.100 "${bond_links[@]}"; do ip link del "$l" 2>/dev/null; done
}

# bond_up NAME PORT1 PORT2: an active-backup bond of two veths (their peers up), up.
bond_up() {
  local b=$1 s
  ip link add "$b" type bond mode active-backup miimon 100 || return 1
  for s in "$2" "$3"; do
    ip link add "$s" type veth peer name "${s}p" || return 1
    ip link set "$s" master "$b" || return 1
    ip link set "${s}p" up || return 1
  done
  ip link set "$b" up
}

# uverbs_of HCA: the name of HCA's uverbs node (uverbsN).
uverbs_of() { grep -lx "$1" /sys/class/infiniband_verbs/uverbs*/ibdev 2>/dev/null | head -n1 | xargs -r dirname | xargs -r basename; }
# other_active: bond0's active port is no longer $bond_act.
other_active() { [ "$(cat /sys/class/net/bond0/bonding/active_slave)" != "$bond_act" ]; }
# rb_problem: the problems /v1/status lists for the network on bond0.
rb_problem() { q status-parent "$SOCK" bond0 problems; }
rb_problem_seen() { rb_problem | grep -q 'bond "bond0" has no RDMA device of its own'; }
# kernel_idx IP: the kernel's index of IP's RoCE v2 entry on rxeb.
kernel_idx() { q index $BHCA 1 "$1"; }
status_idx() { q status-gids "$SOCK" "$1" | awk -v g="::ffff:$1" '$2 == "RoCE_v2" && $3 == g {print $1}'; }
inspect_idx() { docker rdma inspect --format json "$1" >"/tmp/inspect.$1" 2>&1 && q inspect-index "/tmp/inspect.$1"; }
env_idx() { dk exec "$1" cat /proc/1/environ 2>/dev/null | tr '\0' '\n' | sed -n 's/^NCCL_IB_GID_INDEX=//p'; }
# agree CONTAINER IP WHAT: the kernel's index of IP, /v1/status's and docker rdma inspect's are one.
agree() {
  local c=$1 ip=$2 what=$3 k s i
  poll 30 kernel_idx "$ip" || true
  k=$(kernel_idx "$ip")
  s=$(status_idx "$ip")
  i=$(inspect_idx "$c")
  if [ -n "$k" ] && [ "$k" = "$s" ] && [ "$k" = "$i" ]; then
    pass "$what: $c's index ($k) is the kernel's in /v1/status and docker rdma inspect"
  else
    fail "$what: $c's index is the kernel's in /v1/status and docker rdma inspect" "kernel '$k' status '$s' inspect '$i'" "$(q gids $BHCA 1)"
  fi
}
# drift_agrees CONTAINER IP GIVEN WHAT: /v1/status and docker rdma inspect
# report a move GIVEN->now exactly when the kernel moved the entry, and the
# endpoint is RDMA-ready again.
drift_agrees() {
  local c=$1 ip=$2 given=$3 what=$4 k s i ready
  k=$(kernel_idx "$ip")
  s=$(q status-drift "$SOCK" "$ip")
  inspect_idx "$c" >/dev/null
  i=$(q inspect-drift "/tmp/inspect.$c")
  if [ "$k" = "$given" ]; then
    if [ "$s" = none ] && [ "$i" = none ]; then
      pass "$what: $c kept index $given in the kernel's table, and neither /v1/status nor docker rdma inspect reports a move"
    else
      fail "$what: $c kept index $given: no move reported" "status '$s' inspect '$i'"
    fi
  else
    if [ "$s" = "$given->$k" ] && [ "$i" = "$given->$k" ]; then
      pass "$what: the kernel moved $c's entry $given->$k; /v1/status and docker rdma inspect both report $given->$k"
    else
      fail "$what: the kernel moved $c's entry $given->${k:-gone}: reported" "status '$s' inspect '$i'" "$(q gids $BHCA 1)"
    fi
  fi
  ready=$(q status-ep "$SOCK" "$ip")
  case "$ready" in
    rdma_ready=true*) pass "$what: $c is RDMA-ready again without a restart" ;;
    *) fail "$what: $c is RDMA-ready again without a restart" "$ready" ;;
  esac
}

bond_checks() {
  say "bonds and VLANs"
  bond_teardown
  if ! { modprobe bonding max_bonds=0 && modprobe bridge; }; then
    fail "bonds: modprobe bonding, bridge"
    return
  fi
  if ! { bond_up bond0 b0s1 b0s2 && rdma link add $BHCA type rxe netdev bond0; }; then
    fail "bonds: active-backup bond0 of two veths with Soft-RoCE $BHCA on it" "$(ip -d link show bond0 2>&1)"
    bond_teardown
    return
  fi
  measured "bond0: $(rdma link show $BHCA/1 2>&1)"

  declare -A given # each container's GID index as its workload was given it
  bond_refused_parents
  bond_network || return
  bond_failover
  bond_reregistration
  bond_vlans
  bond_removal
}

# A port of a bond or a bridge, and a bond whose ports each have their own device, are refused.
bond_refused_parents() {
  local out rc
  out=$(ip link add rmvmv0 link b0s2 type macvlan 2>&1)
  rc=$?
  ip link del rmvmv0 2>/dev/null
  if [ $rc != 0 ] && grep -q 'busy' <<<"$out"; then
    pass "kernel: a macvlan on a bond's port is refused ($out)"
  else
    fail "kernel: a macvlan on a bond's port is refused with EBUSY" "exit $rc: $out"
  fi
  out=$(dk network create -d "$PLUGIN" --subnet 10.61.0.0/24 -o parent=b0s2 rbad 2>&1)
  rc=$?
  if [ $rc != 0 ] && grep -qF 'parent "b0s2" is a port of bond "bond0"' <<<"$out" && grep -qF -- '-o parent=bond0' <<<"$out"; then
    pass "a port of bond0 is refused as a parent, naming the bond and the fix"
  else
    dk network rm rbad >/dev/null 2>&1
    fail "a port of bond0 is refused as a parent, naming the bond and the fix" "exit $rc: $out"
  fi
  ip link add rbr0 type bridge && ip link add brp0 type veth peer name brp0p && ip link set brp0 master rbr0
  out=$(dk network create -d "$PLUGIN" --subnet 10.61.0.0/24 -o parent=brp0 rbad 2>&1)
  rc=$?
  if [ $rc != 0 ] && grep -qF 'parent "brp0" is a port of bridge "rbr0"' <<<"$out"; then
    pass "a port of a Linux bridge is refused as a parent, naming the bridge"
  else
    dk network rm rbad >/dev/null 2>&1
    fail "a port of a Linux bridge is refused as a parent, naming the bridge" "exit $rc: $out"
  fi
  # A bond without a device of its own, its ports each with one: the kernel puts a macvlan's
  # entries on every port's table.
  if bond_up bond1 b1s1 b1s2 && rdma link add rxes1 type rxe netdev b1s1 && rdma link add rxes2 type rxe netdev b1s2; then
    sleep 2
    measured "bond1 (active port $(cat /sys/class/net/bond1/bonding/active_slave)): rxes1's table: $(q gids rxes1 1 | tr '\n' ' ')"
    measured "bond1: rxes2's table: $(q gids rxes2 1 | tr '\n' ' '); rdma link show: $(rdma link show | tr '\n' ' ')"
    out=$(dk network create -d "$PLUGIN" --subnet 10.61.0.0/24 -o parent=bond1 rbad 2>&1)
    rc=$?
    if [ $rc != 0 ] && grep -qF "$BOND_NO_LAG_MSG" <<<"$out" && grep -qF "b1s1 (RDMA device rxes1 port 1)" <<<"$out" && grep -qF "b1s2 (RDMA device rxes2 port 1)" <<<"$out" && grep -qF "RoCE LAG" <<<"$out"; then
      pass "a bond whose ports each have their own RDMA device (no LAG device) is refused, naming both"
    else
      dk network rm rbad >/dev/null 2>&1
      fail "a bond whose ports each have their own RDMA device is refused, naming both" "exit $rc: $out"
    fi
    # What the kernel does with a macvlan on such a bond, for the README.
    ip link add rmvmv1 link bond1 type macvlan && ip addr add 10.62.0.9/24 dev rmvmv1 && ip link set rmvmv1 up
    sleep 2
    measured "a macvlan on bond1 (10.62.0.9): entries on rxes1: $(q index rxes1 1 10.62.0.9 || echo none), on rxes2: $(q index rxes2 1 10.62.0.9 || echo none); active port $(cat /sys/class/net/bond1/bonding/active_slave)"
    if q index rxes1 1 10.62.0.9 >/dev/null && q index rxes2 1 10.62.0.9 >/dev/null; then
      pass "kernel: a macvlan on a bond without a LAG device gets its entry on every port's table"
    else
      fail "kernel: a macvlan on a bond without a LAG device gets its entry on every port's table" "$(q gids rxes1 1; q gids rxes2 1)"
    fi
    ip link del rmvmv1
  else
    fail "bonds: bond1 with rxe on each port"
  fi
}

# A network on bond0 and two containers on it; fails when the network cannot be made.
bond_network() {
  local out
  if ! out=$(dk network create -d "$PLUGIN" --subnet 10.60.0.0/24 -o parent=bond0 rb 2>&1); then
    fail "docker network create rb -o parent=bond0" "$out"
    bond_teardown
    return 1
  fi
  pass "docker network create rb -o parent=bond0 (Soft-RoCE on the bond)"
  local hca
  hca=$(q status-parent "$SOCK" bond0 hca)
  if [ "$hca" = "$BHCA/1" ]; then pass "rb's RDMA device is the bond's own, $BHCA port 1"; else fail "rb's RDMA device is $BHCA port 1" "got '$hca'"; fi
  # The plugin (sysfs at the host's /sys) asked the kernel's RDMA netlink, not the GID tables.
  local nl
  # shellcheck disable=SC2154 # pid and ddir are vm-docker.sh's
  nl=$(grep -F "plugin=$pid" "$ddir/dockerd.log" | grep -F "from the kernel's RDMA netlink view" | grep -F 'netdev=bond0' | tail -n1)
  if grep -qF "$BHCA" <<<"$nl"; then
    pass "rb: the plugin found $BHCA port 1 in the kernel's RDMA netlink view (rdma link show: netdev bond0)"
  else
    fail "rb: the plugin found $BHCA port 1 in the kernel's RDMA netlink view" "log: '$nl'" "$(rdma link show)"
  fi
  # doctor walks the bond down to its ports (a bond has no DCB of its own): each port's DCB is
  # read (veths: not reported), and the ports agree.
  out=$(dk rdma doctor 2>&1)
  if grep -Eq '^OK +bond ports bond0 +bond bond0 \(ports b0s1, b0s2\): a bond has no DCB of its own, its ports.* they agree' <<<"$out" &&
    grep -Eq '^INFO +DCB bond0 port b0s1 ' <<<"$out" && grep -Eq '^INFO +DCB bond0 port b0s2 ' <<<"$out"; then
    pass "docker rdma doctor: rb's parent bond0 is checked on its ports b0s1 and b0s2, which agree"
  else
    fail "docker rdma doctor: rb's parent bond0 is checked on its ports b0s1 and b0s2" "$(grep -i 'bond0' <<<"$out")"
  fi
  check "docker rdma run b1 on rb" dk rdma run -d --name b1 --net rb --ip 10.60.0.11 "$IMAGE" sleep infinity
  # A host address on the bond between the two: after a re-registration the kernel adds the host's
  # entries before the containers', so b1's entry moves.
  ip addr add 10.60.0.200/24 dev bond0
  check "docker rdma run b2 on rb" dk rdma run -d --name b2 --net rb --ip 10.60.0.12 "$IMAGE" sleep infinity
  local c ip
  for c in b1 b2; do
    ip=10.60.0.1${c#b}
    agree $c "$ip" "bond0"
    given[$c]=$(env_idx $c)
    if [ -n "${given[$c]}" ] && [ "${given[$c]}" = "$(kernel_idx "$ip")" ]; then
      pass "bond0: $c's workload was given the kernel's index (NCCL_IB_GID_INDEX=${given[$c]})"
    else
      fail "bond0: $c's workload was given the kernel's index" "env '${given[$c]}' kernel '$(kernel_idx "$ip")'"
    fi
  done
}

# A failover of bond0: each container's index against the kernel's, and the drift report.
bond_failover() {
  local act new before after c
  act=$(cat /sys/class/net/bond0/bonding/active_slave)
  bond_act=$act
  before=$(q gids $BHCA 1 | tr '\n' ' ')
  ip link set "$act" down
  if poll 20 other_active; then
    new=$(cat /sys/class/net/bond0/bonding/active_slave)
    pass "bond0 fails over from $act to $new (ip link set $act down)"
  else
    fail "bond0 fails over (ip link set $act down)" "$(cat /proc/net/bonding/bond0)"
  fi
  sleep 3 # the kernel's GID work runs in a work queue
  after=$(q gids $BHCA 1 | tr '\n' ' ')
  measured "bond0 failover $act->$new: rxeb's table before: $before"
  measured "bond0 failover: after: $after ($([ "$before" = "$after" ] && echo unchanged || echo changed))"
  for c in b1 b2; do
    drift_agrees $c 10.60.0.1${c#b} "${given[$c]}" "after the failover"
  done
  ip link set "$act" up
}

# bond0's device registered again, with another uverbs node: indexes, drift and the CDI spec.
bond_reregistration() {
  local before after c
  before=$(q gids $BHCA 1 | tr '\n' ' ')
  # Another device takes the freed uverbs number meanwhile, so $BHCA comes back with another one
  # (as a LAG toggle or devlink reload can): its CDI spec must follow.
  local uv_before uv_after spec
  uv_before=$(uverbs_of $BHCA)
  local k ok=1
  rdma link delete $BHCA || ok=0
  # The kernel hands out the lowest free number: temporary devices take numbers until one has
  # $BHCA's old one.
  for k in 0 1 2 3; do
    ip link add rmvtmp$k type veth peer name rmvtmp${k}p && rdma link add rxetmp$k type rxe netdev rmvtmp$k || ok=0
    [ "$(uverbs_of rxetmp$k)" = "$uv_before" ] && break
  done
  rdma link add $BHCA type rxe netdev bond0 || ok=0
  if [ $ok = 1 ]; then
    pass "Soft-RoCE device of bond0 registered again (rdma link delete + add, as a device reset does)"
  else
    fail "Soft-RoCE device of bond0 registered again"
  fi
  for k in 0 1 2 3; do
    rdma link delete rxetmp$k 2>/dev/null
    ip link del rmvtmp$k 2>/dev/null
  done
  uv_after=$(uverbs_of $BHCA)
  for c in b1 b2; do poll 30 kernel_idx 10.60.0.1${c#b} || true; done
  sleep 2
  after=$(q gids $BHCA 1 | tr '\n' ' ')
  measured "re-registration: rxeb's table before: $before"
  measured "re-registration: after: $after"
  for c in b1 b2; do
    drift_agrees $c 10.60.0.1${c#b} "${given[$c]}" "after the re-registration"
  done
  # The status reads above noticed the new node and rewrote the spec.
  spec=$(cat /etc/cdi/rdma-macvlan-$BHCA.json 2>&1)
  measured "re-registration: $BHCA's uverbs node $uv_before -> $uv_after"
  if [ -n "$uv_after" ] && [ "$uv_before" != "$uv_after" ] && grep -q "/dev/infiniband/$uv_after\"" <<<"$spec" && ! grep -q "/dev/infiniband/$uv_before\"" <<<"$spec"; then
    pass "re-registration: $BHCA came back as $uv_after (was $uv_before), and its CDI spec lists $uv_after"
  else
    fail "re-registration: $BHCA came back with another uverbs node, and its CDI spec follows" "before '$uv_before' after '$uv_after'" "$spec"
  fi
  if [ "$(kernel_idx 10.60.0.11)" != "${given[b1]}" ]; then
    pass "the re-registration moved b1's entry (${given[b1]}->$(kernel_idx 10.60.0.11)): the drift report was exercised"
  else
    fail "the re-registration moved b1's entry (the host's address was added between b1 and b2)" "$after"
  fi
  ip addr del 10.60.0.200/24 dev bond0
}

# vlan_case NET PARENT SUBNET IP CONTAINER VLAN-ID WHAT
vlan_case() {
  local net=$1 parent=$2 subnet=$3 ip=$4 c=$5 vid=$6 what=$7 o k lower
  if ! o=$(dk network create -d "$PLUGIN" --subnet "$subnet" -o parent="$parent" "$net" 2>&1); then
    fail "$what: docker network create -o parent=$parent" "$o"
    return
  fi
  if ! o=$(dk rdma run -d --name "$c" --net "$net" --ip "$ip" "$IMAGE" sleep infinity 2>&1); then
    fail "$what: docker rdma run $c" "$o"
    return
  fi
  agree "$c" "$ip" "$what"
  # The kernel derives the entry's VLAN from the first VLAN below the entry's netdev: the
  # container's eth0 must sit on $parent, whose id is $vid.
  lower=$(dk exec "$c" cat /sys/class/net/eth0/iflink 2>&1)
  k=$(ip -d -o link show "$parent" 2>&1)
  if [ "$lower" = "$(cat "/sys/class/net/$parent/ifindex")" ] && grep -q "vlan protocol 802.1Q id $vid " <<<"$k"; then
    pass "$what: $c's eth0 sits on $parent (802.1Q id $vid), so its GID entry carries VLAN $vid"
  else
    fail "$what: $c's eth0 sits on $parent (802.1Q id $vid)" "iflink '$lower' ifindex '$(cat "/sys/class/net/$parent/ifindex")'" "$k"
  fi
  o=$(dk exec "$c" timeout 3 rping -s -a "$ip" -C 1 2>&1)
  if [ $? = 124 ]; then pass "$what: rdma_cm in $c binds $ip"; else fail "$what: rdma_cm in $c binds $ip" "$o"; fi
}

# VLANs on bond0: made by the plugin, made by hand, and QinQ.
bond_vlans() {
  local hca
  vlan_case rv1 bond0.100 10.63.0.0/24 10.63.0.11 v1 100 "VLAN the plugin creates (bond0.100)"
  local al
  al=$(ip -d -o link show bond0.100 2>&1)
  if grep -q 'vlan protocol 802.1Q id 100 ' <<<"$al" && grep -q 'alias rdma-macvlan' <<<"$al"; then
    pass "bond0.100: created by the plugin, 802.1Q id 100, with its owner mark ($(grep -o 'alias [^ ]*' <<<"$al"))"
  else
    fail "bond0.100: created by the plugin with its owner mark" "$al"
  fi
  dk rm -f v1 >/dev/null 2>&1
  check "docker network rm rv1" dk network rm rv1
  if ! ip link show bond0.100 >/dev/null 2>&1; then pass "bond0.100 is deleted with its network"; else fail "bond0.100 is deleted with its network" "$(ip -d link show bond0.100)"; fi

  ip link add link bond0 name bond0.200 type vlan id 200 && ip link set bond0.200 up
  vlan_case rv2 bond0.200 10.64.0.0/24 10.64.0.11 v2 200 "VLAN made by hand (bond0.200)"
  dk rm -f v2 >/dev/null 2>&1
  check "docker network rm rv2" dk network rm rv2
  if ip link show bond0.200 >/dev/null 2>&1; then pass "bond0.200, made by hand, is kept"; else fail "bond0.200, made by hand, is kept"; fi

  ip link add link bond0 name bond0.300 type vlan proto 802.1ad id 300 && ip link set bond0.300 up &&
    ip link add link bond0.300 name bond0.300.400 type vlan id 400 && ip link set bond0.300.400 up
  vlan_case rq bond0.300.400 10.65.0.0/24 10.65.0.11 q1 400 "QinQ (VLAN 400 on 802.1ad VLAN 300 on bond0)"
  hca=$(q status-parent "$SOCK" bond0.300.400 hca)
  if [ "$hca" = "$BHCA/1" ]; then pass "QinQ: rq's RDMA device is $BHCA port 1, two VLANs down"; else fail "QinQ: rq's RDMA device is $BHCA port 1" "got '$hca'"; fi
  local chain
  chain=$(q status-parent "$SOCK" bond0.300.400 vlan)
  if [ "$chain" = "[300, 400] bond0.300.400: vlan 400 on bond0.300, vlan 300 on bond0" ]; then
    pass "QinQ: /v1/status shows the VLAN stack as the kernel has it ($chain)"
  else
    fail "QinQ: /v1/status shows the VLAN stack [300, 400]" "got '$chain'" "$(ip -d link show bond0.300.400; ip -d link show bond0.300)"
  fi
}

# The containers and networks removed, the bond without its device named as rb's problem.
bond_removal() {
  check "docker rm -f b1 b2 q1" dk rm -f b1 b2 q1
  # The bond loses its own device and its ports get theirs (RoCE LAG switched off after a reboot):
  # rb's status says so.
  rdma link delete $BHCA && rdma link add rxel1 type rxe netdev b0s1 && rdma link add rxel2 type rxe netdev b0s2
  if poll 10 rb_problem_seen; then
    pass "bond0 without its device, its ports with theirs: /v1/status names the problem of rb"
  else
    fail "bond0 without its device, its ports with theirs: /v1/status names the problem of rb" "$(rb_problem)"
  fi
  check "docker network rm rb rq" dk network rm rb rq
  local left
  left=$(ip -o link show | awk -F': ' '$2 ~ /^rmv[0-9a-f]/ {print $2}')
  if [ -z "$left" ]; then pass "bonds and VLANs: no container link left"; else fail "bonds and VLANs: no container link left" "$left"; fi
  bond_teardown
}
