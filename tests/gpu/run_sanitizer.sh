#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over a small training job; fails on any report.
set -uo pipefail
cd "$(dirname "$0")/../.."
status=0
for tool in memcheck racecheck; do
  out=$(compute-sanitizer --tool "$tool" --error-exitcode 99 python tests/gpu/sanitize_training.py 2>&1)
  rc=$?
  echo "$out" | tail -3
  echo "compute-sanitizer $tool: exit $rc"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
