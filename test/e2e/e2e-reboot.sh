#!/usr/bin/env bash
# e2e-reboot.sh: a host with the plugin installed as the README says survives a reboot with no
# manual step, on real Docker engines.
#
# A reboot empties /run (a tmpfs: /var/run is a link to it) and everything the engine keeps there,
# and keeps the disk. Each engine therefore runs in a private mount namespace of the run that looks
# like a host where it matters: a fresh tmpfs on /run, and /etc and /var/lib as overlays of the
# host's whose writable layers are in the run's directory (so what the README's commands create
# there, /etc/cdi and /var/lib/rdma-macvlan, stays across the simulated reboots and never touches
# the host's own). A reboot is: `scripts/dockerd.sh halt` (dockerd stops its containers and
# plugins, then containerd; the engine's exec-root and containerd's state go), a new tmpfs on
# /run, `scripts/dockerd.sh boot` (the same daemons again on the same data root).
#
# For each engine (Debian's 20.10, the current moby), with a veth pair as the RoCE parent and a
# fake mlx5 sysfs tree (the only setting given beyond the README's: there is no RDMA hardware):
#   1. the previous release's install (the manifest then mounted /var/run/cdi), from a registry
#      on 127.0.0.1, a network and a --restart always container; the README's upgrade block to
#      this tree's plugin, as written: the CDI mount moves to /etc/cdi, the state stays;
#   2. a reboot: dockerd up, the plugin enabled, the container running again with its address,
#      the CDI spec in /etc/cdi, a new container starting (on the current engine both take the
#      CDI device, which needs the spec at boot);
#   3. everything removed, then a fresh install with the README's quick start lines as written, a
#      --restart always container, a reboot, the same checks;
#   4. `docker plugin set cdi.source=` a directory that does not exist: `docker plugin enable`
#      refuses it at once, naming it, and `docker rdma doctor` names it with the fix; a reboot
#      with the plugin left disabled still brings dockerd up.
# Every check prints `ok - ...` or `not ok - ...`; the last line is `N passed, N failed`.
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines), iproute2, util-linux (unshare,
#   nsenter), ss, busybox-static, overlayfs in the kernel.
# Leaves behind: nothing of a run (the mount namespace and its holder, registry, dockerds, links,
#   temp dirs), also when a step fails; only what scripts/engines.sh installs and the
#   docker-registry binary cached under $RDMA_MACVLAN_CACHE/registry (default
#   /var/cache/rdma-macvlan).
#
# Usage: e2e-reboot.sh [debian] [current]   (default: both if the current engine is built, else debian)
# Environment: E2E_CMD_TIMEOUT  seconds any single docker command may take (default 90)
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"

work="" # temp dir of the suite (registry, plugin dirs, tools)
holder="" # pid of the process that holds the run's mount namespace

suite_teardown() { registry_stop; }

# teardown_hook (called by the harness's teardown after the engines were emptied): the engine is
# stopped inside the namespace, whose mounts only it can see, then the namespace goes with its
# holder.
teardown_hook() {
	if [[ -n $holder ]] && kill -0 "$holder" 2>/dev/null; then
		[[ -n $ddir ]] && inns bash "$scripts/dockerd.sh" stop "$ddir" 2>/dev/null
		stop_pid "$holder" 5 "mount namespace holder (pid $holder)"
	fi
	holder=""
	ddirs=()
}

e2e_traps

# inns CMD...: CMD in the run's mount namespace.
inns() { nsenter -t "$holder" -m -- "$@"; }

ns_private() { [[ $(readlink "/proc/$holder/ns/mnt") != "$(readlink /proc/self/ns/mnt)" ]]; }

# ns_up: the run's mount namespace (see the head of this file).
ns_up() {
	local d
	for d in etc var-lib; do mkdir -p "$rdir/$d/upper" "$rdir/$d/work"; done
	setsid unshare --mount --propagation private -- sleep 86400 </dev/null >/dev/null 2>&1 &
	holder=$!
	poll 5 ns_private >/dev/null || { echo "unshare did not make a mount namespace"; return 1; }
	inns mount -t tmpfs -o mode=0755 rmv-run /run
	inns mount -t overlay rmv-etc -o "lowerdir=/etc,upperdir=$rdir/etc/upper,workdir=$rdir/etc/work" /etc
	inns mount -t overlay rmv-var-lib -o "lowerdir=/var/lib,upperdir=$rdir/var-lib/upper,workdir=$rdir/var-lib/work" /var/lib
}

# reboot_host: a reboot of the run's host (see the head of this file); fails when dockerd does not
# come back, showing the end of its log.
reboot_host() {
	local out
	local l
	inns bash "$scripts/dockerd.sh" halt "$ddir" 2>&1 || return 1
	# Links in the host namespace go with a reboot too (a clean shutdown leaves none).
	for l in $(parent_children | awk -F': ' '{print $2}' | cut -d@ -f1); do
		say "reboot: deleting $l, left on the parent by the shutdown"
		ip link del "$l"
	done
	inns umount -l /run
	inns mount -t tmpfs -o mode=0755 rmv-run /run
	if ! out=$(inns bash "$scripts/dockerd.sh" boot "$ddir" 2>&1); then
		echo "$out"
		# What the engine said about its plugins at this boot, and its panic if it had one.
		echo "--- dockerd's log of this boot:"
		awk '/msg="Starting up"/ { boot = "" } { boot = boot $0 "\n" } END { printf "%s", boot }' "$ddir/dockerd.log" |
			grep -E 'level=(error|fatal).*(plugin|mount)' | tail -n 5
		grep -E -m1 -A6 '^panic' "$ddir/dockerd.log" || true
		return 1
	fi
}

# status: the plugin's /v1/status, read inside the namespace (the socket is under its /run).
status() { inns "$work/bin/rmvstatus" -socket "$sock"; }

# mounts_are WANT: the plugin's mount settings, as `NAME=SOURCE ` each, are WANT.
mounts_are() {
	local got set
	got=$(dk plugin inspect -f '{{range .Config.Mounts}}{{.Name}}={{.Source}} {{end}}' "$PLUGIN")
	set=$(dk plugin inspect -f '{{range .Settings.Mounts}}{{.Name}}={{.Source}} {{end}}' "$PLUGIN")
	echo "Config.Mounts:   $got"
	echo "Settings.Mounts: $set"
	[[ $got == "$1" ]] || { echo "want:            $1"; return 1; }
}

# plugin_sock: the plugin's socket inside the namespace.
plugin_sock() { printf '/run/docker/plugins/%s/rdma-macvlan.sock\n' "$(dk plugin inspect -f '{{.Id}}' "$PLUGIN")"; }

# rebooted DESC: the check that a reboot brings dockerd back up; fails (and the caller ends the
# engine's run: nothing after it can be checked) when it does not.
rebooted() {
	check "$1" reboot_host
	dk info >/dev/null 2>&1 || { fail "the engine is down after the reboot: the rest of this engine's run is not run"; return 1; }
}

# after_boot C...: what a host that rebooted must show: the plugin enabled and answering, each
# container C running again with its address on the network, the CDI spec in /etc/cdi, and a new
# container starting on the network.
after_boot() {
	local c ip
	check "after the reboot: plugin $PLUGIN enabled" \
		bash -c "[[ \$(docker plugin inspect -f '{{.Enabled}}' $PLUGIN) == true ]]"
	sock=$(plugin_sock)
	check "after the reboot: the plugin answers GET /v1/status" poll 15 status
	for c in "$@"; do
		check "after the reboot: --restart always container $c runs again" poll 30 running "$c"
		ip=$(cip "$c" 2>/dev/null || true)
		check "after the reboot: $c has its address $ip on eth0" \
			bash -c "docker exec $c ip -4 -o addr show dev eth0 | grep -qF ' $ip/'"
	done
	check "after the reboot: the CDI spec is in /etc/cdi" \
		bash -c "[[ \$(nsenter -t $holder -m -- ls /etc/cdi) == rdma-macvlan-$HCA.json ]]"
	check "after the reboot: a new container starts on the network" \
		dk run -d --name "new$1" --net "$net" "${devs[@]}" "$IMAGE" "${SLEEPER[@]}"
	check "after the reboot: /v1/status lists $(($# + 1)) endpoints" net_endpoints "$nid" $(($# + 1))
}

one_engine() {
	local engine=$1 t0=$SECONDS out upgrade quick cmd stopped
	local p
	local -a devs=()
	stopped=0
	reboot_setup
	previous_release_checks; ((!stopped)) || return 0
	fresh_install_checks; ((!stopped)) || return 0
	missing_source_checks; ((!stopped)) || return 0
	timings+=("$engine: $((SECONDS - t0)) s")
}

# reboot_setup: the run's names, the parent, its fake tree, the engine, both plugins in the
# registry. Runs inside one_engine.
reboot_setup() {
	tag=$engine
	new_id rmvb
	parent=rmvb${id}p peer=rmvb${id}q
	net=roce
	rdir=$(mktemp -d /tmp/rmv-reboot.XXXXXX)
	say "run $id: parent $parent, dir $rdir"
	veth_parent "$parent" "$peer"
	fake_hca "$rdir/sysfs" "$HCA" "$parent"
	ns_up
	ddir=$rdir/d
	ddirs+=("$ddir")
	eval "$(inns bash "$scripts/dockerd.sh" start "$ddir" "$engine")"
	bash "$scripts/mkimage.sh"
	# Only the current engine resolves CDI devices (both read /etc/cdi and /var/run/cdi).
	[[ $engine == current ]] && devs=(--device "rdma-macvlan/hca=$HCA")

	# Both plugins into the registry, through this engine.
	for p in old new; do
		dk plugin create "$reg/rmv/rdma-macvlan:$p" "$work/plugin-$p" >/dev/null
		dk plugin push "$reg/rmv/rdma-macvlan:$p" >/dev/null
		dk plugin rm "$reg/rmv/rdma-macvlan:$p" >/dev/null
	done
}

# previous_release_checks: 1. the previous release, upgraded with the README's block, and 2. a
# reboot; sets stopped when dockerd does not come back. Runs inside one_engine.
previous_release_checks() {
	# --- 1. the previous release, upgraded with the README's block ------------------------------
	check "previous release installed as its README said (mkdir -p /var/lib/rdma-macvlan /var/run/cdi)" \
		inns bash -c "mkdir -p /var/lib/rdma-macvlan /var/run/cdi &&
			docker plugin install $reg/rmv/rdma-macvlan:old --alias rdma-macvlan --grant-all-permissions sysfs.source=$rdir/sysfs/sys >/dev/null"
	check_v "previous release mounts cdi from /var/run/cdi" mounts_are "state=/var/lib/rdma-macvlan sysfs=$rdir/sysfs/sys cdi=/var/run/cdi "
	nid=$(dk network create -d "$PLUGIN" --subnet 192.168.7.0/24 -o parent="$parent" "$net")
	check "--restart always container c1 on the network" \
		dk run -d --name c1 --restart always --net "$net" "${devs[@]}" "$IMAGE" "${SLEEPER[@]}"
	upgrade=$(readme_block upgrade)
	[[ -n $upgrade ]] || die "README has no e2e:upgrade block"
	upgrade=${upgrade//REPO:VERSION/$reg/rmv/rdma-macvlan:new}
	check_v "the README's upgrade block, as written" inns env DOCKER_HOST="$DOCKER_HOST" bash -euo pipefail -c "$upgrade"
	check_v "after the upgrade: cdi is mounted from /etc/cdi, state and sysfs as before" \
		mounts_are "state=/var/lib/rdma-macvlan sysfs=$rdir/sysfs/sys cdi=/etc/cdi "
	sock=$(plugin_sock)
	check "after the upgrade: the state is kept (the network and c1's endpoint in /v1/status)" poll 15 net_endpoints "$nid" 1
	check "after the upgrade: c1 still runs" running c1
	check "after the upgrade: no spec of ours left in /var/run/cdi" bash -c "[[ -z \$(nsenter -t $holder -m -- ls -A /var/run/cdi) ]]"

	# --- 2. a reboot ----------------------------------------------------------------------------
	rebooted "reboot: dockerd comes back up" || { stopped=1; return 0; }
	after_boot c1
	dk rm -f c1 newc1 >/dev/null
}

# fresh_install_checks: 3. a fresh install with the README's quick start, and a reboot; sets
# stopped when dockerd does not come back. Runs inside one_engine.
fresh_install_checks() {
	# --- 3. a fresh install with the README's quick start ---------------------------------------
	dk network rm "$net" >/dev/null
	dk plugin disable -f "$PLUGIN" >/dev/null
	dk plugin rm "$PLUGIN" >/dev/null
	inns rm -rf /etc/cdi /var/lib/rdma-macvlan /var/run/cdi
	quick=$(readme_block quickstart)
	[[ -n $quick ]] || die "README has no e2e:quickstart block"
	for p in 'mkdir' 'plugin install' 'network create'; do
		cmd=$(grep -E -m1 "$p" <<<"$quick") || die "README's quick start has no '$p' line"
		cmd=${cmd#sudo }
		cmd=${cmd//REPO:VERSION/$reg/rmv/rdma-macvlan:new}
		cmd=${cmd//--grant-all-permissions/--grant-all-permissions sysfs.source=$rdir/sysfs/sys}
		cmd=${cmd//ens2f0/$parent}
		check_v "quick start: ${cmd%%#*}" inns env DOCKER_HOST="$DOCKER_HOST" bash -euo pipefail -c "$cmd"
	done
	nid=$(dk network inspect -f '{{.Id}}' "$net")
	check "--restart always container c2 on the network" \
		dk run -d --name c2 --restart always --net "$net" "${devs[@]}" "$IMAGE" "${SLEEPER[@]}"
	rebooted "reboot: dockerd comes back up" || { stopped=1; return 0; }
	after_boot c2
	dk rm -f newc2 >/dev/null
}

# missing_source_checks: 4. a mount source that does not exist, and a reboot with the plugin
# disabled; sets stopped when dockerd does not come back. Runs inside one_engine.
missing_source_checks() {
	# --- 4. a mount source that does not exist --------------------------------------------------
	dk plugin disable -f "$PLUGIN" >/dev/null
	dk plugin set "$PLUGIN" cdi.source="/rmv-missing-$id"
	check_v "the plugin's settings name the missing source" \
		mounts_are "state=/var/lib/rdma-macvlan sysfs=$rdir/sysfs/sys cdi=/rmv-missing-$id "
	refused "docker plugin enable with cdi.source=/rmv-missing-$id (missing) is refused, naming it" "/rmv-missing-$id" -- \
		dk plugin enable "$PLUGIN"
	out=$(inns env DOCKER_HOST="$DOCKER_HOST" DOCKER_CONFIG="$DOCKER_CONFIG" timeout 60 docker rdma doctor 2>&1 || true)
	check "docker rdma doctor names the missing source and the fix" \
		bash -c "grep -F -A1 'mount cdi' <<<\"\$1\" | grep -F '/rmv-missing-$id, which does not exist' -A1 | grep -qF 'fix: mkdir -p /rmv-missing-$id'" _ "$out"
	detail "$(grep -F -A1 'mount ' <<<"$out")"
	rebooted "reboot with the plugin disabled: dockerd comes back up" || { stopped=1; return 0; }
	dk plugin set "$PLUGIN" cdi.source=/etc/cdi
	check "the plugin enabled again with cdi.source=/etc/cdi" dk plugin enable "$PLUGIN"
	check "c2 starts again" dk start c2
	check "c2 has its address again" bash -c "docker exec c2 ip -4 -o addr show dev eth0 | grep -qF 192.168.7."
}

select_engines "$@"
e2e_preflight unshare:util-linux nsenter:util-linux ip:iproute2 ss:iproute2
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || die "the kernel has no overlayfs"
suite_start reboot rdma-macvlan docker-rdma fakesysfs rmvstatus
make_plugin_dir "$work/plugin-new" >/dev/null
make_plugin_dir "$work/plugin-old" >/dev/null
# The previous release's manifest mounted its CDI directory from /var/run/cdi.
sed -i 's|"source": "/etc/cdi"|"source": "/var/run/cdi"|' "$work/plugin-old/config.json"
grep -qF '"source": "/var/run/cdi"' "$work/plugin-old/config.json" || die "could not make the previous manifest"
# docker rdma for the doctor check, where the docker CLI looks for plugins.
export DOCKER_CONFIG=$work/dockercfg
install -D -m 0755 "$work/bin/docker-rdma" "$DOCKER_CONFIG/cli-plugins/docker-rdma"
regbin=$(registry_bin) || die "no docker-registry: $regbin"
registry_start "$regbin" "$work/registry" >"$work/registry.out" 2>&1 || die "registry did not start: $(cat "$work/registry.out")"
run_engines one_engine
