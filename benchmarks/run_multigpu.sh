#!/usr/bin/env bash
# Device calls on a machine of several GPUs (issue 10). Each step writes its log and result
# under $OUT as it finishes, so a call stopped at its time limit still returns what ran. Needs
# the wheelhouse of ../shared/gpu-node/wheelhouse.sh --with-xgboost carried as .whl.
#   usage (on the device): bash benchmarks/run_multigpu.sh STEP...
#   steps (in the order given; GPU counts from $WORKERS, default 4,1,2):
#     tests     tests/gpu/test_multi_gpu.py (mgpu + gpu), at most $TEST_S seconds (default 300)
#     scaling   benchmarks/scaling.py 40M x 28, 100 rounds, SHAP of $SHAP_ROWS rows (default 4M),
#               3 repeats, --profile, and --host-waited (dgboost with the host waiting for every
#               NCCL collective, timed beside the default of collectives queued on the stream), and
#               --unshared (dgboost jobs that keep no communicator and check their partitions);
#               VARIANTS="" leaves those two out
#     airline   benchmarks/scaling.py --dataset airline, 115M x 13, 100 rounds, no SHAP
#     explain   benchmarks/explain_parquet.py --counts $EXPLAIN_FILES (default 400: 400M rows)
#               on local-cuda (a worker per GPU)
#     resume    the lost-GPU resume test alone, with collectives queued on the stream (the
#               default) and then waited for on the host, 90 s each, -rA for its timings
# Seen on 4 H100s: tests (14 of them) 181 s; scaling on 4 GPUs alone (without the profile) 93 s.
# Plan calls of under 10 minutes, e.g. "tests", "scaling", "airline explain".
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export DGBOOST_REQUIRE_GPU=1  # a missing or broken GPU fails the GPU tests (tests/conftest.py), never skips them
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
workers=${WORKERS:-4,1,2}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/.site:$PWD
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
for step in "$@"; do
  start=$(date +%s)
  case "$step" in
    tests)
      timeout "${TEST_S:-300}" python3 -m pytest -q -m "gpu or mgpu" tests/gpu/test_multi_gpu.py -p no:cacheprovider \
        --durations=0 --junitxml="$OUT/mgpu_tests.xml" > "$OUT/mgpu_tests.log" 2>&1
      echo "tests: exit $?"; tail -n 4 "$OUT/mgpu_tests.log" ;;
    scaling)
      python3 benchmarks/scaling.py --device cuda --workers "$workers" --rows 40000000 \
        --shap-rows "${SHAP_ROWS:-4000000}" --rounds 100 --repeats 3 --profile ${VARIANTS---host-waited --unshared} \
        --output "$OUT/scaling_multigpu.json" 2>&1 | grep -v "got rank\|^\s*$" > "$OUT/scaling.log"
      tail -n 24 "$OUT/scaling.log" ;;
    airline)
      python3 benchmarks/scaling.py --device cuda --workers "$workers" --dataset airline --rows 115000000 \
        --shap-rows 0 --rounds 100 --repeats 3 --output "$OUT/scaling_airline.json" 2>&1 \
        | grep -v "got rank\|^\s*$" > "$OUT/airline.log"
      tail -n 8 "$OUT/airline.log" ;;
    explain)
      python3 benchmarks/explain_parquet.py --config local-cuda --counts "${EXPLAIN_FILES:-400}" \
        --output "$OUT/explain_parquet_multigpu.json" > "$OUT/explain.log" 2>&1
      tail -n 12 "$OUT/explain.log" ;;
    resume)
      t=tests/gpu/test_multi_gpu.py::test_after_a_gpu_worker_is_lost_training_resumes_on_the_other_gpus_to_the_uninterrupted_model
      for mode in 1 0; do
        DGBOOST_NCCL_STREAM_ORDERED=$mode timeout 90 python3 -m pytest -q -rA -p no:cacheprovider "$t" \
          > "$OUT/resume_stream_ordered_$mode.log" 2>&1
        echo "resume, stream-ordered=$mode: exit $?"; grep -E "Error:|passed|failed" "$OUT/resume_stream_ordered_$mode.log" | tail -3
      done ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
  echo "== $step: $(( $(date +%s) - start )) s"
done
