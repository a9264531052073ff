#!/usr/bin/env bash
# record.sh: records the engine answers the tests of package docker replay (testdata/api-VERSION/):
# what a private engine answers on its socket to docker rdma's questions (NAME.json, NAME.status,
# ping.headers) and what the docker CLI of its generation prints for the same questions
# (cli-NAME.json), on an rdma-macvlan network with one container.
#
# Needs: root, Go, curl, scripts/engines.sh run before (both engines).
# Leaves behind: testdata/api-<API version>/; nothing else (engine, plugin, links, temp dirs go).
# Usage: record.sh debian|current   (run from this directory)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../../../.." && pwd)
engine=${1:?usage: record.sh debian|current}
case $engine in
debian) cli=/usr/bin/docker ;;
current) cli=/usr/local/bin/docker ;;
*) echo "record.sh: unknown engine $engine (want debian or current)" >&2; exit 2 ;;
esac
w=$(mktemp -d /tmp/rmv-record.XXXXXX)
p=rmvrec${engine:0:1}p q=rmvrec${engine:0:1}q d=$w/d
cleanup() {
	set +e
	if [[ -S $d/docker.sock ]]; then
		"$cli" rm -f rmvrec-c >/dev/null 2>&1
		"$cli" network rm rmvrec >/dev/null 2>&1
		PLUGIN_NAME=rmvrec bash "$repo/scripts/plugin.sh" remove >/dev/null 2>&1
	fi
	bash "$repo/scripts/dockerd.sh" stop "$d" >/dev/null 2>&1
	ip link del "$p" 2>/dev/null
	rm -rf "$w"
}
trap cleanup EXIT
ip link add "$p" type veth peer name "$q"
ip link set "$p" up
ip link set "$q" up
(cd "$repo" && go build -o "$w/fakesysfs" ./test/fakesysfs)
"$w/fakesysfs" -root "$w/fs" -kind mlx5 -netdev "$p" -mac "$(cat "/sys/class/net/$p/address")"
mkdir -p "$w/state" "$w/cdi"
extra=()
[[ $engine == current ]] && extra=(-- --cdi-spec-dir "$w/cdi")
bash "$repo/scripts/dockerd.sh" start "$d" "$engine" "${extra[@]}" >/dev/null
export DOCKER_HOST=unix://$d/docker.sock
bash "$repo/scripts/mkimage.sh" 2>/dev/null
PLUGIN_NAME=rmvrec PLUGIN_DIR=$w/plugin bash "$repo/scripts/plugin.sh" build >/dev/null 2>&1
PLUGIN_NAME=rmvrec PLUGIN_DIR=$w/plugin bash "$repo/scripts/plugin.sh" create >/dev/null 2>&1
"$cli" plugin set rmvrec:latest sysfs.source="$w/fs/sys" state.source="$w/state" cdi.source="$w/cdi"
"$cli" plugin enable rmvrec:latest >/dev/null
"$cli" network create -d rmvrec:latest --subnet 10.231.1.0/24 -o parent="$p" rmvrec >/dev/null
"$cli" run -d --name rmvrec-c --net rmvrec --ip 10.231.1.5 --device /dev/null:/dev/rec0 --cap-add IPC_LOCK \
	--ulimit memlock=4096:8192 rdma-macvlan-test/busybox:latest sleep 600 >/dev/null
sock=$d/docker.sock
ver=$(curl -s -D - -o /dev/null --unix-socket "$sock" http://docker/_ping | tr -d '\r' | awk -F': ' 'tolower($1)=="api-version"{print $2}')
out=$here/api-$ver
mkdir -p "$out"
curl -s -D "$out/ping.headers" -o /dev/null --unix-socket "$sock" http://docker/_ping
get() { curl -s -o "$out/$1.json" -w '%{http_code}\n' --unix-socket "$sock" "http://docker/v$ver$2" >"$out/$1.status"; }
get info /info
get plugins /plugins
get networks /networks
get network /networks/rmvrec
get network-missing /networks/no-such-net
get container /containers/rmvrec-c/json
"$cli" info --format '{{json .}}' >"$out/cli-info.json"
# shellcheck disable=SC2046 # one argument per plugin ID
"$cli" plugin inspect $("$cli" plugin ls --no-trunc --format '{{.ID}}') >"$out/cli-plugins.json"
"$cli" network inspect -- rmvrec >"$out/cli-network.json"
"$cli" container inspect -- rmvrec-c >"$out/cli-container.json"
"$cli" network ls --no-trunc --format '{{json .}}' >"$out/cli-networks.json"
"$cli" version --format '{{.Client.Version}} {{.Server.Version}} {{.Server.APIVersion}}' >"$out/versions.txt"
echo "record.sh: $engine (API $ver) recorded into $out"
