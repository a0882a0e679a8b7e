#!/usr/bin/env bash
# Faults and long runs on GPUs (issue 33). Each step writes its log (and JSON, PNG) under $OUT
# as it finishes, so a call stopped at its time limit still returns what ran. Needs the
# wheelhouse of ../shared/gpu-node/wheelhouse.sh --with-xgboost carried as .whl (dask-cuda,
# psutil and matplotlib included).
#   usage (on the device): bash benchmarks/gpu_runs/reliability.sh [STEP...]
#   default: checkpoint workerloss chaos soak. GPUs each step needs:
#     checkpoint  1 GPU   tests/gpu/test_reliability_gpu.py -m gpu -k interrupted: dg.train(device="cuda",
#                         checkpoint_dir, resume) interrupted at round 35, resumed from round 30, the
#                         uninterrupted GPU model file byte for byte (binary with sampling; multiclass)
#     workerloss  1+ GPU  the same file, -k lose_a_worker: predict / SHAP / interaction values on a
#                         LocalCUDACluster (up to 2 GPUs) with a worker killed mid-computation,
#                         bitwise the single-GPU values
#     chaos       2 GPUs  benchmarks/chaos.py --device cuda --workers 2 --jobs $CHAOS_JOBS (default 6:
#                         5 with one GPU worker killed at a random round, the last with both killed
#                         in turn) -> $OUT/chaos_gpu.json; then the slow 2-GPU chaos test (5 jobs)
#     soak        1+ GPU  benchmarks/soak.py --device cuda --workers $SOAK_WORKERS (default 2) --jobs 200
#                         -> $OUT/soak_gpu.json, $OUT/soak_gpu.png (host RSS, device memory, files,
#                         threads, kept NCCL communicators per job)
# Plan calls under 10 minutes: "checkpoint workerloss" and "chaos" and "soak" each fit one call.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export DGBOOST_REQUIRE_GPU=1  # a missing or broken GPU fails the GPU tests, never skips them
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD/.site:$PWD
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
git rev-parse HEAD > "$OUT/commit.txt" 2>/dev/null
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(checkpoint workerloss chaos soak)
for step in "${steps[@]}"; do
  start=$(date +%s)
  case "$step" in
    checkpoint)
      timeout "${TEST_S:-300}" python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_reliability_gpu.py \
        -m gpu -k interrupted --durations=5 > "$OUT/checkpoint_gpu.log" 2>&1
      echo "checkpoint: exit $?"; tail -n 3 "$OUT/checkpoint_gpu.log" ;;
    workerloss)
      timeout "${TEST_S:-400}" python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_reliability_gpu.py \
        -m gpu -k lose_a_worker --durations=5 > "$OUT/workerloss_gpu.log" 2>&1
      echo "workerloss: exit $?"; tail -n 3 "$OUT/workerloss_gpu.log" ;;
    chaos)
      timeout "${CHAOS_S:-420}" python3 benchmarks/chaos.py --device cuda --workers 2 --jobs "${CHAOS_JOBS:-6}" \
        --job-timeout 180 --out "$OUT/chaos_gpu.json" > "$OUT/chaos_gpu.log" 2>&1
      echo "chaos: exit $?"; grep -E "^job|jobs passed|warm-up" "$OUT/chaos_gpu.log" | tail -n 10
      timeout "${TEST_S:-300}" python3 -m pytest -q -rA -p no:cacheprovider tests/gpu/test_reliability_gpu.py \
        -m "mgpu and slow" > "$OUT/chaos_gpu_test.log" 2>&1
      echo "chaos test: exit $?"; tail -n 3 "$OUT/chaos_gpu_test.log" ;;
    soak)
      timeout "${SOAK_S:-560}" python3 benchmarks/soak.py --device cuda --workers "${SOAK_WORKERS:-2}" --jobs 200 --max-seconds 420 \
        --out "$OUT/soak_gpu.json" --plot "$OUT/soak_gpu.png" > "$OUT/soak_gpu.log" 2>&1
      echo "soak: exit $?"; tail -n 4 "$OUT/soak_gpu.log" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
  echo "== $step: $(( $(date +%s) - start )) s"
done
