#!/usr/bin/env bash
# GPU checks of TreeSHAP with categorical splits (issue 29), on one GPU, from the repository root:
#   1. tests/gpu/test_categorical_shap_gpu.py: every engine bitwise the CPU's on categorical trees;
#   2. the numeric GPU SHAP tests, unchanged (the kernels' new category-set arguments);
#   3. compute-sanitizer memcheck over tests/gpu/sanitize_shap.py (categorical part included);
#   4. with BENCH=1, benchmarks/shap_gpu_categorical.py (200 trees of depth 8 vs XGBoost's GPU
#      pred_contribs; its JSON under $OUT).
# Uses the wheelhouse of benchmarks/run_gpu.sh when carried as .whl (installed into .site).
#   usage: OUT=/tmp/out [BENCH=1] bash tests/gpu/run_categorical_shap.sh
set -u
cd "$(dirname "$0")/../.."
export DGBOOST_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whl/*.whl || exit 1
  export PYTHONPATH=$PWD/.site:$PWD
fi
status=0
skip=()  # LightGBM is a test dependency the device may lack: only its import test is left out then
python3 -c "import lightgbm" 2>/dev/null ||
  skip=(--deselect tests/gpu/test_cuda_shap.py::test_imported_lightgbm_and_scikit_learn_models_are_explained_with_the_cpus_bits)
timeout "${TEST_S:-480}" python3 -m pytest -q -p no:cacheprovider tests/gpu/test_categorical_shap_gpu.py \
  tests/gpu/test_cuda_shap.py tests/gpu/test_cuda_interventional.py "${skip[@]}" > "$OUT/categorical_shap_gpu.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)" "$OUT/categorical_shap_gpu.log" | head -20; tail -n 3 "$OUT/categorical_shap_gpu.log"
if command -v compute-sanitizer >/dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 99 python3 tests/gpu/sanitize_shap.py > "$OUT/sanitize_shap.log" 2>&1
  rc=$?; echo "memcheck sanitize_shap: exit $rc"; tail -n 3 "$OUT/sanitize_shap.log"; [ "$rc" -eq 0 ] || status=1
fi
if [ "${BENCH:-0}" = 1 ]; then
  python3 benchmarks/shap_gpu_categorical.py --output "$OUT/shap_gpu_categorical.json" > "$OUT/bench.log" 2>&1
  echo "benchmark: exit $?"; tail -n 4 "$OUT/bench.log"
fi
exit $status
