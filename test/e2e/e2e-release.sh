#!/usr/bin/env bash
# e2e-release.sh: a release installed, used and upgraded the way the README tells users, from a
# registry, on real Docker engines.
#
# Once: a registry on 127.0.0.1 (Debian's docker-registry, as test/e2e/e2e-reliability.sh), a private
# "publisher" dockerd, and `scripts/release.sh` (make release) twice into that registry: versions
# X and Y of the working tree (static amd64 and arm64 builds, pushed as REPO:V, REPO:V-amd64,
# REPO:V-arm64), and X again for amd64 with Docker alone (`BUILD=docker`, no Go on PATH, in a Go
# image imported from this machine's Go, its modules from a file proxy), which must give the same
# bytes. Then for each engine (Debian's 20.10, the current moby), on a fresh private dockerd
# with a veth pair as the RoCE parent and a fake mlx5 sysfs tree:
#   - `docker plugin install REPO:X --alias rdma-macvlan --grant-all-permissions` with non-default
#     mounts (state.source, cdi.source, sysfs.source) and a log level given at install time: the
#     plugin's name is rdma-macvlan:latest; `-d rdma-macvlan` is refused, `-d rdma-macvlan:latest`
#     creates the network (the README's claims);
#   - docker rdma installed with the README's lines from the plugin's rootfs; `docker rdma version`
#     shows X for the CLI and the plugin and the engine's version; doctor names the -d to use;
#   - two containers on the network ping each other;
#   - the same release installed again as `--alias roce` (its own state): docker rdma recognises
#     its networks by the plugin's manifest, no --plugin needed;
#   - REPO:X-arm64 pulled (disabled, it cannot run here): its manifest is the amd64 one, its daemon
#     and CLI binaries are static arm64 ELF files, the amd64 ones static amd64;
#   - the README's upgrade sequence to REPO:Y, run as written: same plugin id, the mounts set at
#     install time in force again, env settings kept, both containers running with the same pids
#     and pinging, a new container pinging them, `docker rdma version` showing Y for the plugin and,
#     after the README's CLI lines again, for the CLI;
#   - removal: containers, network, plugin.
# Every check prints `ok - ...` or `not ok - ...`; the last line is `N passed, N failed`.
#
# Needs: root, Go, apt (scripts/engines.sh installs the engines), iproute2, ss, busybox-static.
# Leaves behind: nothing of a run (registry, dockerds, links, temp dirs), also when a step fails;
#   only what scripts/engines.sh installs and the docker-registry binary cached under
#   $RDMA_MACVLAN_CACHE/registry (default /var/cache/rdma-macvlan).
#
# Usage: e2e-release.sh [debian] [current]   (default: both if the current engine is built, else debian)
# Environment: E2E_CMD_TIMEOUT  seconds any single docker command may take (default 90)
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/e2e/lib/e2e.sh
source "$here/lib/e2e.sh"

work="" # temp dir of the suite (registry, releases, tools)

# The registry outlives the engine runs: it goes with the suite (the harness's exit handling runs
# this after the run's teardown).
suite_teardown() { registry_stop; }

e2e_traps

# ---------------------------------------------------------------------------------------------
# What the README tells users, run as written (with the test's names put in).

# cli_install: the README's lines that copy docker rdma, rdma-exec and the runtime out of the
# plugin's rootfs, into the test's DOCKER_CONFIG/cli-plugins instead of /usr/local/lib/docker/cli-plugins
# (the docker CLI looks there first) and /usr/local/lib/rdma-macvlan (the runtime looks for rdma-exec
# next to itself first).
cli_install() {
	local block
	block=$(readme_block cli-install)
	[[ -n $block ]] || { echo "README has no e2e:cli-install block"; return 1; }
	block=${block//sudo /} # the suite runs as root
	block=${block//\/usr\/local\/lib\/docker\/cli-plugins/$DOCKER_CONFIG\/cli-plugins}
	block=${block//\/usr\/local\/lib\/rdma-macvlan/$DOCKER_CONFIG\/cli-plugins}
	[[ $block != */usr/local/* ]] || { echo "the README's lines write elsewhere under /usr/local:"; echo "$block"; return 1; }
	printf '%s\n' "$block"
	bash -euo pipefail -c "$block"
}

# upgrade_to NEW: the README's upgrade sequence, its P= and NEW= lines replaced by the test's.
upgrade_to() {
	local block
	block=$(readme_block upgrade | grep -vE '^(P|NEW)=')
	[[ -n $block ]] || { echo "README has no e2e:upgrade block"; return 1; }
	printf '%s\n' "$block"
	# The block makes /etc/cdi and cleans /var/run/cdi: on this host's copies only, in a mount
	# namespace of its own with a fresh /run and /etc behind an overlay in the run's dir.
	mkdir -p "$rdir/etc-upper" "$rdir/etc-work"
	P=$PLUGIN NEW=$1 unshare --mount --propagation private -- bash -euo pipefail -c "
		mount -t tmpfs rmv-run /run
		mount -t overlay rmv-etc -o lowerdir=/etc,upperdir=$rdir/etc-upper,workdir=$rdir/etc-work /etc
		$block"
}

# source_upgrade: the README's upgrade from source, run in this checkout as root (so without sudo,
# which would drop DOCKER_HOST), building the plugin in the run's dir and putting docker rdma and
# rdma-exec in the test's DOCKER_CONFIG, with the version $vz built in.
source_upgrade() {
	local block
	block=$(readme_block source-upgrade)
	[[ -n $block ]] || { echo "README has no e2e:source-upgrade block"; return 1; }
	block=${block//sudo /}
	printf '%s\n' "$block"
	(cd "$repo" && VERSION=$vz PLUGIN_DIR=$rdir/plugin CLI_PLUGINS_DIR=$DOCKER_CONFIG/cli-plugins \
		HELPER_DIR=$DOCKER_CONFIG/cli-plugins bash -euo pipefail -c "$block")
}

# remove_as_written: the README's removal, its P= line replaced by the test's, the CLI's files taken
# from the test's DOCKER_CONFIG instead of /usr/local.
remove_as_written() {
	local block
	block=$(readme_block remove | grep -vE '^P=')
	[[ -n $block ]] || { echo "README has no e2e:remove block"; return 1; }
	block=${block//sudo /}
	block=${block//\/usr\/local\/lib\/docker\/cli-plugins/$DOCKER_CONFIG\/cli-plugins}
	block=${block//\/usr\/local\/lib\/rdma-macvlan/$DOCKER_CONFIG\/cli-plugins}
	# The engine's own config file, where the test registered the runtime.
	block=${block//docker rdma runtime uninstall/docker rdma runtime uninstall --config-file $ddir\/daemon.json}
	[[ $block != */usr/local/* ]] || { echo "the README's lines touch elsewhere under /usr/local:"; echo "$block"; return 1; }
	printf '%s\n' "$block"
	P=$PLUGIN bash -euo pipefail -c "$block"
}

# removal_blocked: with a container on the network, the README's removal fails before it takes
# the plugin or the CLI away.
removal_blocked() {
	local out
	if out=$(remove_as_written 2>&1); then
		echo "$out"
		return 1
	fi
	[[ $(dk plugin inspect -f '{{.Enabled}}' "$PLUGIN") == true && -x $DOCKER_CONFIG/cli-plugins/docker-rdma ]]
}

# removed: nothing of the plugin is left in the engine or in the CLI's directory.
removed() {
	local out
	out=$(dk plugin ls -q; dk network ls -q --filter driver="$PLUGIN"; ls "$DOCKER_CONFIG/cli-plugins"; jq -r '.runtimes // {} | keys[]' "$ddir/daemon.json")
	[[ -z $out ]] || { echo "left: $out"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# Helpers of a run.

# plugin_root NAME: the plugin's rootfs on the host, where the README's CLI lines read it.
plugin_root() {
	printf '%s/plugins/%s/rootfs\n' "$(dk info -f '{{.DockerRootDir}}')" "$(dk plugin inspect -f '{{.Id}}' "$1")"
}

# manifest NAME: a plugin's manifest (config.json) as the engine has it, but its rootfs layers.
manifest() {
	dk plugin inspect -f '{{json .Config.Description}} {{json .Config.Documentation}} {{json .Config.Entrypoint}} {{json .Config.WorkDir}} {{json .Config.User}} {{json .Config.Interface}} {{json .Config.Network}} {{json .Config.Linux}} {{json .Config.Mounts}} {{json .Config.Env}} {{json .Config.Args}} {{json .Config.PropagatedMount}} {{json .Config.IpcHost}} {{json .Config.PidHost}}' "$1"
}
layers() { dk plugin inspect -f '{{json .Config.Rootfs}}' "$1"; }

same_manifest() {
	local a b
	a=$(manifest "$1") b=$(manifest "$2")
	[[ $a == "$b" ]] || { printf '%s:\n%s\n%s:\n%s\n' "$1" "$a" "$2" "$b"; return 1; }
}

# mounts_as_set: the mounts the plugin runs with (.Config.Mounts, which the engine uses) are the ones
# given at install time.
mounts_as_set() {
	local got want
	got=$(dk plugin inspect -f '{{range .Config.Mounts}}{{.Name}}={{.Source}} {{end}}' "$PLUGIN")
	want="state=$rdir/state sysfs=$rdir/sysfs/sys cdi=$rdir/cdi "
	[[ $got == "$want" ]] || { echo "mounts: $got"; echo "want:   $want"; return 1; }
}

env_kept() {
	local got
	got=$(dk plugin inspect -f '{{range .Settings.Env}}{{.}} {{end}}' "$PLUGIN")
	[[ $got == *RDMA_MACVLAN_LOG_LEVEL=debug* ]] || { echo "env: $got"; return 1; }
}

# carried_over WHAT IP: after WHAT (an upgrade), the plugin runs with the mounts and env given at
# install time, containers a and b kept running (same pids) and still ping, and a new container
# on IP starts and pings both.
carried_over() {
	local out
	check "after $1 the plugin runs with the mounts given at install time" mounts_as_set
	check "after $1 the env settings given at install time are kept" env_kept
	out="$(cpid "$net-a" 2>&1) $(cpid "$net-b" 2>&1)"
	if [[ $out == "$pida $pidb" && -n $pida ]]; then
		pass "both containers kept running through $1 (same pids)"
	else
		fail "both containers kept running through $1 (same pids)" "pids $out, were $pida $pidb"
	fi
	check "after $1 a still pings b" poll 10 pings "$net-a" "$sub.12"
	check "after $1 a new container starts on $net and pings a and b" \
		dk run --rm --network "$net" --ip "$2" "$IMAGE" sh -c "ping -c 1 -W 2 $sub.11 && ping -c 1 -W 2 $sub.12"
}

# rdma_version WANT_CLI WANT_PLUGIN: docker rdma version shows both, and the engine's version.
rdma_version() {
	local out engine
	out=$(dk rdma version 2>&1) || { echo "$out"; return 1; }
	engine=$(dk version -f '{{.Server.Version}}')
	printf '%s\n' "$out"
	grep -qE "^docker rdma: +$1\$" <<<"$out" || { echo "(want docker rdma: $1)"; return 1; }
	grep -qE "^plugin $PLUGIN \(id [0-9a-f]{12}\): +$2\$" <<<"$out" || { echo "(want plugin $PLUGIN: $2)"; return 1; }
	grep -E '^engine: ' <<<"$out" | grep -qF "Docker $engine" || { echo "(want engine: Docker $engine)"; return 1; }
}

# doctor_names_driver: docker rdma doctor names the exact -d (its exit status is 1 here: the host
# has no RDMA device; only its plugin line is checked).
doctor_names_driver() {
	local out
	out=$(dk rdma doctor 2>&1 || true)
	grep -F "docker network create -d $PLUGIN" <<<"$out" || { echo "$out"; return 1; }
}

# alias_recognised: a network of the plugin installed as roce:latest is rdma-macvlan to docker rdma
# (ls) and to the release's runtime, copied out by the README's lines with rdma-exec beside it and
# registered for this plugin: a container on the network gets the HCA's nodes.
alias_recognised() {
	local out
	out=$(dk rdma ls 2>&1) || { echo "$out"; return 1; }
	grep -qE "^$net-roce +roce:latest " <<<"$out" || { echo "$out"; echo "(no line for $net-roce, driver roce:latest)"; return 1; }
	out=$(dk rdma --plugin roce:latest runtime install --config-file "$ddir/daemon.json" --path "$DOCKER_CONFIG/cli-plugins/rdma-macvlan-runtime" 2>&1) ||
		{ echo "$out"; return 1; }
	kill -HUP "$(cat "$ddir/dockerd.spawned")"
	# shellcheck disable=SC2016 # a Go template, for docker
	poll 20 bash -c '[[ $(docker info -f "{{range \$k, \$v := .Runtimes}}{{\$k}} {{end}}") == *"rdma-macvlan "* ]]' ||
		{ echo "dockerd does not list the runtime after SIGHUP"; return 1; }
	# This machine refuses a memlock above 8 MiB: the container asks for that (the runtime keeps it).
	out=$(dk run --rm --runtime rdma-macvlan -e RDMA_MACVLAN_NO_WAIT=1 --ulimit memlock=8388608:8388608 --network "$net-roce" "$IMAGE" ls /dev/infiniband 2>&1)
	printf '%s\n' "$out"
	[[ $(grep -v 'IPv4 forwarding' <<<"$out" | tr '\n' ' ') == "rdma_cm uverbs0 " ]]
}

rm_roce() { dk network rm "$net-roce" >/dev/null && dk plugin rm -f roce:latest >/dev/null; }
cli_again() { cli_install >/dev/null && rdma_version "$vy" "$vy"; }

pull_arches() {
	dk plugin install --disable --alias rmv-arm64 --grant-all-permissions "$repo_ref:$vx-arm64" &&
		dk plugin install --disable --grant-all-permissions "$repo_ref:$vx-amd64" &&
		[[ $(dk plugin inspect -f '{{.Name}}' "$repo_ref:$vx-amd64") == "$repo_ref:$vx-amd64" ]]
}

same_layers() {
	local a b c
	a=$(layers "$PLUGIN") b=$(layers "$repo_ref:$vx-amd64") c=$(layers rmv-arm64:latest)
	[[ $a == "$b" && $a != "$c" ]] || { printf '%s: %s\n%s-amd64: %s\nrmv-arm64: %s\n' "$PLUGIN" "$a" "$vx" "$b" "$c"; return 1; }
}

# arm64_fails: the arm64 plugin, its mounts set to directories that exist, cannot be enabled here;
# what the engine says and what its log says about the plugin's start are shown.
arm64_fails() {
	local out id
	mkdir -p "$rdir/state-arm" "$rdir/cdi-arm"
	dk plugin set rmv-arm64:latest state.source="$rdir/state-arm" cdi.source="$rdir/cdi-arm" sysfs.source="$rdir/sysfs/sys"
	id=$(dk plugin inspect -f '{{.Id}}' rmv-arm64:latest)
	if out=$(dk plugin enable rmv-arm64:latest 2>&1); then
		echo "enabled: $out"
		return 1
	fi
	printf 'docker said: %s\n' "$out"
	out=$(grep -F "$id" "$rdir/d/dockerd.log" | grep -F "exec format error" | tail -n 1)
	printf 'dockerd log: %s\n' "${out:-no line with exec format error}"
	[[ -n $out && $(dk plugin inspect -f '{{.Enabled}}' rmv-arm64:latest) == false ]]
}

elf_ok() {
	local arch=$1
	shift
	"$work/bin/elfcheck" -arch "$arch" "$@"
}

# ---------------------------------------------------------------------------------------------
# One run on engine $1.
rel_run() {
	local engine=$1 id n t0 out root pida pidb pid_id
	release_setup
	install_checks
	alias_arm64_checks
	upgrade_checks
	# --- remove -----------------------------------------------------------------------------------
	check "the README's removal stops at a network with a container on it, removing nothing" removal_blocked
	check "containers removed (docker rm -f)" dk rm -f "$net-a" "$net-b"
	check_v "the README's removal, as written: networks, plugin, CLI" remove_as_written
	check_v "nothing of the plugin is left: no plugin, no network, no docker rdma, rdma-exec or runtime (binary or daemon.json entry)" removed
	check "no macvlan child of $parent is left" bash -c "! ip -o link show type macvlan | grep -F '@$parent:'"

	unset DOCKER_CONFIG
	teardown
	timings+=("$engine: whole run: $(($(date +%s) - t0)) s")
}

# release_setup: the run's names, the parent and its fake tree, the engine. Runs inside rel_run.
release_setup() {
	tag=$engine
	t0=$(date +%s)
	new_id rmvz
	parent=rmvz${id}p
	net=rmv-relz-$id
	sub=10.233.$((0x${id:0:2}))
	rdir=$(mktemp -d /tmp/rmv-relz.XXXXXX)
	mkdir -p "$rdir/state" "$rdir/cdi" "$rdir/state-roce" "$rdir/cdi-roce" "$rdir/dockercfg"
	export DOCKER_CONFIG=$rdir/dockercfg
	say "run $id: parent $parent, subnet $sub.0/24, dir $rdir"
	veth_parent "$parent" "rmvz${id}q"
	fake_hca "$rdir/sysfs" mlx5_0 "$parent" -size 255
	engine_up "$rdir/d" "$engine"
}

# install_checks: the release installed as users do, the CLI copied out of it, containers on it.
# Runs inside rel_run.
install_checks() {
	# --- install as users do --------------------------------------------------------------------
	check "docker plugin install $repo_ref:$vx --alias rdma-macvlan --grant-all-permissions with state.source, cdi.source, sysfs.source and a log level" \
		dk plugin install --alias rdma-macvlan --grant-all-permissions "$repo_ref:$vx" \
		state.source="$rdir/state" cdi.source="$rdir/cdi" sysfs.source="$rdir/sysfs/sys" RDMA_MACVLAN_LOG_LEVEL=debug
	out=$(dk plugin ls --format '{{.Name}} {{.Enabled}}' 2>&1)
	if [[ $out == "$PLUGIN true" ]]; then
		pass "the plugin is listed as $PLUGIN, enabled (what -d must name)"
	else
		fail "the plugin is listed as $PLUGIN, enabled" "docker plugin ls: $out"
	fi
	check "the plugin runs with the mounts given at install time" mounts_as_set
	refused "docker network create -d rdma-macvlan (no tag) is refused, as the README says" "could not resolve driver rdma-macvlan" -- \
		dk network create -d rdma-macvlan --subnet "$sub.0/24" -o parent="$parent" "$net-notag"
	check "docker network create -d $PLUGIN --subnet $sub.0/24 -o parent=$parent $net" \
		dk network create -d "$PLUGIN" --subnet "$sub.0/24" -o parent="$parent" "$net"

	check_v "docker rdma installed with the README's lines, from the plugin's rootfs" cli_install
	check_v "docker rdma version: CLI $vx, plugin $vx, the engine's version" rdma_version "$vx" "$vx"
	check_v "docker rdma doctor names the driver: docker network create -d $PLUGIN" doctor_names_driver

	if run_c "$net-a" "$sub.11" && run_c "$net-b" "$sub.12"; then
		pass "two containers run on $net ($sub.11, $sub.12)"
	else
		fail "two containers run on $net"
	fi
	check "a pings b" poll 10 pings "$net-a" "$sub.12"
	pida=$(cpid "$net-a" || true) pidb=$(cpid "$net-b" || true)
}

# alias_arm64_checks: the same release as another alias, and the arm64 plugin pulled. Runs
# inside rel_run.
alias_arm64_checks() {
	# --- another alias ----------------------------------------------------------------------------
	check "the same release installed again as --alias roce (own state and cdi mounts)" \
		dk plugin install --alias roce --grant-all-permissions "$repo_ref:$vx" \
		state.source="$rdir/state-roce" cdi.source="$rdir/cdi-roce" sysfs.source="$rdir/sysfs/sys"
	check "docker network create -d roce:latest" \
		dk network create -d roce:latest --subnet "10.234.$((0x${id:0:2})).0/24" -o parent="$parent" "$net-roce"
	check_v "docker rdma recognises roce:latest by its manifest: ls lists $net-roce; the release's runtime gives a container on it its devices" \
		alias_recognised
	check "network and plugin roce removed" rm_roce

	# --- arm64 ------------------------------------------------------------------------------------
	check "docker plugin install --disable $repo_ref:$vx-arm64 --alias rmv-arm64, and $repo_ref:$vx-amd64 without an alias, named after its reference (pulled, not run)" \
		pull_arches
	check_v "the arm64 plugin's manifest is the amd64 one (all of config.json but the layers)" \
		same_manifest rmv-arm64:latest "$repo_ref:$vx-amd64"
	check "$repo_ref:$vx and $repo_ref:$vx-amd64 are the same plugin (same layers), $vx-arm64 another" same_layers
	root=$(plugin_root rmv-arm64:latest)
	check_v "the arm64 plugin's daemon, CLI, runtime and rdma-exec are static arm64 ELF executables" \
		elf_ok arm64 "$root/rdma-macvlan" "$root/cli-plugins/docker-rdma" "$root/cli-plugins/rdma-exec" "$root/cli-plugins/rdma-macvlan-runtime"
	root=$(plugin_root "$PLUGIN")
	check_v "the amd64 plugin's daemon, CLI, runtime and rdma-exec are static amd64 ELF executables" \
		elf_ok amd64 "$root/rdma-macvlan" "$root/cli-plugins/docker-rdma" "$root/cli-plugins/rdma-exec" "$root/cli-plugins/rdma-macvlan-runtime"
	check_v "the arm64 plugin installed on this amd64 host without complaint, and enabling it fails: exec format error in dockerd's log (mounts set to existing dirs)" \
		arm64_fails
	check "the arm64 and amd64 pulls removed" dk plugin rm -f rmv-arm64:latest "$repo_ref:$vx-amd64"
}

# upgrade_checks: the README's upgrade block, from the registry and from source. Runs inside
# rel_run.
upgrade_checks() {
	# --- upgrade ----------------------------------------------------------------------------------
	pid_id=$(dk plugin inspect -f '{{.Id}}' "$PLUGIN")
	check_v "the README's upgrade sequence to $repo_ref:$vy, as written" upgrade_to "$repo_ref:$vy"
	out=$(dk plugin inspect -f '{{.Id}} {{.PluginReference}} {{.Enabled}}' "$PLUGIN" 2>&1)
	if [[ $out == "$pid_id $repo_ref:$vy true" ]]; then
		pass "after the upgrade: same id, reference $repo_ref:$vy, enabled"
	else
		fail "after the upgrade: same id, reference $repo_ref:$vy, enabled" "now: $out (id was $pid_id)"
	fi
	carried_over "the upgrade" "$sub.13"
	check_v "docker rdma version shows the plugin at $vy (the CLI still $vx)" rdma_version "$vx" "$vy"
	check_v "the README's CLI lines again: docker rdma version shows $vy for both" cli_again

	# --- upgrade from source ----------------------------------------------------------------------
	check_v "the README's upgrade from source, as written (make install FORCE=1, version $vz)" source_upgrade
	out=$(dk plugin inspect -f '{{.Name}} {{.Enabled}}' "$PLUGIN" 2>&1)
	if [[ $out == "$PLUGIN true" ]]; then
		pass "after make install FORCE=1: $PLUGIN, enabled"
	else
		fail "after make install FORCE=1: $PLUGIN, enabled" "now: $out"
	fi
	carried_over "make install FORCE=1" "$sub.14"
	check_v "docker rdma version shows $vz for the CLI and the plugin" rdma_version "$vz" "$vz"
}

# go_image NAME: an image of this machine's Go (the engine cannot pull golang:*), with busybox for
# the Dockerfile's sh, as `docker import` makes one from a directory.
go_image() {
	local st=$work/goimg
	mkdir -p "$st/bin" "$st/tmp" "$st/root" "$st/usr/local"
	cp /bin/busybox "$st/bin/busybox"
	local a
	for a in $(/bin/busybox --list); do [[ $a == busybox ]] || ln -s busybox "$st/bin/$a"; done
	cp -al "$(go env GOROOT)" "$st/usr/local/go" 2>/dev/null || cp -a "$(go env GOROOT)" "$st/usr/local/go"
	tar -C "$st" --exclude=./usr/local/go/test --exclude=./usr/local/go/doc -c . |
		dk import --change 'ENV PATH=/usr/local/go/bin:/bin HOME=/root GOTOOLCHAIN=local' - "$1" >/dev/null
	rm -rf "$st"
}

# goproxy DIR: a Go module proxy (GOPROXY=file://...) of the modules this build needs, from the
# module cache: the build in the engine fetches nothing from elsewhere.
goproxy() {
	local dir=$1 cache m v esc f
	cache=$(go env GOMODCACHE)/cache/download
	while read -r m v; do
		[[ -n $v ]] || continue
		# shellcheck disable=SC2001 # \L (lower case) has no parameter expansion
		esc=$(sed 's/[A-Z]/!\L&/g' <<<"$m")
		mkdir -p "$dir/$esc/@v"
		for f in "$cache/$esc/@v/$v".{info,mod,zip}; do
			if [[ -f $f ]]; then cp "$f" "$dir/$esc/@v/"; fi
		done
	done < <(cd "$repo" && go list -m -f '{{.Path}} {{.Version}}' all)
}

# docker_alone_release: release $vx for amd64 with Docker alone (no Go on PATH: BUILD=docker chosen
# by release.sh itself), from a copy of this tree with the module proxy in it, in the local Go image.
docker_alone_release() {
	local tree=$work/tree-docker
	mkdir -p "$tree"
	(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -xf - -C "$tree"
	goproxy "$tree/.goproxy"
	env PATH=/usr/sbin:/usr/bin:/sbin:/bin GO=/nonexistent/go OUT="$work/rel-docker" VERSION="$vx" RELEASE_ARCHES=amd64 \
		COMMIT="$(git -C "$repo" rev-parse HEAD)" GO_IMAGE=rmv/go:local GOPROXY=file:///src/.goproxy GOSUMDB=off \
		bash "$tree/scripts/release.sh"
}

# install_docker_alone: `make install` in the Docker-alone tree, on a PATH without Go, against the
# publisher engine: the binaries built in the local Go image, the plugin created from them with the
# test's mount sources, enabled; docker rdma, rdma-exec and the runtime installed into the test's
# directories. The plugin is removed again (the publisher keeps none).
install_docker_alone() {
	local d=$work/inst name=rmv-make-install:latest rc=0
	mkdir -p "$d/state" "$d/cdi" "$d/sys"
	env PATH=/usr/sbin:/usr/bin:/sbin:/bin GO=/nonexistent/go VERSION="$vx" COMMIT="$(git -C "$repo" rev-parse HEAD)" \
		GO_IMAGE=rmv/go:local GOPROXY=file:///src/.goproxy GOSUMDB=off PLUGIN_NAME=rmv-make-install \
		make -C "$work/tree-docker" install CLI_PLUGINS_DIR="$d/cli" HELPER_DIR="$d/helper" \
		SETTINGS="state.source=$d/state cdi.source=$d/cdi sysfs.source=$d/sys" || rc=1
	if ((rc == 0)); then
		[[ $(dk plugin inspect -f '{{.Enabled}}' "$name") == true ]] || { echo "$name is not enabled"; rc=1; }
		[[ $("$d/cli/docker-rdma" docker-cli-plugin-metadata) == *"\"Version\":\"$vx\""* ]] ||
			{ echo "docker-rdma in $d/cli is not $vx: $("$d/cli/docker-rdma" docker-cli-plugin-metadata)"; rc=1; }
		elf_ok amd64 "$d/helper/rdma-exec" "$d/helper/rdma-macvlan-runtime" "$d/cli/docker-rdma" || rc=1
	fi
	dk plugin rm -f "$name" >/dev/null 2>&1 || true
	return "$rc"
}

# same_release A B: the amd64 binaries, licences and plugin rootfs of two release dirs are the same
# bytes.
same_release() {
	local a=$1 b=$2
	diff <(grep -- '-linux-amd64$' "$a/SHA256SUMS") "$b/SHA256SUMS" &&
		diff -r "$a/licenses" "$b/licenses" && diff -r "$a/plugin-linux-amd64" "$b/plugin-linux-amd64"
}

# ---------------------------------------------------------------------------------------------
select_engines "$@"
e2e_preflight ss:iproute2 jq:jq
tag=release
suite_start relz fakesysfs elfcheck
regbin=$(registry_bin) || die "no docker-registry: $regbin"
registry_start "$regbin" "$work/registry" >"$work/registry.out" 2>&1 || die "registry did not start: $(cat "$work/registry.out")"
repo_ref=$reg/e2e/rdma-macvlan
vx=v0.0.1-e2e.$$ vy=v0.0.2-e2e.$$ vz=v0.0.3-e2e.$$
say "registry on $reg; publishing $vx and $vy through a private dockerd"
ddirs+=("$work/pub")
eval "$(bash "$scripts/dockerd.sh" start "$work/pub" debian)"
t0=$(now_ms)
check "make release REGISTRY=$reg/e2e VERSION=$vx (publisher dockerd)" \
	env OUT="$work/rel-x" VERSION="$vx" REGISTRY="$reg/e2e" GOFLAGS=-buildvcs=auto bash "$scripts/release.sh"
check "make release REGISTRY=$reg/e2e VERSION=$vy" \
	env OUT="$work/rel-y" VERSION="$vy" REGISTRY="$reg/e2e" bash "$scripts/release.sh"
timings+=("two releases built and pushed: $((($(now_ms) - t0) / 1000)) s")
# (GOFLAGS=-buildvcs=auto above: the release must not depend on the go env of the machine for
# leaving out the VCS stamp, which a build in this git checkout would otherwise carry and the
# build in Docker, without .git, would not.)
# With Docker alone: the release of $vx for amd64 again, on a PATH without Go, in a Go image made
# here from this machine's Go (the engine pulls nothing), its modules from a proxy of files.
t0=$(now_ms)
check "a Go image made locally (docker import of this machine's Go and busybox)" go_image rmv/go:local
check "make release with Docker alone (no Go on PATH: BUILD=docker), VERSION=$vx, amd64" docker_alone_release
check_v "make install with Docker alone (no Go on PATH): built in the Go image, the plugin enabled, docker rdma, rdma-exec and the runtime installed" \
	install_docker_alone
check_v "reproducible: the Docker-alone release has the bytes of the Go one (binaries, licences, plugin rootfs)" \
	same_release "$work/rel-x" "$work/rel-docker"
timings+=("the release built with Docker alone: $((($(now_ms) - t0) / 1000)) s")
check_v "the release lists its references and checksums that verify" \
	bash -c "cat '$work/rel-x/VERSION' && cd '$work/rel-x' && sha256sum -c SHA256SUMS"
out=$(dk plugin ls -q 2>&1)
if [[ -z $out ]]; then pass "the publisher keeps no plugin after pushing"; else fail "the publisher keeps no plugin after pushing" "$out"; fi
unset DOCKER_HOST
teardown

run_engines rel_run
