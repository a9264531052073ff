#!/usr/bin/env bash
# e2e-diff.sh: differential end-to-end suite. Every scenario runs twice on the same engine, the
# same parent and with the same names, subnets and addresses: once on Docker's built-in macvlan
# driver and once on rdma-macvlan (the managed plugin built from the working tree); what the
# containers see and what the docker CLI answers must be the same, except for the deliberate
# differences listed in DELIBERATE below (mirrored in the README, "Differences from the built-in
# macvlan, per engine").
#
# For each engine (Debian's dockerd 20.10, the last Docker 28 and the current moby of
# scripts/engines.sh; on Docker 28, a middle engine, only the scenarios of E2E_DIFF_MIDDLE): two veth pairs
# in the host netns (unique names, all ends up) as parents P1 and P2, a fake mlx5 sysfs tree with
# mlx5_0 on P1 and mlx5_1 on P2 for the plugin (test/fakesysfs), a private dockerd
# (scripts/dockerd.sh), the busybox image (scripts/mkimage.sh), the plugin. Then per scenario:
# macvlan first, everything removed, rdma-macvlan second, everything removed, and the two
# records compared item by item.
#
# Why in turn on the same parent, not side by side on two parents: the engine's IPAM refuses a
# second network with an overlapping subnet, so side by side the two drivers would need different
# subnets and addresses, and no longer show literally the same thing; and the built-in driver
# refuses a second network on a parent used in passthru mode. Run in turn, each driver finds the
# same parent, the same free addresses and the same names, so every difference is the driver's.
# P2 only serves the scenarios that need a second network (connect/disconnect).
#
# What is compared, per container: the interface list; per interface the MTU, the kind (macvlan
# mode), the MAC (as a class: the one asked with --mac-address, derived from the IPv4 address as
# 02:42:a.b.c.d, or random locally administered) and its IPv4/IPv6 addresses (a link-local made
# from the MAC shows as fe80::EUI-64); the IPv4 and IPv6 routes (incl. the default route); pings
# between containers. Per CLI step: the exit status, and the error text where it fails (IDs and
# the driver's name replaced by placeholders). Each differing item is one check: ok when
# DELIBERATE lists it for this engine (its reason is printed), not ok otherwise; an entry of
# DELIBERATE that a run does not see fails too, so the table stays true. Each scenario also has
# a few expectations on the built-in run, so that two equally broken runs cannot agree.
#
# Scenarios: basic (--subnet --gateway, --ip, ping), compose (Debian's docker-compose 1.29 up and
# down), connect (network connect/disconnect of a running container), dual (dual stack),
# nov6 (--sysctl net.ipv6.conf.all.disable_ipv6=1 on a dual-stack network), internal, iprange,
# aux (--aux-address), nogw (no --gateway), nosubnet, mac (--mac-address), restart (docker
# restart), dockerd (dockerd restart with a --restart always container), prune (docker network
# prune), auxrouter (--aux-address router=.1 without --gateway), mtuopt (-o
# com.docker.network.driver.mtu=1400), parentmtu (parent raised 1500 -> 1600 after network
# create, then a new container), ifname (driver-opt com.docker.network.endpoint.ifname), gwprio
# (network connect --gw-priority), badopt (an unknown -o), noparent (no -o parent), missing (a
# parent that does not exist).
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines and docker-compose), iproute2,
#   nsenter. Traffic only between the containers it starts.
# Leaves behind: nothing of a run (links, processes, mounts, sockets, temp dirs), also when a step
#   fails.
#
# Usage: e2e-diff.sh [debian] [v27] [v28] [current]      (default: debian, the middle engines (v28; E2E_MIDDLE_ENGINES adds v27), current)
# Environment:
#   E2E_DIFF_ONLY    space-separated scenario names to run (default: all; on a middle engine
#                    E2E_DIFF_MIDDLE)
#   E2E_DIFF_MIDDLE  the scenarios a middle engine runs (default: the core ones, those whose
#                    outcome depends on the engine version: see MIDDLE below)
#   E2E_CMD_TIMEOUT  seconds any single docker command may take (default 60)
# Output: `ok - ...` / `not ok - ...` per check, then `N passed, N failed`; exit 1 when any failed.
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CMD_TIMEOUT=${E2E_CMD_TIMEOUT:-60}
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"

# ---------------------------------------------------------------------------------------------
# DELIBERATE: the differences from the built-in macvlan that are on purpose or that the engine
# imposes, one place. Each row: ENGINE SCENARIO ITEM | reason (" | " ends the key). ENGINE,
# SCENARIO and ITEM are globs (extended ones too, like @(a|b)) over the engine names (debian,
# v27, v28, current), the scenario names and the compared items (as printed by a failing check).
# Keep docs/engines.md's table "Differences from the built-in macvlan, per engine" in step with this one.
DELIBERATE=(
	"@(debian|v27) * *.mac | Docker 20.10's and 27's macvlan derive the MAC from the IPv4 address (02:42:a.b.c.d); the engine hands remote drivers no MAC, and rdma-macvlan keeps the kernel's random one, as the built-in macvlan of newer engines does (two hosts reusing an address on one L2 get no duplicate MAC)"
	"* mtuopt *.mtu | rdma-macvlan reads -o com.docker.network.driver.mtu (what compose writes for driver_opts mtu) as its own mtu option; the built-in macvlan accepts the key and ignores it (it has no MTU option: its containers take the parent's MTU)"
	"* badopt cli.create.* | rdma-macvlan refuses options it does not know (a typo like -o mtus=9000 would otherwise be silently ignored); the built-in macvlan ignores them"
	"* noparent cli.create.* | rdma-macvlan needs -o parent (an RDMA port); without one the built-in macvlan makes an internal network on a dummy link (refused here where the kernel has no dummy module)"
	"* missing cli.create.err | both refuse a parent that does not exist, each with its own words"
	"v28 nogw c1.@(eth0.inet|route4) | without --gateway Docker 28 still reserves the first address as the gateway of its built-in macvlan (its containers get a default route via it; Docker 29 stopped); rdma-macvlan answers Docker's GwAllocCheck (since 28.0) and reserves none, as on Docker 29"
	"v28 nosubnet @(n.ipam|c1.eth0.inet|c1.route4) | without --gateway Docker 28 still reserves a gateway for its built-in macvlan in the pool it picks (Docker 29 stopped); rdma-macvlan answers GwAllocCheck and reserves none, as on Docker 29"
	"v28 auxrouter * | Docker 28 reserves the first address as its built-in macvlan's gateway, so --aux-address router=.1 without --gateway is refused there (Address already in use); rdma-macvlan answers GwAllocCheck, reserves no gateway, and the network is made, as on Docker 29"
	"v28 ifname * | Docker 28's remote driver API drops the interface name a driver's Join answers (DstName; moby v2 passes it on): this driver's container interface stays eth0 there, while the built-in macvlan takes the asked name"
)

work=""   # temp dir of the whole suite (binaries, plugin dir)
engine=""
e2e_traps

# ---------------------------------------------------------------------------------------------
# Recording what a driver's run shows. Scenario functions run once per driver with:
#   DRV   macvlan or rdma-macvlan (the label), D the -d argument, vf the record file;
#   P1, P2 the parents, S (a /24 prefix like 10.200.7) and V (an IPv6 /64 prefix like fd00:dd:7:1)
#   for the scenario's subnets, net the scenario's network name prefix.

# rec ITEM VALUE...: one item of the record; a scenario with several steps sets stage, which
# prefixes the items ("2/c1.eth1.inet").
stage=""
subst=""
rec() {
	local k=${stage:+$stage/}$1 v
	shift
	v=$*
	[[ -z $subst ]] || v=${v//"$subst."/POOL.}
	printf '%s\t%s\n' "$k" "$v" >>"$vf"
}

# norm prints stdin with what differs by nature between the two runs replaced: the driver's name,
# IDs, and the engine's line breaks.
norm() {
	sed -E -e "s/rdma-macvlan:latest/DRIVER/g; s/\\bmacvlan\\b/DRIVER/g" \
		-e 's/\b[0-9a-f]{64}\b/ID/g; s/\b[0-9a-f]{12}\b/ID/g' | tr '\n' ' ' | sed 's/ *$//'
}

# cli ITEM CMD...: runs the docker CLI command CMD; records ITEM.rc and, when it fails, ITEM.err;
# returns CMD's status.
cli() {
	local k=$1 rc=0 out
	shift
	out=$(dk "$@" 2>&1) || rc=$?
	rec "$k.rc" "$rc"
	((rc == 0)) || rec "$k.err" "$(norm <<<"$out")"
	printf '%s\n' "$out" >"$rdir/last.out"
	return "$rc"
}

# mac_class MAC IPV4 ASKED: the MAC as a class (see the header).
mac_class() {
	local mac=$1 ip=$2 asked=$3 a b c d first
	if [[ -n $asked && $mac == "$asked" ]]; then echo "as asked"; return; fi
	if [[ -n $ip ]]; then
		IFS=. read -r a b c d <<<"${ip%/*}"
		if [[ $mac == "$(printf '02:42:%02x:%02x:%02x:%02x' "$a" "$b" "$c" "$d")" ]]; then echo "02:42 + IPv4"; return; fi
	fi
	first=$((0x${mac:0:2}))
	if (((first & 2) && !(first & 1))); then echo "random, locally administered"; else echo "$mac"; fi
}

# eui64_ll MAC: the link-local address the kernel makes from MAC.
eui64_ll() {
	local a b c d e f
	IFS=: read -r a b c d e f <<<"$1"
	printf 'fe80::%x:%x:%x:%x/64' $(((0x$a ^ 2) << 8 | 0x$b)) $((0x$c << 8 | 0xff)) $((0xfe << 8 | 0x$d)) $((0x$e << 8 | 0x$f))
}

# view NAME [ASKED-MAC]: records what container NAME sees of its network.
view() {
	local c=$1 asked=${2:-} pid i line mac v4 v6 ll a l
	local -a ifs
	if ! pid=$(dk inspect -f '{{if .State.Running}}{{.State.Pid}}{{end}}' "$c" 2>/dev/null) || [[ -z $pid ]]; then
		rec "$c.state" "not running: $(dk inspect -f '{{.State.Status}} {{.State.Error}}' "$c" 2>&1 | norm)"
		return 0
	fi
	mapfile -t ifs < <(nsenter -t "$pid" -n ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | sort)
	rec "$c.ifs" "${ifs[*]}"
	for i in "${ifs[@]}"; do
		[[ $i == lo ]] && continue
		line=$(nsenter -t "$pid" -n ip -d -o link show dev "$i")
		rec "$c.$i.mtu" "$(grep -oE 'mtu [0-9]+' <<<"$line" | head -n 1)"
		rec "$c.$i.kind" "$(grep -oE 'macvlan mode [a-z]+' <<<"$line" || echo "not a macvlan")"
		rec "$c.$i.flags" "$(grep -oE '<[^>]*>' <<<"$line" | head -n 1)"
		mac=$(grep -oE 'link/ether [0-9a-f:]+' <<<"$line" | cut -d' ' -f2)
		v4=$(nsenter -t "$pid" -n ip -4 -o addr show dev "$i" | awk '{print $4}' | sort | paste -sd' ')
		rec "$c.$i.mac" "$(mac_class "$mac" "${v4%% *}" "$asked")"
		rec "$c.$i.inet" "$v4"
		v6="" ll=""
		while read -r a; do
			[[ -n $a ]] || continue
			if [[ $a == fe80:* ]]; then
				[[ $a == "$(eui64_ll "$mac")" ]] && a="fe80::EUI-64(MAC)/64"
				ll+=" $a"
			else
				v6+=" $a"
			fi
		done < <(nsenter -t "$pid" -n ip -6 -o addr show dev "$i" | awk '{print $4}' | sort)
		rec "$c.$i.inet6" "${v6# }"
		rec "$c.$i.inet6ll" "${ll# }"
	done
	l=$(nsenter -t "$pid" -n ip -4 route show | paste -sd'|')
	rec "$c.route4" "$l"
	l=$(nsenter -t "$pid" -n ip -6 route show | sed -E 's/ expires [0-9]+sec//' | sort | paste -sd'|')
	rec "$c.route6" "$l"
}

# ping_rec ITEM FROM TO: records whether FROM pings TO.
ping_rec() {
	local rc=0
	dk exec "$2" ping -c 1 -W 2 "$3" >/dev/null 2>&1 || rc=$?
	rec "$1" "exit $rc"
}

# pings_want ITEM FROM TO: ping_rec, and the reference run must ping.
pings_want() {
	ping_rec "$@"
	want "$1" "^exit 0$"
}

# netcfg ITEM NET: records the network's IPAM config and options as docker shows them.
netcfg() {
	rec "$1.ipam" "$(dk network inspect -f '{{json .IPAM.Config}}' "$2" 2>&1 | norm)"
	rec "$1.flags" "$(dk network inspect -f 'ipv6={{.EnableIPv6}} internal={{.Internal}}' "$2" 2>&1)"
}

# run_rec NAME NET [ARGS...]: a detached busybox sleeping on NET; records NAME's docker run.
run_rec() {
	local name=$1 n=$2
	shift 2
	cli "cli.run-$name" run -d --name "$name" --network "$n" "$@" "$IMAGE" "${SLEEPER[@]}" >/dev/null
}

# netc NAME [ARGS...]: docker network create on the driver of this run and P1; records it.
netc() {
	local n=$1
	shift
	cli cli.create network create -d "$D" -o parent="$P1" "$@" "$n" >/dev/null
}

# want ITEM REGEX: an expectation on the built-in run (the reference): its ITEM matches REGEX.
want() {
	local v
	[[ $DRV == macvlan ]] || return 0
	v=$(awk -F'\t' -v k="${stage:+$stage/}$1" '$1 == k {print $2; exit}' "$vf")
	if [[ $v =~ $2 ]]; then
		pass "$sc: reference run (built-in macvlan): $1 is $v"
	else
		fail "$sc: reference run (built-in macvlan): $1 does not match /$2/" "it is: ${v:-(absent)}" \
			"the record:" "$(cat "$vf")"
	fi
}

# reset removes every container and network of the engine and sets the parents back.
reset() {
	local ids
	ids=$(dk ps -aq)
	# shellcheck disable=SC2086 # one word per container
	[[ -z $ids ]] || dk rm -f $ids >/dev/null
	ids=$(dk network ls -q --filter type=custom)
	# shellcheck disable=SC2086 # one word per network
	[[ -z $ids ]] || dk network rm $ids >/dev/null
	ip link set "$P1" mtu 1500
	ip link set "$P2" mtu 1500
}

# ---------------------------------------------------------------------------------------------
# Scenarios.

sc_basic() {
	netc "$net" --subnet "$S.0/24" --gateway "$S.1" || true
	run_rec c1 "$net" --ip "$S.11" || true
	run_rec c2 "$net" || true
	view c1
	view c2
	pings_want c1.ping-c2 c1 "$S.2"
	ping_rec c2.ping-c1 c2 "$S.11"
	want c1.eth0.inet "^$S.11/24$"
	want c2.eth0.inet "^$S.2/24$"
	want c1.route4 "^default via $S.1 dev eth0"
}

sc_compose() {
	local f=$rdir/compose-$DRV.yml
	cat >"$f" <<EOF
version: "2.4"
services:
  a:
    image: $IMAGE
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    networks:
      n:
        ipv4_address: $S.11
  b:
    image: $IMAGE
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    networks: [n]
networks:
  n:
    driver: $D
    driver_opts:
      parent: $P1
    ipam:
      config:
        - subnet: $S.0/24
          gateway: $S.1
EOF
	compose_cmd up up -d || true
	view "${net}_a_1"
	view "${net}_b_1"
	pings_want a.ping-b "${net}_a_1" "$S.2"
	compose_cmd down down || true
	rec left "$(dk ps -aq --filter "name=${net}_" | wc -l) containers, $(dk network ls -q --filter "name=${net}_" | wc -l) networks"
	want "${net}_a_1.eth0.inet" "^$S.11/24$"
	want left "^0 containers, 0 networks$"
}

# compose_cmd ITEM ARGS...: docker-compose ARGS on the compose file of this run, at the engine's
# API version (see COMPOSE_API below).
compose_cmd() {
	local k=$1 rc=0 out
	shift
	out=$(COMPOSE_API_VERSION=$COMPOSE_API timeout -k 5 120 docker-compose -p "$net" -f "$rdir/compose-$DRV.yml" "$@" 2>&1) || rc=$?
	rec "cli.compose-$k.rc" "$rc"
	((rc == 0)) || rec "cli.compose-$k.err" "$(norm <<<"$out")"
	return "$rc"
}

sc_connect() {
	cli cli.create-a network create -d "$D" -o parent="$P1" --subnet "$S.0/24" --gateway "$S.1" "$net-a" >/dev/null || true
	cli cli.create-b network create -d "$D" -o parent="$P2" --subnet "$S2.0/24" --gateway "$S2.1" "$net-b" >/dev/null || true
	run_rec c1 "$net-a" --ip "$S.11" || true
	stage=connected
	cli cli.connect network connect --ip "$S2.11" "$net-b" c1 || true
	view c1
	want c1.eth1.inet "^$S2.11/24$"
	stage=disconnected
	cli cli.disconnect network disconnect "$net-b" c1 || true
	view c1
	want c1.ifs "^eth0 lo$"
	stage=again
	cli cli.connect network connect "$net-b" c1 || true
	view c1
	want c1.ifs "^eth0 eth[12] lo$"
	stage=""
}

sc_dual() {
	netc "$net" --ipv6 --subnet "$S.0/24" --gateway "$S.1" --subnet "$V::/64" --gateway "$V::1" || true
	netcfg n "$net"
	run_rec c1 "$net" --ip "$S.11" --ip6 "$V::11" || true
	run_rec c2 "$net" || true
	view c1
	view c2
	ping_rec c1.ping6-c2 c1 "$V::3"
	want c1.eth0.inet6 "^$V::11/64$"
	want c1.route6 "default via $V::1 dev eth0"
}

sc_nov6() {
	netc "$net" --ipv6 --subnet "$S.0/24" --gateway "$S.1" --subnet "$V::/64" --gateway "$V::1" || true
	run_rec c1 "$net" --ip "$S.11" --sysctl net.ipv6.conf.all.disable_ipv6=1 || true
	run_rec c2 "$net" --ip "$S.12" || true
	view c1
	pings_want c1.ping-c2 c1 "$S.12"
	want c1.eth0.inet "^$S.11/24$"
}

sc_internal() {
	netc "$net" --internal --subnet "$S.0/24" --gateway "$S.1" || true
	run_rec c1 "$net" --ip "$S.11" || true
	run_rec c2 "$net" --ip "$S.12" || true
	netcfg n "$net"
	view c1
	ping_rec c1.ping-c2 c1 "$S.12"
	want n.flags "internal=true"
	want c1.eth0.inet "^$S.11/24$"
}

sc_iprange() {
	netc "$net" --subnet "$S.0/24" --gateway "$S.1" --ip-range "$S.128/26" || true
	run_rec c1 "$net" || true
	run_rec c2 "$net" || true
	run_rec c3 "$net" --ip "$S.20" || true
	view c1
	view c2
	view c3
	want c1.eth0.inet "^$S.1[0-9][0-9]/24$"
	want c3.eth0.inet "^$S.20/24$"
}

sc_aux() {
	netc "$net" --subnet "$S.0/24" --gateway "$S.1" --aux-address "a=$S.2" --aux-address "b=$S.3" || true
	netcfg n "$net"
	run_rec c1 "$net" || true
	run_rec c2 "$net" --ip "$S.2" || true
	view c1
	want c1.eth0.inet "^$S.4/24$"
}

sc_nogw() {
	netc "$net" --subnet "$S.0/24" || true
	netcfg n "$net"
	run_rec c1 "$net" || true
	run_rec c2 "$net" --ip "$S.1" || true
	view c1
	view c2
	want cli.create.rc "^0$"
}

sc_nosubnet() {
	local pool
	netc "$net" || true
	# The engine picks the subnet from its default pools, not always the same one in turn (20.10
	# took the next pool for the second network): the records show it as POOL.
	pool=$(dk network inspect -f '{{range .IPAM.Config}}{{.Subnet}}{{end}}' "$net" 2>/dev/null || true)
	rec pool "$(sed -E 's/^[0-9]+\.[0-9]+\./a.b./' <<<"$pool")"
	[[ $pool =~ ^([0-9]+\.[0-9]+)\.0\.0/16$ ]] && subst=${BASH_REMATCH[1]}
	netcfg n "$net"
	run_rec c1 "$net" || true
	view c1
	subst=""
	want cli.run-c1.rc "^0$"
	want pool "^a\.b\.0\.0/16$"
}

sc_mac() {
	netc "$net" --subnet "$S.0/24" --gateway "$S.1" || true
	run_rec c1 "$net" --ip "$S.11" --mac-address 02:42:de:ad:be:ef || true
	view c1 02:42:de:ad:be:ef
	want c1.eth0.mac "^as asked$"
}

sc_restart() {
	netc "$net" --subnet "$S.0/24" --gateway "$S.1" || true
	run_rec c1 "$net" --ip "$S.11" || true
	run_rec c2 "$net" --ip "$S.12" || true
	cli cli.restart restart -t 1 c1 >/dev/null || true
	view c1
	pings_want c1.ping-c2 c1 "$S.12"
	want cli.restart.rc "^0$"
}

sc_dockerd() {
	local out
	netc "$net" --subnet "$S.0/24" --gateway "$S.1" || true
	run_rec c1 "$net" --ip "$S.11" --restart always || true
	if out=$(restart_dockerd "$ddir" 2>&1); then rec dockerd-restart ok; else rec dockerd-restart "failed: $out"; fi
	poll 30 running c1 >/dev/null || true
	run_rec c2 "$net" --ip "$S.12" || true
	view c1
	pings_want c2.ping-c1 c2 "$S.11"
	want c1.eth0.inet "^$S.11/24$"
}

sc_prune() {
	netc "$net-used" --subnet "$S.0/24" --gateway "$S.1" || true
	run_rec c1 "$net-used" --ip "$S.11" || true
	cli cli.create-unused network create -d "$D" -o parent="$P2" --subnet "$S2.0/24" "$net-unused" >/dev/null || true
	cli cli.prune network prune -f >/dev/null || true
	rec networks "$(dk network ls --filter type=custom --format '{{.Name}}' | sort | paste -sd' ')"
	view c1
	want networks "^$net-used$"
}

sc_auxrouter() {
	netc "$net" --subnet "$S.0/24" --aux-address "router=$S.1" || true
	netcfg n "$net"
	run_rec c1 "$net" || true
	view c1
	# Before 29 the engine reserves the first address as the built-in macvlan's gateway (before 28
	# for every driver; 28 skips it for a driver that answers GwAllocCheck, as rdma-macvlan does).
	if engine_since "$engine" 29; then want cli.create.rc "^0$"; else want cli.create.rc "^1$"; fi
}

sc_mtuopt() {
	netc "$net" --subnet "$S.0/24" --gateway "$S.1" -o com.docker.network.driver.mtu=1400 || true
	run_rec c1 "$net" --ip "$S.11" || true
	view c1
	# The built-in macvlan reads only parent and macvlan_mode: it accepts the key and ignores it.
	want cli.create.rc "^0$"
	want c1.eth0.mtu "^mtu 1500$"
}

sc_parentmtu() {
	netc "$net" --subnet "$S.0/24" --gateway "$S.1" || true
	run_rec c1 "$net" --ip "$S.11" || true
	ip link set "$P1" mtu 1600
	run_rec c2 "$net" --ip "$S.12" || true
	view c1
	view c2
	want c1.eth0.mtu "^mtu 1500$"
	want c2.eth0.mtu "^mtu 1600$"
}

# ifname: the interface name asked per endpoint (com.docker.network.endpoint.ifname, which compose
# calls interface_name); the engine sets it itself, so both drivers must show it.
sc_ifname() {
	netc "$net" --subnet "$S.0/24" --gateway "$S.1" || true
	cli cli.run-c1 run -d --name c1 --network "name=$net,driver-opt=com.docker.network.endpoint.ifname=data0" \
		"$IMAGE" "${SLEEPER[@]}" >/dev/null || true
	view c1
	if engine_since "$engine" 28; then want c1.ifs "^data0 lo$"; else want c1.ifs "^eth0 lo$"; fi
}

# gwprio: which endpoint gives the default route, with a second network connected with a higher
# --gw-priority (Docker 28+; the 20.10 CLI and engine do not know the flag).
sc_gwprio() {
	cli cli.create-a network create -d "$D" -o parent="$P1" --subnet "$S.0/24" --gateway "$S.1" "$net-a" >/dev/null || true
	cli cli.create-b network create -d "$D" -o parent="$P2" --subnet "$S2.0/24" --gateway "$S2.1" "$net-b" >/dev/null || true
	run_rec c1 "$net-a" --ip "$S.11" || true
	cli cli.connect network connect --gw-priority 1 "$net-b" c1 || true
	view c1
	engine_since "$engine" 28 && want c1.route4 "^default via $S2.1 dev eth1"
	return 0
}

sc_badopt() {
	netc "$net" --subnet "$S.0/24" -o foo=bar || true
	want cli.create.rc "^0$"
}

sc_noparent() {
	cli cli.create network create -d "$D" --subnet "$S.0/24" "$net" >/dev/null || true
	want cli.create.rc "^[01]$"
}

sc_missing() {
	cli cli.create network create -d "$D" --subnet "$S.0/24" -o parent="rmvd${id}x" "$net" >/dev/null || true
	want cli.create.rc "^1$"
}

SCENARIOS=(basic compose connect dual nov6 internal iprange aux nogw nosubnet mac restart dockerd prune
	auxrouter mtuopt parentmtu ifname gwprio badopt noparent missing)
# MIDDLE: the core scenarios a middle engine runs: the everyday ones (basic, compose, connect,
# dual, restart, dockerd), those whose outcome changed between 20.10 and the current engine (the
# MAC, the gateway without --gateway, ifname, gw-priority) and the cheap ones behind a row of
# DELIBERATE (mtuopt, badopt, noparent, missing).
MIDDLE=(basic compose connect dual mac restart dockerd nogw auxrouter ifname gwprio mtuopt badopt noparent missing)

# ---------------------------------------------------------------------------------------------
# Comparison.

# deliberate SCENARIO ITEM: when DELIBERATE lists the difference for the engine of this run, sets
# reason to its reason and marks the row as seen.
deliberate() {
	local sc=$1 item=$2 i row e s k
	for i in "${!DELIBERATE[@]}"; do
		row=${DELIBERATE[i]}
		read -r e s k _ <<<"${row%% | *}"
		# shellcheck disable=SC2053 # globs on purpose
		if [[ $engine == $e && $sc == $s && $item == $k ]]; then
			seen[$i]=1
			reason=${row#* | }
			return 0
		fi
	done
	return 1
}

# compare SCENARIO: the two records, item by item.
compare() {
	local sc=$1 fb=$rdir/rec/$1.macvlan fo=$rdir/rec/$1.rdma-macvlan k vb vo reason same=0 undoc=0
	local -a keys
	mapfile -t keys < <(cut -f1 "$fb" "$fo" | awk '!seen[$0]++')
	for k in "${keys[@]}"; do
		vb=$(awk -F'\t' -v k="$k" '$1 == k {$1 = ""; sub(/^\t/, ""); print}' "$fb")
		vo=$(awk -F'\t' -v k="$k" '$1 == k {$1 = ""; sub(/^\t/, ""); print}' "$fo")
		if [[ $vb == "$vo" ]]; then
			same=$((same + 1))
			continue
		fi
		if deliberate "$sc" "$k"; then
			pass "$sc: $k differs as documented: $reason" "macvlan:      ${vb:-(absent)}" "rdma-macvlan: ${vo:-(absent)}"
		else
			fail "$sc: $k differs" "macvlan:      ${vb:-(absent)}" "rdma-macvlan: ${vo:-(absent)}"
			undoc=$((undoc + 1))
		fi
	done
	if ((same > 0)); then
		pass "$sc: $same items the same on both drivers"
	elif ((undoc > 0)); then
		fail "$sc: nothing in common between the two runs" "$(cat "$fb")" "$(cat "$fo")"
	fi
}

# ---------------------------------------------------------------------------------------------
# One engine.
diff_run() {
	engine=$1
	local t0 n sc k s DRV D vf P1 P2 S S2 V net id i
	tag=$engine
	t0=$(date +%s)
	new_id rmvd
	P1=rmvd${id}a P2=rmvd${id}c
	rdir=$(mktemp -d /tmp/rmv-diff.XXXXXX)
	mkdir -p "$rdir/state" "$rdir/cdi" "$rdir/rec"
	say "run $id: parents $P1 $P2, dir $rdir"
	veth_parent "$P1" "rmvd${id}b"
	veth_parent "$P2" "rmvd${id}d"
	fake_hca "$rdir/sysfs" mlx5_0 "$P1"
	fake_hca "$rdir/sysfs" mlx5_1 "$P2" -pci 0000:04:00.0 -uverbs 1

	# The docker CLI of the engine's generation: a newer CLI cannot send --mac-address with
	# --network to Docker 20.10 ("requires API version 1.44").
	DOCKER_CLI=docker
	[[ $engine == debian && -x /usr/bin/docker ]] && DOCKER_CLI=/usr/bin/docker
	engine_up "$rdir/d" "$engine"
	plugin_up "$work/plugin" "$rdir/state" "$rdir/cdi" "$rdir/sysfs/sys"
	# docker-compose 1.29 asks for API 1.35 for a version 2.4 file; the current engine accepts 1.40
	# and later only (its default min-api-version). Ask for the engine's own version there.
	COMPOSE_API=$(dk version -f '{{.Server.APIVersion}}')
	[[ $engine == debian ]] && COMPOSE_API=1.35
	say "setup done in $(($(date +%s) - t0)) s"

	declare -A seen=()
	local only=${E2E_DIFF_ONLY:-} ran=" "
	if [[ -z $only ]] && engine_middle "$engine"; then
		only=${E2E_DIFF_MIDDLE:-${MIDDLE[*]}}
		printf '# skip - [%s] a middle engine runs the core scenarios only: %s\n' "$engine" "$only"
	fi
	n=0
	for sc in "${SCENARIOS[@]}"; do
		if [[ -n $only && " $only " != *" $sc "* ]]; then continue; fi
		ran+="$sc "
		n=$((n + 1))
		S=10.$((200 + 0x${id:0:2} % 50)).$n S2=10.$((200 + 0x${id:0:2} % 50)).$((n + 100))
		# The id without leading zeros, as the kernel prints an IPv6 address (an id 08df would
		# make the expectations want fd00:dd:08df:... where the container shows fd00:dd:8df:...).
		V=fd00:dd:$(printf '%x' $((16#$id))):$n net=rmvd-$id-$sc
		for DRV in macvlan rdma-macvlan; do
			D=macvlan
			[[ $DRV == rdma-macvlan ]] && D=$PLUGIN
			vf=$rdir/rec/$sc.$DRV
			: >"$vf"
			tag="$engine/$DRV"
			say "$sc"
			"sc_$sc"
			stage=""
			reset
		done
		tag=$engine
		compare "$sc"
	done
	if [[ -z ${E2E_DIFF_ONLY:-} ]]; then
		for i in "${!DELIBERATE[@]}"; do
			read -r k s _ <<<"${DELIBERATE[i]}"
			# shellcheck disable=SC2053 # a glob on purpose
			[[ $engine == $k ]] || continue
			# A row of a scenario this engine did not run (a middle engine's subset) cannot be seen.
			[[ $s == "*" || $ran == *" $s "* ]] || continue
			[[ -n ${seen[$i]:-} ]] || fail "documented difference not seen on this engine: ${DELIBERATE[i]%% | *}" \
				"remove it from DELIBERATE (and the README), or restrict it to the engines that show it"
		done
	fi
	teardown
	timings+=("$engine: $(($(date +%s) - t0)) s")
}

# ---------------------------------------------------------------------------------------------
select_engines --both --middle "$@"
e2e_preflight "docker-compose:scripts/engines.sh installs it"
suite_start diff rdma-macvlan fakesysfs
make_plugin_dir "$work/plugin"
run_engines diff_run
