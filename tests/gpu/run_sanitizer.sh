#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over small training and SHAP jobs; fails on any report.
set -uo pipefail
cd "$(dirname "$0")/../.."
status=0
for job in sanitize_training sanitize_shap; do
  for tool in memcheck racecheck; do
    out=$(compute-sanitizer --tool "$tool" --error-exitcode 99 python "tests/gpu/$job.py" 2>&1)
    rc=$?
    echo "$out" | tail -3
    echo "compute-sanitizer $tool $job: exit $rc"
    [ "$rc" -eq 0 ] || status=1
  done
done
exit $status
