#!/usr/bin/env bash
# e2e-metrics.sh: a real Prometheus (Debian's package) scrapes the managed plugin and the legacy
# daemon on private engines during a container life cycle.
#
# For each engine, one private dockerd (scripts/dockerd.sh) runs both: the managed plugin with
# RDMA_MACVLAN_METRICS_ADDRESS set as the README's "Metrics" block sets it, and the binary as a
# legacy plugin with --metrics-address, each on a free port of 127.0.0.1, both on one fake mlx5
# tree (test/fakesysfs) on a veth parent. Prometheus runs on 127.0.0.1 (a free port, a private
# storage dir, 1 s scrapes) with the docs' scrape config and examples/prometheus-rules.yml. A container on each
# driver's network gets its GID entries (added to the fake tree by hand, as the kernel would);
# then PromQL through Prometheus's HTTP API returns the GID fill and readiness that /v1/status
# shows, GET /metrics on the plugin socket answers too, `promtool check metrics` passes on a
# scrape of each, `promtool check rules` on the rules file and one of its alerts made to fire; after the containers are gone
# Prometheus sees their calls counted and no endpoint left.
#
# Needs: root, Go, prometheus and promtool (Debian's prometheus package: scripts/deps.sh), curl,
#   jq, iproute2.
# Leaves behind: nothing, also when a check or a step fails (Prometheus, the legacy daemon, the
#   engine, links, the run's dir).
#
# Usage: e2e-metrics.sh [debian] [current]   (default: debian, and current when built)
# Output: "ok - ..." or "not ok - ..." per check, then "N passed, N failed"; exit 1 when any failed.
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"

prom_pid=""   # the Prometheus this run started
legacy_pid="" # the legacy daemon this run started
legacy_sock=""

teardown_hook() {
	if [[ -n $prom_pid ]]; then
		stop_pid "$prom_pid" 10
		wait "$prom_pid" 2>/dev/null || true
		prom_pid=""
	fi
	if [[ -n $legacy_pid ]]; then
		stop_pid "$legacy_pid" 15
		wait "$legacy_pid" 2>/dev/null || true
		legacy_pid=""
	fi
	[[ -n $legacy_sock ]] && rm -f "$legacy_sock"
	legacy_sock=""
}
e2e_traps

# promql QUERY: the value of the one sample QUERY returns through Prometheus's HTTP API ("" if none).
promql() {
	curl -fsS --max-time 5 "http://$prom/api/v1/query" --data-urlencode "query=$1" |
		jq -r 'if (.data.result | length) == 1 then .data.result[0].value[1] else "" end'
}

# prom_is QUERY WANT: the query's value is WANT (Prometheus scrapes every second: wait for it).
prom_is() {
	local got
	got=$(promql "$1")
	[[ $got == "$2" ]] || { echo "$1 = '$got', want '$2'"; return 1; }
}

# scrape_check ADDR: promtool check metrics passes on a scrape of ADDR.
scrape_check() { curl -fsS --max-time 5 "http://$1/metrics" | promtool check metrics; }

# socket_metrics SOCK: GET /metrics on the plugin socket shows the GID table gauges.
socket_metrics() { curl -fsS --max-time 5 --unix-socket "$1" http://plugin/metrics | grep -E '^rdma_macvlan_gid_table_used\{hca="mlx5_0",port="1"\} [0-9]+$'; }

# status_of SOCK FIELD: a field of the network line of /v1/status on SOCK (test/e2e/rmvstatus).
status_of() { sock=$1 status | awk '$1 == "network"' | head -n 1 | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# ready_on SOCK: the plugin on SOCK reports one endpoint and it RDMA-ready.
ready_on() { sock=$1 status | awk '$1 == "endpoint"' | grep -q 'rdma_ready=true'; }

metrics_run() {
	local engine=$1 t0=$SECONDS mport lport pport sub ip_m ip_l used id_m id_l stopped
	local parent peer msock size
	stopped=0
	metrics_setup; ((!stopped)) || return 0
	container_checks
	gid_fill_checks
	# A refusal, then the end of the life cycle.
	refused "a misspelt option is refused" mtus -- dk network create -d "$PLUGIN" -o parent="$parent" -o mtus=9000 "rmvm-$id-bad"
	dk rm -f "$id_m" "$id_l" >/dev/null
	dk network rm "rmvm-$id-m" "rmvm-$id-l" >/dev/null
	check "PromQL: the refusal counted (reason invalid_option)" \
		poll 15 prom_is 'sum(rdma_macvlan_refusals_total{reason="invalid_option"})' 1
	check "no alert fires before a refusal the rules alert on" prom_is 'count(ALERTS{alertstate="firing"}) or vector(0)' 0
	refused "a parent without an RDMA device is refused" "$peer" -- dk network create -d "$PLUGIN" -o parent="$peer" "rmvm-$id-nohca"
	check "the alert RdmaMacvlanRefusals of examples/prometheus-rules.yml fires (reason host_setup)" \
		poll 20 prom_is 'count(ALERTS{alertname="RdmaMacvlanRefusals",alertstate="firing",reason="host_setup"})' 1
	check "PromQL: Join and Leave counted ok once per daemon" \
		poll 15 prom_is 'count(rdma_macvlan_plugin_calls_total{method=~"Join|Leave",outcome="ok"} == 1)' 4
	check "PromQL: no endpoint left, no network left" \
		poll 15 prom_is 'sum(rdma_macvlan_networks) + count(rdma_macvlan_endpoints) or sum(rdma_macvlan_networks)' 0
	check "PromQL: the version of the build" prom_is 'count(rdma_macvlan_build_info{version!=""})' 2
	timings+=("$engine: $((SECONDS - t0)) s")
}

# metrics_setup: the parent and its fake tree, the engine, the managed plugin with the README's
# metrics block, the legacy daemon with --metrics-address, Prometheus with the docs' scrape
# config and examples/' alert rules; sets stopped when Prometheus does not start. Runs inside
# metrics_run.
metrics_setup() {
	tag=$engine
	new_id rmvm
	rdir=$(mktemp -d "/tmp/rmv-metrics-$engine.XXXXXX")
	parent=rmvm${id}p peer=rmvm${id}q
	veth_parent "$parent" "$peer"
	fake_hca "$rdir/sysfs" "$HCA" "$parent"
	mkdir -p "$rdir/state" "$rdir/cdi" "$rdir/lstate" "$rdir/lcdi" "$rdir/prom"
	engine_up "$rdir/d" "$engine"
	mport=$(free_port)
	lport=$(free_port)
	pport=$(free_port)
	while [[ $lport == "$mport" ]]; do lport=$(free_port); done
	while [[ $pport == "$mport" || $pport == "$lport" ]]; do pport=$(free_port); done

	# The managed plugin, then the README's block that turns its metrics address on.
	plugin_up "$work/plugin" "$rdir/state" "$rdir/cdi" "$rdir/sysfs/sys"
	readme_block metrics-managed | sed "s/127\.0\.0\.1:9464/127.0.0.1:$mport/" >"$rdir/managed.sh"
	check "README block: the managed plugin's RDMA_MACVLAN_METRICS_ADDRESS set (127.0.0.1:$mport)" bash -e "$rdir/managed.sh"
	msock=/run/docker/plugins/$(dk plugin inspect -f '{{.Id}}' "$PLUGIN")/rdma-macvlan.sock

	# The legacy daemon with --metrics-address.
	legacy_sock=/run/docker/plugins/rmv-metrics-$id.sock
	mkdir -p /run/docker/plugins
	setsid "$work/bin/rdma-macvlan" --socket "$legacy_sock" --state-dir "$rdir/lstate" --sysfs-root "$rdir/sysfs" \
		--cdi-dir "$rdir/lcdi" --metrics-address "127.0.0.1:$lport" </dev/null >>"$rdir/legacy.log" 2>&1 &
	legacy_pid=$!
	check "legacy daemon with --metrics-address 127.0.0.1:$lport answers on $legacy_sock" poll 15 "$work/bin/rmvstatus" -socket "$legacy_sock"

	# Prometheus with the docs' scrape config (its port and a 1 s interval) and the alert rules of
	# examples/, evaluated every second.
	check "promtool check rules passes on examples/prometheus-rules.yml" promtool check rules "$repo/examples/prometheus-rules.yml"
	{
		printf 'global: {evaluation_interval: 1s}\n'
		printf 'rule_files: [%s]\n' "$repo/examples/prometheus-rules.yml"
		readme_block metrics-scrape | sed -e "s/'127\.0\.0\.1:9464'/'127.0.0.1:$mport', '127.0.0.1:$lport'/" \
			-e 's/scrape_interval: .*/scrape_interval: 1s/'
	} >"$rdir/prometheus.yml"
	prom=127.0.0.1:$pport
	setsid prometheus --config.file="$rdir/prometheus.yml" --storage.tsdb.path="$rdir/prom" \
		--web.listen-address="$prom" </dev/null >"$rdir/prometheus.log" 2>&1 &
	prom_pid=$!
	if ! check "Prometheus $(prometheus --version 2>&1 | awk 'NR == 1 {print $3}') runs on $prom with the docs' scrape config and the rules file" \
		poll 20 curl -fsS --max-time 2 "http://$prom/-/ready"; then
		detail "Prometheus's log:" "$(tail -n 20 "$rdir/prometheus.log")"
		stopped=1; return 0
	fi
	check "Prometheus scrapes both plugins (up == 1 for each target)" \
		poll 20 prom_is 'sum(up{job="rdma-macvlan"})' 2
	say "set up in $((SECONDS - t0)) s"
}

# container_checks: a container on each driver's network, its GIDs added as the kernel would.
# Runs inside metrics_run.
container_checks() {
	# A container on each driver's network; its GIDs appear as the kernel would add them.
	sub=$((RANDOM % 200 + 20))
	ip_m=10.81.$sub.10
	ip_l=10.82.$sub.10
	dk network create -d "$PLUGIN" --subnet "10.81.$sub.0/24" -o parent="$parent" "rmvm-$id-m" >/dev/null
	dk network create -d "rmv-metrics-$id" --subnet "10.82.$sub.0/24" -o parent="$parent" "rmvm-$id-l" >/dev/null
	id_m=$(dk run -d --net "rmvm-$id-m" --ip "$ip_m" "$IMAGE" "${SLEEPER[@]}")
	id_l=$(dk run -d --net "rmvm-$id-l" --ip "$ip_l" "$IMAGE" "${SLEEPER[@]}")
	"$work/bin/fakesysfs" add-ip -root "$rdir/sysfs" -hca "$HCA" -ip "$ip_m" -ndev eth0 >/dev/null
	"$work/bin/fakesysfs" add-ip -root "$rdir/sysfs" -hca "$HCA" -ip "$ip_l" -ndev eth0 >/dev/null
	check "managed plugin's container RDMA-ready in /v1/status" poll 15 ready_on "$msock"
	check "legacy container RDMA-ready in /v1/status" poll 15 ready_on "$legacy_sock"
}

# gid_fill_checks: the GID fill /v1/status shows, through PromQL, the same from both daemons.
# Runs inside metrics_run.
gid_fill_checks() {
	# The GID fill /v1/status shows, through PromQL; the same from both daemons (one table).
	used=$(status_of "$msock" gid_used)
	size=$(status_of "$msock" gid_size)
	[[ $(status_of "$legacy_sock" gid_used) == "$used" ]] || fail "the two daemons' /v1/status disagree on the table they share"
	check "PromQL: GID fill of mlx5_0 port 1 from both daemons is what /v1/status shows ($used of $size)" \
		poll 15 prom_is "count(rdma_macvlan_gid_table_used{hca=\"mlx5_0\",port=\"1\"} == $used and on(instance, hca, port) rdma_macvlan_gid_table_size == $size)" 2
	check "PromQL: one RDMA-ready endpoint per daemon" \
		poll 15 prom_is 'count(rdma_macvlan_endpoints{state="ready"} == 1)' 2
	check "PromQL: time from Join to GID readiness observed once per daemon" \
		poll 15 prom_is 'sum(rdma_macvlan_gid_ready_seconds_count)' 2
	check "GET /metrics on the managed plugin's socket" socket_metrics "$msock"
	check "GET /metrics on the legacy daemon's socket" socket_metrics "$legacy_sock"
	check "promtool check metrics passes on a scrape of the managed plugin" scrape_check "127.0.0.1:$mport"
	check "promtool check metrics passes on a scrape of the legacy daemon" scrape_check "127.0.0.1:$lport"
}

select_engines "$@"
e2e_preflight prometheus:"Debian's prometheus package (scripts/deps.sh)" promtool:"Debian's prometheus package" curl:curl jq:jq
suite_start metrics rdma-macvlan fakesysfs rmvstatus
make_plugin_dir "$work/plugin"
run_engines metrics_run
