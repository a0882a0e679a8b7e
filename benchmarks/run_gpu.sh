#!/usr/bin/env bash
# Device calls on one GPU (issue 6). Each step writes its log and result under $OUT as it
# finishes, so a call stopped at its time limit still returns what ran. Needs the wheelhouse
# of ../shared/gpu-node/wheelhouse.sh carried as .whl (--with-xgboost for "train" and "year"; add
# the lightgbm wheel, a test dependency, for "tests": pip download --no-deps lightgbm -d .whl).
#   usage (on the device): bash benchmarks/run_gpu.sh STEP...
#     tests      pytest -m "gpu or mgpu" tests/gpu (tests needing several GPUs skip), at most
#                $TEST_S seconds (default 420)
#     lookahead  benchmarks/lossguide_lookahead.py: Higgs-like lossguide under $BUDGETS,
#                $LA_ROUNDS rounds (default the script's)
#     kernels    tests/gpu/test_cuda_kernels.py alone (GPU kernels against the CPU backend)
#     train      benchmarks/train_gpu.py, every case ($CASES), 3 repeats, with XGBoost
#     year       benchmarks/train_gpu.py --cases year --metric-seeds $SEEDS (default 16)
#     yearsketch the same draws, dgboost alone, its quantile sketch over 2**20 rows (all
#                515K training rows, as XGBoost's) instead of 2**18
#     profile    benchmarks/scaling.py on one Dask-CUDA worker, 10M x 28, 100 rounds, one
#                repeat, --profile: the set-up stages and the workers' sampled stacks
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DGBOOST_REQUIRE_GPU=1  # a missing or broken GPU fails the GPU tests (tests/conftest.py), never skips them
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whl/*.whl || exit 1
# XGBoost's wheel and LightGBM's (a test dependency) do not fit in one 64 MiB carry with the
# tree: a call may carry LightGBM's alone as .whll into a warm machine, whose .site is kept
if ls .whll/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whll/*.whl || exit 1
fi
export PYTHONPATH=$PWD/.site:$PWD
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
for step in "$@"; do
  start=$(date +%s)
  case "$step" in
    tests)
      timeout "${TEST_S:-420}" python3 -m pytest -q -m "gpu or mgpu" tests/gpu -p no:cacheprovider \
        --durations=15 --junitxml="$OUT/gpu_tests.xml" > "$OUT/gpu_tests.log" 2>&1
      echo "tests: exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head -20; tail -n 3 "$OUT/gpu_tests.log" ;;
    lookahead)
      python3 benchmarks/lossguide_lookahead.py ${BUDGETS:+--budgets "$BUDGETS"} ${LA_ROUNDS:+--rounds "$LA_ROUNDS"} \
        --out "$OUT/lossguide_lookahead.json" > "$OUT/lookahead.log" 2>&1
      echo "lookahead: exit $?"; tail -n 9 "$OUT/lookahead.log" ;;
    train)
      python3 benchmarks/train_gpu.py --cases "${CASES:-higgs,covtype,bosch,higgs_lossguide,year}" \
        --out "$OUT/train_gpu.json" > "$OUT/train.log" 2>&1
      echo "train: exit $?"; tail -n 16 "$OUT/train.log" ;;
    year)
      python3 benchmarks/train_gpu.py --cases year --metric-seeds "${SEEDS:-16}" \
        --out "$OUT/train_gpu_year.json" > "$OUT/year.log" 2>&1
      echo "year: exit $?"; tail -n 8 "$OUT/year.log" ;;
    yearsketch)
      python3 benchmarks/train_gpu.py --cases year --libraries dgboost --repeats 1 --metric-seeds "${SEEDS:-16}" \
        --dgboost-params '{"sketch_sample_rows": 1048576}' --out "$OUT/train_gpu_year_sketch_all_rows.json" \
        > "$OUT/yearsketch.log" 2>&1
      echo "yearsketch: exit $?"; tail -n 6 "$OUT/yearsketch.log" ;;
    kernels)
      timeout "${TEST_S:-420}" python3 -m pytest -q tests/gpu/test_cuda_kernels.py -p no:cacheprovider \
        > "$OUT/gpu_kernel_tests.log" 2>&1
      echo "kernels: exit $?"; tail -n 3 "$OUT/gpu_kernel_tests.log" ;;
    profile)
      python3 benchmarks/scaling.py --device cuda --workers 1 --rows 10000000 --shap-rows 0 --rounds 100 \
        --repeats 1 --profile --output "$OUT/scaling_profile.json" 2>&1 | grep -v "got rank\|^\s*$" > "$OUT/profile.log"
      echo "profile: exit $?"; tail -n 40 "$OUT/profile.log" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
  echo "== $step: $(( $(date +%s) - start )) s"
done
