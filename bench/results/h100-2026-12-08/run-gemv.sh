#!/usr/bin/env bash
# Issue #23, 2026-12-08: the weight-streaming GEMV (gemv.cu, branch gemv-small) on the small
# decode products only (at most STRATA_GEMV_MAX_N columns: q|k|v, o_proj, down_proj), against
# cuBLAS everywhere and the GEMV everywhere, in one process tree; dependent launches off.
# Second bundle of the day: the bulk-copy kernel (gemv_bulk.cu, STRATA_GEMV_KERNEL=bulk).
# Bundle: BUNDLE_OUT=.devtree/gemv scripts/gpu_bundle.sh on branch gemv-small, carried as
# .devtree/gemv with this script as .devtree/run.sh.
#   bash .devtree/run.sh check    # the GPU tests the GEMV touches, then decode A/B at BATCHES
#   bash .devtree/run.sh ab       # decode A/B only
#   bash .devtree/run.sh profile  # Nsight Compute per-kernel times of batch-1 steps, GEMV on
set -o pipefail
part=${1:-check}
export STRATA_BUNDLE=.devtree/gemv STRATA_DISABLE_PDL=1
config=bench/configs/llama-3.1-8b-instruct
run() { bash bench/cuda_device_run.sh "$@"; }
bin=.devtree/gemv/bundle/bin
env_setup() { export LD_LIBRARY_PATH=$PWD/.devtree/gemv/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}; }
setting() {
  unset STRATA_GEMV_AHEAD STRATA_GEMV_KERNEL
  case $1 in
    cublas) export STRATA_GEMV_MAX_N=0 ;;
    small) export STRATA_GEMV_MAX_N=8192 ;;
    small16) export STRATA_GEMV_MAX_N=8192 STRATA_GEMV_AHEAD=16 ;;
    all) export STRATA_GEMV_MAX_N=1000000 ;;
    bulk) export STRATA_GEMV_MAX_N=8192 STRATA_GEMV_KERNEL=bulk ;;
    bulkall) export STRATA_GEMV_MAX_N=1000000 STRATA_GEMV_KERNEL=bulk ;;
  esac
}
ab() {
  for round in 1 2; do
    for b in $BATCHES; do
      for cfg in ${SETTINGS:-cublas bulk bulkall}; do
        setting $cfg
        echo -n "round $round batch $b $cfg: "
        echo "# $cfg" >>"$OUT/strata_decode.jsonl"
        timeout 150 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
          --batch-size $b --input-len 1024 --output-len 64 --json 2>>"$OUT/stderr.log" |
          tee -a "$OUT/strata_decode.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["decode_median_latency_ms"])'
      done
    done
  done
}
case $part in
  check)
    setting bulkall
    TESTS_FILTER='*OpsDevice*:Fixtures/GoldenCuda*:Fixtures/CudaInvariance*:Shapes/CudaBackendVsCpu*:Hybrids/GoldenCuda*' \
      TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} run tests 2>&1 | tail -3
    grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" "$OUT/tests.log" | tail -12
    xz -9 "$OUT/tests.log"
    env_setup
    BATCHES=${BATCHES:-1 4} ab
    ;;
  ab)
    run none >/dev/null 2>&1; env_setup
    BATCHES=${BATCHES:-1 4} ab
    ;;
  profile)
    setting ${SETTING:-small}
    PROFILE_BATCH=1 PROFILE_SKIP=2000 PROFILE_COUNT=680 PROFILE_OUTPUT_LEN=16 run profile 2>&1 | tail -16
    ;;
esac
