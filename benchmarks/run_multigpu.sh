#!/usr/bin/env bash
# One device call on a machine of several GPUs (issue 10): the multi-GPU tests, then the scaling
# benchmark, each step's log and result written under $OUT as it finishes, so a call stopped at
# its time limit still returns what ran. Needs the wheelhouse of ../shared/gpu-node/wheelhouse.sh
# with --with-xgboost carried as .whl.
#   usage (on the device): bash benchmarks/run_multigpu.sh [TEST_SECONDS] [WORKERS] [SHAP_ROWS]
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
test_s=${1:-110}; workers=${2:-4,1,2}; shap_rows=${3:-1000000}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/.site:$PWD
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1

start=$(date +%s)
timeout "$test_s" python3 -m pytest -q -m "gpu or mgpu" tests/gpu/test_multi_gpu.py -p no:cacheprovider \
  --durations=0 --junitxml="$OUT/mgpu_tests.xml" > "$OUT/mgpu_tests.log" 2>&1
echo "mgpu tests: exit $? after $(( $(date +%s) - start )) s"; tail -n 25 "$OUT/mgpu_tests.log"
python3 benchmarks/scaling.py --device cuda --workers "$workers" --rows 40000000 --shap-rows "$shap_rows" \
  --rounds 100 --repeats 3 --profile --output "$OUT/scaling_multigpu.json" 2>&1 | grep -v "^\s*$" > "$OUT/scaling.log"
tail -n 30 "$OUT/scaling.log"
