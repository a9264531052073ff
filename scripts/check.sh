#!/usr/bin/env bash
# check.sh: everything CI runs (make check), in two lanes, with each stage's time.
#
# The end-to-end stages spend most of their time waiting on engines, containers and timeouts: they
# use about a third of the two cores. So the main lane runs them (then the Soft-RoCE VM, which
# wants both cores and whose guest, starved, reports its CPUs stuck) while the side lane runs the
# stages that only want CPU: lint, the unit, privileged, mutation and fuzz tests. (The VM in the
# side lane after the Go stages, at the same share, passed but took 27 minutes instead of 13 and
# slowed e2e from 36 to 47: the run took 62:29 against about 64, not worth a VM that near its
# 40-minute bound.) The Go tests make
# their own namespaces and links (names of their own), temporary dirs and sockets, and touch no
# host state the suites use; what both lanes use is the kernel (its netlink lock, its namespace
# clean-up) and 127.0.0.1's ports, which the suites take below the range the kernel gives the
# tests' connections (free_port in test/e2e/lib/e2e.sh).
#
# The side lane is a session of its own, which the scheduler's autogroups (Debian's default) give
# the same share of the CPU as the main lane's session, whatever its nice. It is not given less:
# the Go tests bound each answer by a few seconds to catch a hang, and starved they miss those
# bounds (at the lowest priority, a 1 MiB request of TestDeepNestingRefused went unanswered for
# 5 s under the race detector while e2e-cli ran).
#
# The slow preparations (the engines built from source, the VM's image) start first, after the
# Debian packages, in the background at the main lane's priority: on a cold machine they are what
# the main lane waits for. The engines come in two jobs, one after the other: Debian's and the
# current one first (the oldest and the newest of scripts/lib/engines.sh), which is all that e2e-cli
# and e2e-reliability (and the VM) use, so the main lane runs those two while the middle engines
# (Docker 28) and Compose build, and e2e last. All are cached by content
# (scripts/engines.sh by version, test/kernel/vm/build.sh by the hash of its packages and recipe):
# on a warm machine they take seconds.
#
# The side lane's output goes to a log, printed when the run ends; its stage lines are printed as
# they happen. A failed stage in either lane stops the run at the main lane's next stage.
#
# Needs: root, what make deps installs, Go, the Debian archive and the Go module proxy.
# Leaves behind: what the stages leave (the caches above, the Debian packages); the preparations
# and the side lane are stopped, by process group, if a stage fails or the run is interrupted.
#
# Usage: scripts/check.sh
# Environment: CHECK_STAGES  stages to run, space separated (default: all, in the order below)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/engines.sh
. scripts/lib/engines.sh

side=(lint test test-root mutate fuzz)
main=(e2e-cli e2e-reliability e2e test-kernel)
stages=${CHECK_STAGES:-deps ${side[*]} ${main[*]}}

t_start=${CHECK_T0:-$SECONDS}
say() { printf 'check: [%5s] %s\n' "$(clock $((SECONDS - t_start)))" "$*" >&2; }
clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }
wanted() { [[ " $stages " == *" $1 "* ]]; }

# stage NAME [LANE]: runs make NAME and adds its time to the lane's times file.
stage() {
	local s=$1 lane=${2:-main} t0=$SECONDS
	say "$lane: stage $s"
	if ! make --no-print-directory "$s"; then
		printf '%-16s %s  failed (%s lane)\n' "$s" "$(clock $((SECONDS - t0)))" "$lane" >>"$work/times"
		say "$lane: stage $s failed after $(clock $((SECONDS - t0)))"
		return 1
	fi
	printf '%-16s %s  (%s lane)\n' "$s" "$(clock $((SECONDS - t0)))" "$lane" >>"$work/times"
	say "$lane: stage $s passed in $(clock $((SECONDS - t0)))"
}

# await NAME...: waits for background jobs (preparations, the side lane) to end; fails naming the
# one that failed (its log is printed at the end), or the side lane when it fails meanwhile. A job
# writes its status to $work/NAME.rc as it ends; one that is gone without writing it failed.
await() {
	local name rc t0=$SECONDS waited=()
	for name; do
		[[ -e $work/$name.pid ]] || continue
		waited+=("$name")
		while [[ ! -s $work/$name.rc ]] && kill -0 "$(<"$work/$name.pid")" 2>/dev/null; do
			! failed side || { say "error: the side lane failed: stopping"; return 1; }
			sleep 1
		done
		rc=$(cat "$work/$name.rc" 2>/dev/null) || rc="none: it was gone without one"
		[[ $rc == 0 ]] || { say "error: $name failed (status $rc)"; return 1; }
	done
	((SECONDS - t0 < 2)) || say "waited $(clock $((SECONDS - t0))) for: ${waited[*]}"
}

# failed NAME: whether background job NAME has ended with a failure.
failed() { [[ -s $work/$1.rc && $(<"$work/$1.rc") != 0 ]]; }

# The side lane: this script again, with CHECK_LANE=side, in a session of its own, its output in
# side.log and the run's standard error as file descriptor 3, for its stage lines.
if [[ ${CHECK_LANE:-} == side ]]; then
	work=$CHECK_WORK
	trap 'echo $? >"$work/side.rc"' EXIT
	say() { printf 'check: [%5s] %s\n' "$(clock $((SECONDS - t_start)))" "$*" >&3; }
	for s in "${side[@]}"; do
		wanted "$s" || continue
		stage "$s" side || exit 1
	done
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rdma-macvlan-check.XXXXXX")
pgids=()
cleanup() {
	local rc=$? p
	set +e
	for p in "${pgids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
	wait 2>/dev/null
	if [[ -s $work/side.log ]]; then
		printf "check: the side lane's output\n" >&2
		cat "$work/side.log" >&2
	fi
	for p in engines engines-more vm-image; do
		failed "$p" || continue
		printf "check: %s failed; its log ends:\n" "$p" >&2
		tail -n 60 "$work/$p.log" >&2
	done
	if [[ -s $work/times ]]; then
		printf 'check: stage times\n' >&2
		sed 's/^/  /' "$work/times" >&2
		printf '  %-16s %s\n' total "$(clock $((SECONDS - t_start)))" >&2
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# bg NAME CMD...: CMD in the background, in its own process group; its output goes to
# $work/NAME.log, its status to $work/NAME.rc.
bg() {
	local name=$1
	shift
	# shellcheck disable=SC2016 # the inner bash expands them
	setsid bash -c '"${@:2}"; echo $? >"$1"' _ "$work/$name.rc" "$@" >"$work/$name.log" 2>&1 </dev/null &
	pgids+=("$!")
	echo "$!" >"$work/$name.pid"
	say "started in the background: $name ($*)"
}

wanted deps && stage deps
need_engines=0
for s in "${main[@]}"; do wanted "$s" && need_engines=1; done
if ((need_engines)); then
	# The oldest and the newest engine (the default install), then the middle ones and compose.
	bg engines bash scripts/engines.sh install
	# shellcheck disable=SC2016 # the inner bash expands them
	wanted e2e && bg engines-more bash -c 'while [[ ! -s $1 ]]; do sleep 1; done; (($(<"$1") == 0)) &&
		bash scripts/engines.sh install "${@:2}" compose' _ "$work/engines.rc" "${ENGINE_MIDDLE[@]}"
fi
wanted test-kernel && bg vm-image bash test/kernel/vm/build.sh
side_wanted=()
for s in "${side[@]}"; do wanted "$s" && side_wanted+=("$s"); done
if ((${#side_wanted[@]})); then
	CHECK_LANE=side CHECK_WORK=$work CHECK_T0=$((t_start - SECONDS)) \
		setsid bash scripts/check.sh 3>&2 >"$work/side.log" 2>&1 </dev/null &
	pgids+=("$!")
	echo "$!" >"$work/side.pid"
	say "started the side lane: ${side_wanted[*]}"
fi
for s in "${main[@]}"; do
	wanted "$s" || continue
	await engines
	[[ $s != e2e ]] || await engines-more
	[[ $s != test-kernel ]] || await vm-image
	failed side && { say "error: the side lane failed: stopping"; exit 1; }
	stage "$s"
done
await side engines engines-more vm-image
say "all stages passed"
