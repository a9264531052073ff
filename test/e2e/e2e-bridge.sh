#!/usr/bin/env bash
# e2e-bridge.sh: the engine as users run it, with its default bridge network, iptables and the
# userland proxy on, and containers on the default bridge and an rdma-macvlan network at once.
#
# For each engine (Debian's dockerd 20.10, the last Docker 28 and the current moby of
# scripts/engines.sh): a network namespace for the engine (rmvbIDn) and one for a client
# (rmvbIDc), joined by a veth pair (198.19.X.1/24 on the engine's side, .2 on the client's); in
# the engine's namespace a veth pair as the RoCE parent (rmvbIDp, peer rmvbIDq) with a fake mlx5
# sysfs tree (test/fakesysfs); a private dockerd in that namespace with its defaults
# (scripts/dockerd.sh start --netns --bridge: docker0, iptables rules, ip forwarding and
# docker-proxy are that namespace's, never the host's; the default bridge gets a subnet of the
# run's own, --bip 172.30.X.1/24, so its rules can be told apart), the busybox image and the
# plugin. Then:
#   - first the engine as the other suites start it (no --bridge) in the same namespace: no
#     iptables or ip6tables rule and no docker0 appear there (so none appear in the host's
#     namespace where those suites run it); then it stops;
#   - the engine's default bridge: `docker network inspect bridge`, docker0 in the namespace with
#     an address in the bridge's subnet, the DOCKER chain and the bridge's masquerading in the
#     namespace's nat table; no iptables/ip6tables rule and no address of the host's namespace
#     names the bridge's subnet, and the host's ip_forward and bridge-nf-call-iptables are as
#     before the suite (checked once the engine runs, at the end and once the namespace is gone);
#   - container A, created on the default bridge with a published port (busybox httpd on 80,
#     published as 8080), connected to an rdma-macvlan network with --ip, started: eth0 on the
#     bridge's subnet, a macvlan with its address; it pings B (on the rdma-macvlan network only)
#     and the bridge's gateway; the port answers from the engine's namespace (127.0.0.1, through
#     the userland proxy) and from the client's namespace (198.19.X.1, through the engine's DNAT);
#   - docker restart of A: the same again, with the same addresses;
#   - docker network disconnect of the rdma-macvlan network: the macvlan gone from A and from the
#     host side, the plugin lists no endpoint of A, the port still answers;
#   - connected again, then docker rm -f: its link gone, no endpoint of A, the port closed;
#   - container C: run on a second rdma-macvlan network, without --gateway, next to D, then
#     connected to the default bridge (moby#51522: "endpoint not found" on Docker 29.0 when a
#     remote driver's endpoint without a gateway leaves the container on docker_gwbridge): no
#     docker_gwbridge, both interfaces, a ping over each, disconnected from the bridge, removed.
# Every check prints `ok - ...` or `not ok - ...`; the last line is `N passed, N failed`.
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines), iproute2, nsenter, iptables
#   (the engines run it inside their namespace).
# Traffic: only between the namespaces and containers it makes (and their loopback).
# Leaves behind: nothing of a run (namespaces, links, processes, mounts, temp dirs), also when a
#   step fails.
#
# Usage: e2e-bridge.sh [debian] [v27] [v28] [current]      (default: debian, the middle engines (v28; E2E_MIDDLE_ENGINES adds v27), current)
# Environment: E2E_CMD_TIMEOUT  seconds any single docker command may take (default 60)
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CMD_TIMEOUT=${E2E_CMD_TIMEOUT:-60}
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"

work=""       # temp dir of the whole suite
host_sys=""   # the host's forwarding sysctls before the suite (host_sysctls)
PORT=8080     # the published port, in the engine's own namespace
e2e_traps

# host_sysctls prints the host's sysctls that an engine with --ip-forward and --iptables sets.
host_sysctls() {
	local f
	for f in /proc/sys/net/ipv4/ip_forward /proc/sys/net/ipv6/conf/all/forwarding \
		/proc/sys/net/bridge/bridge-nf-call-iptables /proc/sys/net/bridge/bridge-nf-call-ip6tables; do
		[[ -e $f ]] && printf '%s=%s\n' "$f" "$(cat "$f")"
	done
	return 0
}

# host_untouched: nothing of the run's engine reached the host's namespace: no iptables or
# ip6tables rule and no address names the run's bridge subnet ($bnet.0/24, unique to the run),
# and the forwarding sysctls are as before the suite. (Other tests on this machine may change
# the host's rules at the same time; only what carries this run's subnet counts.)
host_untouched() {
	local out now
	out=$({ iptables-save; ip6tables-save; } 2>/dev/null | grep -F "$bnet." || true)
	[[ -z $out ]] || { echo "the host's firewall rules name the engine's bridge $bnet.0/24:"; echo "$out"; return 1; }
	out=$(ip -o addr show | grep -F " $bnet." || true)
	[[ -z $out ]] || { echo "the host's namespace has an address in $bnet.0/24:"; echo "$out"; return 1; }
	now=$(host_sysctls)
	[[ $now == "$host_sys" ]] || { diff <(printf '%s\n' "$host_sys") <(printf '%s\n' "$now"); return 1; }
}

# in_ns NS CMD...: CMD in network namespace NS.
in_ns() { nsenter "--net=/run/netns/$1" "${@:2}"; }

# plain_untouched: the engine without --bridge made no firewall rule and no docker0 in $ns.
plain_untouched() {
	local out
	out=$({ in_ns "$ns" iptables-save; in_ns "$ns" ip6tables-save; } 2>&1 | grep -E '^(-A|:DOCKER)' || true)
	[[ -z $out ]] || { echo "firewall rules in $ns:"; echo "$out"; return 1; }
	! ip -n "$ns" link show dev docker0 2>/dev/null || { echo "docker0 in $ns"; return 1; }
	echo "$ns: no rule, no docker0"
}

# bridge_on: the default bridge network is there with its subnet, docker0 has an address in it in
# the engine's namespace, and the engine's iptables rules are in that namespace.
bridge_on() {
	local sub out
	sub=$(dk network inspect -f '{{range .IPAM.Config}}{{.Subnet}}{{end}}' bridge) || return 1
	[[ -n $sub ]] || { echo "the bridge network has no subnet"; dk network inspect bridge; return 1; }
	[[ -n $bgw ]] || { echo "docker0 has no IPv4 address in $ns:"; ip -n "$ns" addr show dev docker0; return 1; }
	[[ ${sub%/*} == "$(ipv4_net "$bgw" "${sub#*/}")" ]] || { echo "docker0's $bgw is not in the bridge's $sub"; return 1; }
	out=$(in_ns "$ns" iptables -t nat -S 2>&1) || { echo "iptables in $ns: $out"; return 1; }
	grep -q -- '^-N DOCKER$' <<<"$out" || { echo "no DOCKER chain in the nat table of $ns:"; echo "$out"; return 1; }
	grep -qF -- "-A POSTROUTING -s $bnet.0/24 ! -o docker0 -j MASQUERADE" <<<"$out" ||
		{ echo "no MASQUERADE rule for $bnet.0/24 in the nat table of $ns:"; echo "$out"; return 1; }
	echo "bridge $sub, gateway $bgw on docker0 in $ns; its nat table has the DOCKER chain and masquerading"
}

# ipv4_net A.B.C.D LEN: the network address of A.B.C.D/LEN.
ipv4_net() {
	local a b c d n m
	IFS=. read -r a b c d <<<"$1"
	n=$(((a << 24) | (b << 16) | (c << 8) | d))
	m=$(((0xffffffff << (32 - $2)) & 0xffffffff))
	n=$((n & m))
	printf '%d.%d.%d.%d\n' $((n >> 24)) $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255))
}

# http_get NS ADDR PORT: an HTTP GET of / to ADDR:PORT from namespace NS (bash's /dev/tcp: Debian
# 12's static busybox wget run on the host dies with a segfault); prints the body.
http_get() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	in_ns "$1" timeout 5 bash -c 'exec 5<>"/dev/tcp/$0/$1" && printf "GET / HTTP/1.0\r\n\r\n" >&5 && cat <&5' "$2" "$3" |
		sed '1,/^\r*$/d'
}

# http_ok NS ADDR: ADDR:PORT from namespace NS serves the page of container A.
http_ok() {
	local out
	out=$(http_get "$1" "$2" "$PORT" 2>&1) || { echo "GET $2:$PORT in $1: $out"; return 1; }
	[[ $out == "rmv-bridge-$id" ]] || { echo "GET $2:$PORT in $1 got: $out"; return 1; }
}

# http_closed NS ADDR: nothing serves the page at ADDR:PORT from NS.
http_closed() {
	local out
	if out=$(http_get "$1" "$2" "$PORT" 2>&1) && [[ $out == "rmv-bridge-$id" ]]; then
		echo "$2:$PORT still answers in $1: $out"
		return 1
	fi
}

# port_ok: the published port answers from the engine's namespace and from the client's.
port_ok() { http_ok "$ns" 127.0.0.1 && http_ok "$cns" "$EA"; }
port_closed() { http_closed "$ns" 127.0.0.1 && http_closed "$cns" "$EA"; }

# ifaces C: the interfaces of container C, as "name=address" (IPv4) or "name=macvlan:address" for
# a macvlan, sorted, without lo.
ifaces() {
	local pid i kind a
	pid=$(cpid "$1") || return 1
	while read -r i; do
		[[ $i == lo ]] && continue
		kind=""
		nsenter -t "$pid" -n ip -d -o link show dev "$i" | grep -q 'macvlan mode' && kind=macvlan:
		a=$(nsenter -t "$pid" -n ip -4 -o addr show dev "$i" | awk '{print $4}' | paste -sd,)
		printf '%s=%s%s\n' "$i" "$kind" "$a"
	done < <(nsenter -t "$pid" -n ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}') | sort
}

# bridge_ip C: C's address on the default bridge, as docker inspect shows it.
bridge_ip() { dk inspect -f '{{with index .NetworkSettings.Networks "bridge"}}{{.IPAddress}}{{end}}' "$1"; }

# has_both C RMV-IP: C has one interface (not a macvlan) with its address on the default bridge
# and one macvlan with RMV-IP/24, and nothing else.
has_both() {
	local l b
	l=$(ifaces "$1") || return 1
	b=$(bridge_ip "$1")
	[[ -n $b ]] || { echo "docker inspect shows no address of $1 on the bridge"; return 1; }
	[[ $(wc -l <<<"$l") == 2 ]] || { echo "want two interfaces:"; echo "$l"; return 1; }
	grep -Eq "^[a-z0-9]+=${b//./\\.}/[0-9]+$" <<<"$l" || { echo "no interface with the bridge's $b:"; echo "$l"; return 1; }
	grep -Eq "^[a-z0-9]+=macvlan:${2//./\\.}/24$" <<<"$l" || { echo "no macvlan with $2/24:"; echo "$l"; return 1; }
	echo "$l"
}

# bridge_only C: C has its bridge interface only.
bridge_only() {
	local l b
	l=$(ifaces "$1") || return 1
	b=$(bridge_ip "$1")
	if [[ -z $b || $(wc -l <<<"$l") != 1 ]] || ! grep -Eq "^[a-z0-9]+=${b//./\\.}/[0-9]+$" <<<"$l"; then
		echo "want the bridge interface with ${b:-(no bridge address)} only:"
		echo "$l"
		return 1
	fi
}

# rmv_only C RMV-IP: C has its macvlan only.
rmv_only() {
	local l
	l=$(ifaces "$1") || return 1
	[[ $l =~ ^[a-z0-9]+=macvlan:${2//./\\.}/24$ ]] || { echo "want the macvlan with $2/24 only:"; echo "$l"; return 1; }
}

# ep_of IP [NID]: the status line of the endpoint with IPv4 IP on network NID (default: the run's).
ep_of() { ep_lines "${2:-$nid}" | awk -v ip="ipv4=$1" '{ for (i = 4; i <= NF; i++) if ($i == ip) print }'; }

# ep_gone IP IFNAME: no endpoint with IP on the network, and the host link IFNAME is gone.
ep_gone() {
	[[ -z $(ep_of "$1") ]] || { echo "endpoint still listed: $(ep_of "$1")"; return 1; }
	[[ -z $2 ]] || ! ip -n "$ns" link show dev "$2" >/dev/null 2>&1 || { echo "host link $2 still in $ns"; return 1; }
}

# pings_both C RMV-PEER: C pings RMV-PEER over the macvlan and the bridge's gateway.
pings_both() { pings "$1" "$2" && pings "$1" "$bgw"; }

# rmv_pings C RMV-IP PEER: C has its macvlan only and pings PEER over it.
rmv_pings() { rmv_only "$1" "$2" && pings "$1" "$3"; }

# all_gone IFNAME: the host link IFNAME is gone and the plugin lists no endpoint at all.
all_gone() {
	local l
	[[ -z $1 ]] || ! ip -n "$ns" link show dev "$1" >/dev/null 2>&1 || { echo "host link $1 still in $ns"; return 1; }
	l=$(status | awk '$1 == "endpoint"')
	[[ -z $l ]] || { echo "endpoints still listed: $l"; return 1; }
}

# no_gwbridge: the engine's namespace has no docker_gwbridge.
no_gwbridge() { ! ip -n "$ns" link show dev docker_gwbridge 2>/dev/null; }

# connect_rmv C IP: docker network connect of the run's rdma-macvlan network.
connect_rmv() { dk network connect --ip "$2" "$net" "$1"; }

# One engine.
bridge_run() {
	engine=$1
	local t0 id ns cns ea ca P Q S S2 EA bgw bnet nid out ifa ifc x rd plugin_id="" stopped
	tag=$engine
	t0=$(date +%s)
	stopped=0
	bridge_setup; ((!stopped)) || return 0
	container_a_checks
	container_c_checks
	check "docker rm -f B, C and D" dk rm -f "$net-b" "$net-c" "$net-d"
	check "no endpoint left on the networks, C's host link ${ifc:-?} gone" poll 5 all_gone "$ifc"
	check "docker network rm $net-nogw" dk network rm "$net-nogw"
	check "docker network rm $net" dk network rm "$net"
	check "still: nothing of the engine's bridge in the host's rules and addresses; sysctls as before" host_untouched
	[[ -z $run_failed ]] || show_logs
	rd=$rdir
	teardown
	check "after the engine and its namespace are gone: nothing of its bridge in the host's rules; sysctls as before" host_untouched
	check "nothing left: namespaces, links, processes, mounts, the plugin's dir and process, the run's dir" \
		leftovers "rmvb$id" "$rd" "$plugin_id"
	timings+=("$engine: $(($(date +%s) - t0)) s")
}

# bridge_setup: the engine's and a client's namespaces, the parent and its fake tree, the engine
# first without --bridge (it must leave the firewall alone), then with its default bridge, the
# plugin and the network; sets stopped when the engine or the network is not there. Runs inside
# bridge_run.
bridge_setup() {
	new_id rmvb
	ns=rmvb${id}n cns=rmvb${id}c ea=rmvb${id}u ca=rmvb${id}v P=rmvb${id}p Q=rmvb${id}q
	x=$((0x${id:0:2}))
	EA=198.19.$x.1
	# The default bridge gets a subnet of its own (--bip) so that its rules can be told apart.
	bnet=172.30.$x
	S=10.$((200 + 0x${id:2:2} % 50)).$((x % 125 * 2 + 1)) S2=10.$((200 + 0x${id:2:2} % 50)).$((x % 125 * 2 + 2))
	net=rmvb-$id
	rdir=$(mktemp -d /tmp/rmv-bridge.XXXXXX)
	mkdir -p "$rdir/state" "$rdir/cdi"
	say "run $id: engine namespace $ns ($EA), client namespace $cns, parent $P, subnet $S.0/24"
	ip netns add "$ns"
	nss+=("$ns")
	ip netns add "$cns"
	nss+=("$cns")
	ip link add "$ea" netns "$ns" type veth peer name "$ca" netns "$cns"
	ip link add "$P" netns "$ns" type veth peer name "$Q" netns "$ns"
	ip -n "$ns" addr add "$EA/24" dev "$ea"
	ip -n "$cns" addr add "198.19.$x.2/24" dev "$ca"
	for l in lo "$ea" "$P" "$Q"; do ip -n "$ns" link set "$l" up; done
	for l in lo "$ca"; do ip -n "$cns" link set "$l" up; done
	"$work/bin/fakesysfs" build -root "$rdir/sysfs" -kind mlx5 -hca "$HCA" -netdev "$P" \
		-mac "$(ip -n "$ns" -o link show dev "$P" | grep -oE 'link/ether [0-9a-f:]+' | cut -d' ' -f2)"

	DOCKER_CLI=docker
	[[ $engine == debian && -x /usr/bin/docker ]] && DOCKER_CLI=/usr/bin/docker
	# First the engine as the other suites run it (no --bridge), in the same namespace: it must
	# leave the namespace's firewall alone, as it would leave the host's.
	check_here "dockerd without --bridge in namespace $ns" engine_up "$rdir/d0" "$engine" --netns "$ns"
	check_v "without --bridge: no iptables or ip6tables rule and no docker0 in $ns" plain_untouched
	bash "$scripts/dockerd.sh" stop "$rdir/d0" 2>/dev/null
	if ! check_here "dockerd in namespace $ns with its default bridge, iptables and userland proxy" \
		engine_up "$rdir/d" "$engine" --netns "$ns" --bridge -- --bip "$bnet.1/24"; then
		stopped=1; return 0
	fi
	bgw=$(ip -n "$ns" -4 -o addr show dev docker0 2>/dev/null | awk '{sub(/\/.*/, "", $4); print $4; exit}')
	check_v "the default bridge network, docker0 and the engine's iptables rules are in $ns" bridge_on
	check "the host's iptables rules and addresses do not name $bnet.0/24; ip_forward and bridge-nf-call-iptables as before" host_untouched
	check_here "the plugin on the engine" plugin_up "$work/plugin" "$rdir/state" "$rdir/cdi" "$rdir/sysfs/sys"
	plugin_id=$(dk plugin inspect -f '{{.Id}}' "$PLUGIN")
	sock=/run/docker/plugins/$plugin_id/rdma-macvlan.sock
	if ! nid=$(dk network create -d "$PLUGIN" --subnet "$S.0/24" --gateway "$S.1" -o parent="$P" "$net" 2>&1); then
		fail "docker network create -d $PLUGIN -o parent=$P" "$nid"
		show_logs
		stopped=1; return 0
	fi
	pass "docker network create -d $PLUGIN -o parent=$P --subnet $S.0/24 --gateway $S.1"
}

# container_a_checks: container A on the default bridge with a published port, then on
# rdma-macvlan too. Runs inside bridge_run.
container_a_checks() {
	say "container A: default bridge, published port, rdma-macvlan"
	check "B runs on the rdma-macvlan network only" run_c "$net-b" "$S.12"
	check "A created on the default bridge with -p $PORT:80 (busybox httpd)" \
		dk create --name "$net-a" -p "$PORT:80" "$IMAGE" sh -c \
		"mkdir -p /www && echo rmv-bridge-$id >/www/index.html && trap 'exit 0' TERM; httpd -f -p 80 -h /www & wait"
	check "docker network connect --ip $S.11 $net A (created, not started)" connect_rmv "$net-a" "$S.11"
	check "A starts" dk start "$net-a"
	check_v "A has its bridge interface and the macvlan with $S.11/24" has_both "$net-a" "$S.11"
	check "A pings B over the macvlan and the bridge's gateway $bgw" pings_both "$net-a" "$S.12"
	check "the published port answers: 127.0.0.1:$PORT in $ns (userland proxy), $EA:$PORT from $cns (DNAT)" poll 10 port_ok
	ifa=$(field ifname "$(ep_of "$S.11")")
	check "/v1/status lists A's endpoint (${ifa:-no ifname}) and B's" poll 5 net_endpoints "$nid" 2

	check "docker restart A" dk restart -t 3 "$net-a"
	check_v "after the restart: A has its bridge interface and the macvlan with $S.11/24" has_both "$net-a" "$S.11"
	check "after the restart: A pings B and the bridge's gateway" pings_both "$net-a" "$S.12"
	check "after the restart: the published port answers from both namespaces" poll 10 port_ok

	ifa=$(field ifname "$(ep_of "$S.11")")
	check "docker network disconnect $net A" dk network disconnect "$net" "$net-a"
	check "after disconnect: A has its bridge interface only" bridge_only "$net-a"
	check "after disconnect: no endpoint of A in /v1/status, its host link ${ifa:-?} gone" poll 5 ep_gone "$S.11" "$ifa"
	check "after disconnect: the published port still answers" poll 10 port_ok
	check "A connected again" connect_rmv "$net-a" "$S.11"
	check_v "connected again: both interfaces" has_both "$net-a" "$S.11"
	check "connected again: A pings B" pings "$net-a" "$S.12"
	ifa=$(field ifname "$(ep_of "$S.11")")
	check "docker rm -f A" dk rm -f "$net-a"
	check "after rm -f: no endpoint of A, its host link ${ifa:-?} gone" poll 5 ep_gone "$S.11" "$ifa"
	check "after rm -f: the published port is closed" poll 10 port_closed
}

# container_c_checks: container C on rdma-macvlan without a gateway first, then the default bridge
# (moby#51522's order). Runs inside bridge_run.
container_c_checks() {
	say "container C: rdma-macvlan without a gateway first, then the default bridge (moby#51522's order)"
	# moby#51522: a container whose remote-driver endpoint has no gateway gets docker_gwbridge as
	# its gateway unless the driver's Join disables the gateway service (rdma-macvlan does, as the
	# built-in macvlan); connecting a network with a gateway then failed with "endpoint not found".
	# Without --gateway, Docker 28+ gives the network no gateway (20.10 reserves the first address).
	check "docker network create -d $PLUGIN --subnet $S2.0/24 (no --gateway) $net-nogw" \
		dk network create -d "$PLUGIN" --subnet "$S2.0/24" -o parent="$P" "$net-nogw"
	check "D runs on the network without a gateway" dk run -d --name "$net-d" --network "$net-nogw" --ip "$S2.12" "$IMAGE" "${SLEEPER[@]}"
	check "C runs on the network without a gateway" dk run -d --name "$net-c" --network "$net-nogw" --ip "$S2.13" "$IMAGE" "${SLEEPER[@]}"
	check "no docker_gwbridge in $ns: C's endpoint asks for no gateway service" no_gwbridge
	if out=$(dk network connect bridge "$net-c" 2>&1); then
		pass "docker network connect bridge C (moby#51522 reports 'endpoint not found' here)"
	else
		fail "docker network connect bridge C (moby#51522 reports 'endpoint not found' here)" "$out"
		show_logs
	fi
	check_v "C has the macvlan with $S2.13/24 and its bridge interface" has_both "$net-c" "$S2.13"
	check "C pings D over the macvlan and the bridge's gateway" pings_both "$net-c" "$S2.12"
	check "docker network disconnect bridge C" dk network disconnect bridge "$net-c"
	check "C has its macvlan only, and still pings D" rmv_pings "$net-c" "$S2.13" "$S2.12"
	check "no docker_gwbridge in $ns" no_gwbridge
	ifc=$(field ifname "$(ep_of "$S2.13" "$(dk network inspect -f '{{.Id}}' "$net-nogw")")")
}

select_engines --both --middle "$@"
e2e_preflight nsenter:util-linux iptables:iptables
host_sys=$(host_sysctls)
suite_start bridge rdma-macvlan fakesysfs rmvstatus
make_plugin_dir "$work/plugin"
run_engines bridge_run
