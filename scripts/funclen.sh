#!/usr/bin/env bash
# funclen.sh: no shell function in scripts/ or test/ is longer than 80 lines, so that a suite reads
# as a list of named groups of checks (make lint). A function is counted from its `NAME() {` line
# to the `}` that closes it at the start of a line. The few still longer are listed below with
# their length: they may shrink, not grow, and a new one may not join them.
set -euo pipefail
cd "$(dirname "$0")/.."
max=80
# FILE:FUNCTION:LINES of the functions not yet split (the VM's and the benchmark's, which only
# make test-kernel and make bench run).
known=(
	test/kernel/vm/vm-bond.sh:bond_checks:256
	test/kernel/vm/vm-runtime.sh:runtime_checks:83
	test/bench/bench.sh:main:112
	test/bench/bench.sh:engine_bench:86
)
files=$(git ls-files 'scripts/*.sh' 'test/*.sh')
[[ -n $files ]] || { echo "funclen: no shell files found under scripts/ and test/"; exit 1; }
bad=0
# shellcheck disable=SC2016 # the awk program is in single quotes
while IFS=: read -r file fn n; do
	allowed=$max
	for k in "${known[@]}"; do
		[[ $k == "$file:$fn:"* ]] && allowed=${k##*:}
	done
	if ((n > allowed)); then
		echo "$file: $fn() is $n lines (at most $allowed): split it into named functions, as test/e2e/e2e-cli.sh's e2e() is"
		bad=1
	fi
done < <(xargs awk '
	FNR == 1 { start = 0 }
	/^[A-Za-z_][A-Za-z0-9_]*\(\) *\{/ { name = $1; sub(/\(\).*/, "", name); start = FNR; next }
	start && /^\}/ { print FILENAME ":" name ":" FNR - start + 1; start = 0 }' <<<"$files")
((bad == 0)) || exit 1
echo "funclen: no shell function over $max lines but the ${#known[@]} listed"
