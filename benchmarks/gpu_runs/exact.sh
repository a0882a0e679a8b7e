#!/usr/bin/env bash
# tree_method="exact" on one H200 (issue 30): the GPU tests, then the benchmark. Each step writes
# its log (and JSON) under $OUT as it finishes, so a call stopped at its time limit still returns
# what ran. Needs the wheelhouse of ../shared/gpu-node/wheelhouse.sh --with-xgboost carried as .whl
# (XGBoost 3.4.1 is the benchmark's reference and the CPU tests' oracle).
#   usage (on the device): bash benchmarks/gpu_runs/exact.sh [STEP...]   (default: compile tests bench)
#     compile  every kernel compiles for this GPU (python -m dgboost.backend._nvrtc compute_90)
#     tests    tests/gpu/test_exact_greedy_gpu.py (GPU bitwise the CPU; both scan modes at every
#              depth) and tests/cpu/test_exact_greedy.py, at most $TEST_S seconds (default 420)
#     bench    benchmarks/exact_greedy.py --modes: GPU exact vs XGBoost exact on every core vs GPU
#              hist on the five sets, and the per-level times of both scan modes (~8 min; a call
#              is limited to 10 min, so run it in its own call). $CASES (default all) and
#              $BENCH_ARGS pass through.
#     quick    one call of at most ~6 min: the GPU exact tests ($QUICK_TEST_S, default 110 s), then
#              the benchmark once (--repeats 1: a case's time per round is the median of its rounds)
#              with --profile (every kernel and step of each level, CUDA events) and --modes, all
#              five sets (higgs10m capped at one repeat of 4 rounds), at most $QUICK_BENCH_S (220 s).
#              usage: bash benchmarks/gpu_runs/exact.sh quick   (the tests compile the kernels they use)
set -u
export PYTHONUNBUFFERED=1
export DGBOOST_REQUIRE_GPU=1  # a missing or broken GPU fails the GPU tests, never skips them
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD/.site:$PWD
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
nproc | tee "$OUT/nproc.txt"
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(compile tests bench)
for step in "${steps[@]}"; do
  start=$(date +%s)
  case "$step" in
    compile)
      python3 -m dgboost.backend._nvrtc compute_90 > "$OUT/exact_compile.log" 2>&1
      echo "compile: exit $?"; tail -n 3 "$OUT/exact_compile.log" ;;
    tests)
      timeout "${TEST_S:-420}" python3 -m pytest -q tests/gpu/test_exact_greedy_gpu.py tests/cpu/test_exact_greedy.py \
        -p no:cacheprovider --durations=10 --junitxml="$OUT/exact_tests.xml" > "$OUT/exact_tests.log" 2>&1
      echo "tests: exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/exact_tests.log" | head -20; tail -n 3 "$OUT/exact_tests.log" ;;
    bench)
      timeout "${BENCH_S:-580}" python3 benchmarks/exact_greedy.py --modes --cases "${CASES:-higgs1m,year,bosch,ltr,higgs10m}" \
        ${BENCH_ARGS:-} --out "$OUT/exact_greedy.json" > "$OUT/exact_bench.log" 2>&1
      echo "bench: exit $?"; tail -n 24 "$OUT/exact_bench.log" ;;
    quick)
      timeout "${QUICK_TEST_S:-110}" python3 -m pytest -q tests/gpu/test_exact_greedy_gpu.py -p no:cacheprovider \
        --durations=5 --junitxml="$OUT/exact_tests.xml" > "$OUT/exact_tests.log" 2>&1
      echo "tests: exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/exact_tests.log" | head -20; tail -n 3 "$OUT/exact_tests.log"
      timeout "${QUICK_BENCH_S:-220}" python3 benchmarks/exact_greedy.py --modes --profile --repeats 1 \
        --cases "${CASES:-higgs1m,year,ltr,bosch,higgs10m}" ${BENCH_ARGS:-} --out "$OUT/exact_greedy.json" \
        > "$OUT/exact_bench.log" 2>&1
      echo "bench: exit $?"; tail -n 80 "$OUT/exact_bench.log" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
  echo "== $step: $(( $(date +%s) - start )) s"
done
