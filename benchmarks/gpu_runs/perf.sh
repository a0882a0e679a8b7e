#!/usr/bin/env bash
# GPU performance runs of issue 32 on one GPU. Each step writes its log (and JSON) under $OUT as
# it finishes, so a call stopped at its time limit still returns what ran. Wheels: carry XGBoost's
# (../shared/gpu-node/wheelhouse.sh --with-xgboost, or the xgboost wheel alone) as .whl.
#   usage (on the device): bash benchmarks/gpu_runs/perf.sh [STEP...]   (default: compile bandwidth)
#     compile    every kernel compiles for this GPU (python -m dgboost.backend._nvrtc compute_90)
#     tests      the GPU tests in $TESTS (default: training identity and kernels), at most $TEST_S s
#     bandwidth  benchmarks/round_bandwidth.py under Nsight Compute: every kernel of one warm round
#                of the five train_gpu.py cases against the copy bandwidth ($CASES, $SCALE)
#     train      benchmarks/train_gpu.py, the five cases, 3 repeats, with XGBoost ($CASES)
#     shap       benchmarks/shap_gpu.py, end to end against XGBoost ($SHAP_ARGS)
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DGBOOST_REQUIRE_GPU=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD/.site:$PWD
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(compile bandwidth)
for step in "${steps[@]}"; do
  start=$(date +%s)
  case "$step" in
    compile)
      python3 -m dgboost.backend._nvrtc compute_90 > "$OUT/compile.log" 2>&1
      echo "compile: exit $?"; tail -n 2 "$OUT/compile.log" ;;
    tests)
      timeout "${TEST_S:-300}" python3 -m pytest -q ${TESTS:-tests/gpu/test_cuda_training.py tests/gpu/test_cuda_kernels.py} \
        -p no:cacheprovider --durations=5 --junitxml="$OUT/gpu_tests.xml" > "$OUT/gpu_tests.log" 2>&1
      echo "tests: exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head -20; tail -n 3 "$OUT/gpu_tests.log" ;;
    bandwidth)
      timeout "${BW_S:-400}" python3 benchmarks/round_bandwidth.py --cases "${CASES:-higgs,covtype,bosch,higgs_lossguide,year}" \
        --scale "${SCALE:-1}" --output "$OUT/round_bandwidth.json" > "$OUT/round_bandwidth.out" 2>&1
      echo "bandwidth: exit $?"; tail -n 80 "$OUT/round_bandwidth.out" ;;
    train)
      timeout "${TRAIN_S:-560}" python3 benchmarks/train_gpu.py --cases "${CASES:-higgs,covtype,bosch,higgs_lossguide,year}" \
        ${TRAIN_ARGS:-} --out "$OUT/train_gpu.json" > "$OUT/train.log" 2>&1
      echo "train: exit $?"; tail -n 16 "$OUT/train.log" ;;
    shap)
      timeout "${SHAP_S:-560}" python3 benchmarks/shap_gpu.py ${SHAP_ARGS:-} --output "$OUT/shap_gpu.json" > "$OUT/shap.log" 2>&1
      echo "shap: exit $?"; tail -n 30 "$OUT/shap.log" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
  echo "== $step: $(( $(date +%s) - start )) s"
done
