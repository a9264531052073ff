#!/usr/bin/env bash
# readme-blocks.sh [FILE...]: every command block of the README (and of docs/*.md) says how it is
# tested. The last non-empty line before a block's opening fence must be either
#   <!-- e2e:NAME -->           a suite runs the block as written (test/e2e/lib/e2e.sh readme_block NAME)
#   <!-- not run: REASON -->    or <!-- not run as written: REASON -->, with the reason.
#   <!-- sample:NAME -->        (docs/*.md) a command's output, which a suite checks (sample NAME)
# Every e2e:NAME marker must be read by a test (`readme_block NAME` under test/), appear once, and
# every name a test reads must have a marker in README.md or docs/*.md; the same for samples. Fails with the file, line and fix.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
if (($# == 0)); then
	set -- README.md docs/*.md
fi

bad=0
for f in "$@"; do
	# file:line:reason for each block without a valid marker; file:line:NAME for each marker.
	while IFS=: read -r kind line what; do
		case $kind in
		nomark)
			echo "$f:$line: command block without a marker: put <!-- e2e:NAME --> (and run it from a suite with readme_block NAME) or <!-- not run: REASON --> on the line before it (last line before: $what)"
			bad=1
			;;
		noreason)
			echo "$f:$line: <!-- not run --> without a reason: say why the block is not run"
			bad=1
			;;
		esac
	done < <(awk '
		/^```/ {
			if (!open) {
				if (prev ~ /^<!-- (e2e|sample):[a-z0-9_-]+ -->$/) { }
				else if (prev ~ /^<!-- not run( as written)?: *-->$/) { print "noreason:" NR ":" }
				else if (prev ~ /^<!-- not run( as written)?: .*[^ ].* -->$/) { }
				else { print "nomark:" NR ":" prev }
			}
			open = !open; prev = $0; next
		}
		NF { prev = $0 }' "$f")
done

# The markers of README.md and docs/*.md, and the names the suites read.
mapfile -t marks < <(grep -ohE '^<!-- e2e:[a-z0-9_-]+ -->$' README.md docs/*.md | sed -E 's/^<!-- e2e:(.*) -->$/\1/' | sort)
mapfile -t read < <(grep -rhE 'readme_block [a-z0-9_-]+' test/ | grep -vE '^[[:space:]]*#' |
	grep -oE 'readme_block [a-z0-9_-]+' | awk '{print $2}' | sort -u)
dups=$(printf '%s\n' "${marks[@]}" | uniq -d)
if [[ -n $dups ]]; then
	echo "README.md, docs/: e2e markers used more than once (readme_block takes the first): $dups"
	bad=1
fi
for m in "${marks[@]}"; do
	if ! printf '%s\n' "${read[@]}" | grep -qx -- "$m"; then
		echo "README.md, docs/: <!-- e2e:$m --> is read by no test: call readme_block $m from the suite that runs it, or mark the block <!-- not run: REASON -->"
		bad=1
	fi
done
for r in "${read[@]}"; do
	if ! printf '%s\n' "${marks[@]}" | grep -qx -- "$r"; then
		echo "test/: readme_block $r reads a block neither README.md nor docs/*.md marks: add <!-- e2e:$r --> before it"
		bad=1
	fi
done
mapfile -t samples < <(grep -ohE '^<!-- sample:[a-z0-9_-]+ -->$' docs/*.md | sed -E 's/^<!-- sample:(.*) -->$/\1/' | sort)
mapfile -t checked < <(grep -rhoE '^[[:space:]]*sample [a-z0-9_-]+ ' test/ | awk '{print $2}' | sort -u)
dups=$(printf '%s\n' "${samples[@]}" | uniq -d)
if [[ -n $dups ]]; then
	echo "docs/: sample markers used more than once: $dups"
	bad=1
fi
if [[ $(printf '%s\n' "${samples[@]}") != "$(printf '%s\n' "${checked[@]}")" ]]; then
	echo "docs/ and test/: the samples docs/*.md show (${samples[*]}) are not those the suites check (sample NAME: ${checked[*]}): add the marker or the check"
	bad=1
fi
if ((bad)); then
	exit 1
fi
echo "readme-blocks: ${#marks[@]} blocks run by tests, ${#samples[@]} sample outputs checked by tests, every other command block says why not"
