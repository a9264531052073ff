#!/usr/bin/env bash
# plugin.sh: package rdma-macvlan as a managed Docker plugin and put it into a Docker engine.
#
# Needs: Go or Docker (build: make build); the docker CLI and a daemon at DOCKER_HOST (or the default one) for the rest;
#   root for install (host directories).
# Leaves behind: build/plugin/{config.json,rootfs/} (build); the plugin in the daemon (create,
#   install); the host directories of its state and cdi mounts (install). remove takes the plugin
#   out of the daemon but keeps its state directory, so a reinstall finds its networks again.
#
# Usage:
#   plugin.sh build             the daemon of make build (a static binary) into
#                               build/plugin/rootfs/rdma-macvlan, config.json beside rootfs/
#   plugin.sh create [-f]       docker plugin create NAME:TAG build/plugin; with -f an existing
#                               plugin of that name is removed first (its state is kept)
#   plugin.sh install [-f]      creates the plugin if missing (-f: replace it, keeping the mount
#                               sources and env settings of the one it replaces, a CDI directory
#                               under /run moved to /etc/cdi), applies PLUGIN_SETTINGS, creates the
#                               host directories of the state and cdi mounts, enables it; every
#                               `docker plugin set` comes before `enable`, which is when the
#                               engine mounts the sources
#   plugin.sh remove            disables (-f) and removes the plugin; host state stays
#   plugin.sh name              prints NAME:TAG (what `docker network create -d` takes)
# Environment:
#   PLUGIN_NAME (default rdma-macvlan), PLUGIN_TAG (default latest),
#   PLUGIN_SETTINGS (install: `docker plugin set` arguments, e.g. "state.source=/srv/rmv
#   RDMA_MACVLAN_LOG_LEVEL=debug"; an enabled plugin is disabled (-f) for them and enabled again),
#   PLUGIN_DIR (default build/plugin of the repo), PLUGIN_BINARY (package this prebuilt static
#   binary instead of running make build), and make build's GO, BUILD, GO_IMAGE and VERSION (the
#   version built in: rdma-macvlan --version, /v1/status; default git describe --tags --always
#   --dirty).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NAME=${PLUGIN_NAME:-rdma-macvlan}:${PLUGIN_TAG:-latest}
PDIR=${PLUGIN_DIR:-$repo/build/plugin}

say() { printf 'plugin.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }

exists() { docker plugin inspect "$NAME" >/dev/null 2>&1; }
enabled() { [[ $(docker plugin inspect -f '{{.Enabled}}' "$NAME" 2>/dev/null) == true ]]; }

do_build() {
	local bin=$PDIR/rootfs/rdma-macvlan
	rm -rf "$PDIR"
	mkdir -p "$PDIR/rootfs"
	if [[ -z ${PLUGIN_BINARY:-} ]]; then
		# make build: with Go, or in a Go image without it (or with BUILD=docker).
		say "building with make build"
		make -C "$repo" --no-print-directory build >&2 || die "make build failed"
		PLUGIN_BINARY=$repo/build/bin/rdma-macvlan
	fi
	install -m 0755 "$PLUGIN_BINARY" "$bin"
	# The plugin has no libc and no loader: a dynamic binary would fail with "no such file".
	if ldd "$bin" >/dev/null 2>&1; then die "$bin is dynamically linked; a plugin rootfs has no libraries"; fi
	# Mount points and scratch dirs the runtime and the daemon use, made here so that nothing
	# depends on the runtime creating them: /run/docker/plugins (the socket), the three mounts,
	# /etc (hosts, resolv.conf of the host network), /tmp.
	mkdir -p "$PDIR/rootfs"/{dev,proc,sys,etc,run/docker/plugins,var/lib/rdma-macvlan,var/run/cdi,host/sys}
	install -d -m 1777 "$PDIR/rootfs/tmp"
	: >"$PDIR/rootfs/etc/hosts"
	: >"$PDIR/rootfs/etc/resolv.conf"
	install -m 0644 "$repo/config.json" "$PDIR/config.json"
	say "built $PDIR ($(du -sh "$PDIR" | cut -f1))"
}

do_remove() {
	if exists; then
		enabled && docker plugin disable -f "$NAME" >/dev/null
		docker plugin rm -f "$NAME" >/dev/null
		say "removed $NAME"
	fi
}

do_create() {
	local force=$1
	[[ -f $PDIR/config.json && -x $PDIR/rootfs/rdma-macvlan ]] || die "$PDIR is not built (run: $0 build)"
	if exists; then
		[[ -n $force ]] || die "plugin $NAME exists already (replace it with: $0 create -f)"
		do_remove
	fi
	docker plugin create "$NAME" "$PDIR" >/dev/null
	say "created $NAME (disabled)"
}

# host_dirs prints the sources of the plugin's state and cdi mounts as they are set now.
host_dirs() {
	docker plugin inspect -f '{{range .Config.Mounts}}{{.Name}} {{.Source}}{{"\n"}}{{end}}' "$NAME" |
		awk '$1 == "state" || $1 == "cdi" {print $2}'
}

# settings_now prints, one per line, the `docker plugin set` arguments that give a new plugin the
# settings of this one: its mount sources as the engine mounts them (.Config.Mounts; .Settings.Mounts
# can be stale after an install or upgrade) and the env values set away from its manifest's
# defaults (.Settings.Env against .Config.Env: a default is the new manifest's to choose). A CDI
# directory under /run becomes /etc/cdi: /run is emptied at boot, and a mount source missing at
# boot stops the engine.
settings_now() {
	docker plugin inspect -f '{{range .Config.Mounts}}mount {{.Name}}.source={{.Source}}{{"\n"}}{{end}}{{range .Config.Env}}default {{.Name}}={{.Value}}{{"\n"}}{{end}}{{range .Settings.Env}}env {{.}}{{"\n"}}{{end}}' "$NAME" |
		awk '$1 == "default" {sub(/^default /, ""); def[$0] = 1; next}
			$1 == "mount" {sub(/^mount /, ""); print; next}
			$1 == "env" {sub(/^env /, ""); if (!($0 in def)) print}' |
		sed -E 's#^cdi\.source=(/var)?/run/cdi/?$#cdi.source=/etc/cdi#'
}

# settable_keys prints the keys the plugin as created now takes, one a line: the env it declares and
# its mounts' sources.
settable_keys() {
	docker plugin inspect -f '{{range .Config.Env}}{{.Name}}{{"\n"}}{{end}}{{range .Config.Mounts}}{{.Name}}.source{{"\n"}}{{end}}' "$NAME"
}

do_install() {
	local force=$1 d src kept=() carry=() given=() s keys
	read -ra given <<<"${PLUGIN_SETTINGS:-}"
	if [[ -n $force ]] || ! exists; then
		if exists; then
			mapfile -t kept < <(settings_now)
		fi
		do_create "$force"
	fi
	((${#kept[@]})) && keys=$'\n'$(settable_keys)$'\n'
	for s in "${kept[@]}"; do
		if [[ $keys == *$'\n'"${s%%=*}"$'\n'* ]]; then
			carry+=("$s")
		else
			say "not kept: $s (the new manifest has no such setting)"
		fi
	done
	given=("${carry[@]}" "${given[@]}")
	if ((${#given[@]})); then
		if enabled; then
			say "disabling $NAME to change its settings"
			docker plugin disable -f "$NAME" >/dev/null
		fi
		docker plugin set "$NAME" "${given[@]}"
		say "set: ${given[*]}"
	fi
	while read -r d; do
		[[ -n $d ]] || continue
		mkdir -p "$d"
	done < <(host_dirs)
	src=$(docker plugin inspect -f '{{range .Config.Mounts}}{{if eq .Name "sysfs"}}{{.Source}}{{end}}{{end}}' "$NAME")
	[[ -d $src ]] || die "sysfs mount source $src does not exist"
	if enabled; then
		say "$NAME is enabled already"
	else
		docker plugin enable "$NAME" >/dev/null
		say "enabled $NAME; use it with: docker network create -d $NAME -o parent=IFNAME --subnet ..."
	fi
}

cmd=${1:-}
force=""
if [[ ${2:-} == -f ]]; then force=1; elif (($# > 1)); then usage; fi
case $cmd in
build) do_build ;;
create) do_create "$force" ;;
install) do_install "$force" ;;
remove) do_remove ;;
name) printf '%s\n' "$NAME" ;;
*) usage ;;
esac
