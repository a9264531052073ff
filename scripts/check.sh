#!/usr/bin/env bash
# check.sh: everything CI runs (make check), stage by stage, with each stage's time.
#
# The slow preparations of the later stages (the engines built from source, the Soft-RoCE VM's
# image) start in the background at low priority (nice 19) once the Debian packages are in, and
# use what the earlier stages leave of the two cores and the network while lint, the unit,
# privileged, mutation and fuzz tests run; the real-kernel and end-to-end stages wait for them.
# Both are cached by content (scripts/engines.sh by version, test/kernel/vm/build.sh by the
# hash of its packages and recipe): on a warm machine they take seconds.
#
# Needs: root, what make deps installs, Go, the Debian archive and the Go module proxy.
# Leaves behind: what the stages leave (the caches above, the Debian packages); the background
# preparations are stopped, by pid, if a stage fails or the run is interrupted.
#
# Usage: scripts/check.sh
# Environment: CHECK_STAGES  stages to run, space separated (default: all, in the order below)
set -euo pipefail
cd "$(dirname "$0")/.."

early=(lint test test-root mutate fuzz)
late=(test-kernel e2e e2e-cli e2e-reliability)
stages=${CHECK_STAGES:-deps ${early[*]} ${late[*]}}

t_start=$SECONDS
say() { printf 'check: [%5s] %s\n' "$(clock $((SECONDS - t_start)))" "$*" >&2; }
clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

prep_dir=""
prep_pids=()
times=()
cleanup() {
	local rc=$? p
	set +e
	for p in "${prep_pids[@]}"; do
		kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	[[ -n $prep_dir ]] && rm -rf "$prep_dir"
	summary
	exit "$rc"
}
summary() {
	((${#times[@]})) || return 0
	printf 'check: stage times\n' >&2
	printf '  %s\n' "${times[@]}" >&2
	printf '  %-16s %s\n' total "$(clock $((SECONDS - t_start)))" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wanted() { [[ " $stages " == *" $1 "* ]]; }

# prep NAME CMD...: CMD in the background, in its own process group, at the lowest priority; its
# output goes to a log printed when it is waited for.
prep() {
	local name=$1
	shift
	[[ -n $prep_dir ]] || prep_dir=$(mktemp -d "${TMPDIR:-/tmp}/rdma-macvlan-check.XXXXXX")
	setsid nice -n 19 "$@" >"$prep_dir/$name.log" 2>&1 </dev/null &
	prep_pids+=("$!")
	printf '%s\n' "$name" >>"$prep_dir/names"
	say "started in the background: $name ($*)"
}

# wait_prep: waits for the background preparations; fails naming the one that failed.
wait_prep() {
	local i names t0=$SECONDS failed=""
	((${#prep_pids[@]})) || return 0
	mapfile -t names <"$prep_dir/names"
	for i in "${!prep_pids[@]}"; do
		if wait "${prep_pids[$i]}"; then
			say "background ${names[$i]}: done"
		else
			failed+=" ${names[$i]}"
			say "background ${names[$i]} failed; its log ends:"
			tail -n 40 "$prep_dir/${names[$i]}.log" >&2
		fi
	done
	prep_pids=()
	times+=("$(printf '%-16s %s (waited after the early stages)' preparations "$(clock $((SECONDS - t0)))")")
	[[ -z $failed ]] || { say "error: background preparation failed:$failed"; exit 1; }
}

stage() {
	local s=$1 t0=$SECONDS
	say "stage $s"
	make --no-print-directory "$s"
	times+=("$(printf '%-16s %s' "$s" "$(clock $((SECONDS - t0)))")")
	say "stage $s passed in $(clock $((SECONDS - t0)))"
}

wanted deps && stage deps
need_engines=0 need_vm=0
for s in "${late[@]}"; do wanted "$s" && need_engines=1; done
wanted test-kernel && need_vm=1
((need_engines)) && prep engines bash scripts/engines.sh install debian current v28 compose
((need_vm)) && prep vm-image bash test/kernel/vm/build.sh
for s in "${early[@]}"; do wanted "$s" && stage "$s"; done
wait_prep
for s in "${late[@]}"; do wanted "$s" && stage "$s"; done
say "all stages passed"
