#!/usr/bin/env bash
# Runs the privileged tests (TestPrivileged*: real netlink, real namespaces,
# the daemon's real socket) with the race detector and fails unless they
# really ran. Needs: root, go, gcc (for -race), nsenter. Leaves nothing
# behind: every test makes and removes its own namespaces and links.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  echo "test-root: the privileged tests need root (network namespaces and links): run as root" >&2
  exit 1
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT

status=0
go test -race -count=1 -v -run 'Privileged' ./... >"$log" 2>&1 || status=$?
# Top-level results only; subtests are counted by their parent.
passed=$(grep -c '^--- PASS: TestPrivileged' "$log" || true)
failed=$(grep -c '^--- FAIL: TestPrivileged' "$log" || true)
skipped=$(grep -c '^--- SKIP: TestPrivileged' "$log" || true)
grep -E '^(--- (FAIL|SKIP)|ok|FAIL|panic)' "$log" || true
grep -B1 '^--- SKIP' "$log" | grep -E '_test.go:[0-9]+:' | sed 's/^ */  skip reason: /' | sort -u || true
# Skipped subtests of tests that passed (the crash points a kernel cannot
# reach), with their reasons.
grep -E '^ +--- SKIP' "$log" | sed -E 's/^ +--- SKIP: /  skipped subtest: /' || true
grep -E '_test.go:[0-9]+: not tested: ' "$log" | sed 's/^ */  skip reason: /' | sort -u || true
if [ "$status" != 0 ]; then
  grep -B2 -A30 -- '--- FAIL' "$log" | head -200
fi
echo "privileged: $passed passed, $failed failed, $skipped skipped"
if [ "$status" != 0 ]; then
  exit "$status"
fi
if [ "$passed" = 0 ]; then
  echo "test-root: no privileged test ran: refusing to call that a pass" >&2
  exit 1
fi
