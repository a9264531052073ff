#!/usr/bin/env bash
# funclen.sh: no shell function in scripts/ or test/ is longer than 80 lines, so that a suite reads
# as a list of named groups of checks (make lint). A function is counted from its `NAME() {` line
# to the `}` that closes it at the start of a line.
set -euo pipefail
cd "$(dirname "$0")/.."
max=80
files=$(git ls-files 'scripts/*.sh' 'test/*.sh')
[[ -n $files ]] || { echo "funclen: no shell files found under scripts/ and test/"; exit 1; }
bad=0
# shellcheck disable=SC2016 # the awk program is in single quotes
while IFS=: read -r file fn n; do
	if ((n > max)); then
		echo "$file: $fn() is $n lines (at most $max): split it into named functions, as test/e2e/e2e-cli.sh's e2e() is"
		bad=1
	fi
done < <(xargs awk '
	FNR == 1 { start = 0 }
	/^[A-Za-z_][A-Za-z0-9_]*\(\) *\{/ { name = $1; sub(/\(\).*/, "", name); start = FNR; next }
	start && /^\}/ { print FILENAME ":" name ":" FNR - start + 1; start = 0 }' <<<"$files")
((bad == 0)) || exit 1
echo "funclen: no shell function over $max lines"
