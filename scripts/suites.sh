#!/usr/bin/env bash
# suites.sh: runs test suites one after another, as make does, and says how long each one took:
# after each suite, and all of them in a table at the end (also when one fails, which ends the run
# with its status).
#
# Usage: scripts/suites.sh SCRIPT [ARG...] [-- SCRIPT [ARG...]]...
set -euo pipefail
cd "$(dirname "$0")/.."

clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }
times=()
report() {
	((${#times[@]})) || return 0
	printf 'suites: times\n' >&2
	printf '  %s\n' "${times[@]}" >&2
}
trap report EXIT

run() {
	local t0=$SECONDS rc=0
	bash "$@" || rc=$?
	times+=("$(printf '%-28s %6s%s' "$*" "$(clock $((SECONDS - t0)))" "$( ((rc == 0)) || echo "  failed ($rc)")")")
	printf 'suites: %s took %s\n' "$*" "$(clock $((SECONDS - t0)))" >&2
	return "$rc"
}

args=()
for a in "$@" --; do
	if [[ $a == -- ]]; then
		((${#args[@]} == 0)) || run "${args[@]}"
		args=()
	else
		args+=("$a")
	fi
done
