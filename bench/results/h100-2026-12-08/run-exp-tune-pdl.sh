#!/usr/bin/env bash
# Issue #23, 2026-12-07 (eighth session): per-shape GEMM tuning (cuBLASLt candidates timed once
# per decode shape, STRATA_GEMM_TUNING) and programmatic dependent launch without the early
# trigger (STRATA_DISABLE_PDL), A/B against main's behaviour (both off) in one process tree.
# Bundle: BUNDLE_OUT=.devtree/exp BUNDLE_KERNEL_BENCH=1 scripts/gpu_bundle.sh on branch
# exp-tune-pdl, carried as .devtree/exp with this script as .devtree/run.sh.
#   bash .devtree/run.sh check      # the GPU tests the two touch, then decode A/B at batch 1 and 64
#   bash .devtree/run.sh ab         # decode A/B at BATCHES (default 8 256) and the peer there
#   bash .devtree/run.sh prefill    # prefill 1 x 8192 / 8 x 1024, main and tuned
#   bash .devtree/run.sh tests      # the whole GPU suite, tuning and PDL on
set -o pipefail
part=${1:-check}
export STRATA_BUNDLE=.devtree/exp
config=bench/configs/llama-3.1-8b-instruct
run() { bash bench/cuda_device_run.sh "$@"; }
bin=.devtree/exp/bundle/bin
env_setup() { export LD_LIBRARY_PATH=$PWD/.devtree/exp/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}; }
strata_batch() {  # BATCH INPUT OUTPUT FILE [flags]
  local b=$1 i=$2 o=$3 f=$4; shift 4
  timeout 150 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
    --batch-size $b --input-len $i --output-len $o --json "$@" 2>>"$OUT/stderr.log" | tee -a "$OUT/$f" | cut -c1-200
}
setting() {
  case $1 in
    main) export STRATA_DISABLE_PDL=1 STRATA_GEMM_TUNING=0 ;;
    tune) export STRATA_DISABLE_PDL=1 STRATA_GEMM_TUNING=1 ;;
    pdl) export STRATA_DISABLE_PDL=0 STRATA_GEMM_TUNING=0 ;;
    both) export STRATA_DISABLE_PDL=0 STRATA_GEMM_TUNING=1 ;;
  esac
}
ab() {
  for b in $BATCHES; do
    for cfg in main tune pdl both; do
      setting $cfg
      echo "# $cfg" >>"$OUT/strata_decode.jsonl"
      echo "batch $b $cfg"
      strata_batch $b 1024 ${OUTPUT_LEN:-64} strata_decode.jsonl
    done
  done
  # What the tuner chose at each batch (its debug lines)
  setting tune
  for b in $BATCHES; do
    timeout 150 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
      --batch-size $b --input-len 1024 --output-len 8 --log-level debug 2>&1 | grep "GEMM tuning" >>"$OUT/tuning_choices.txt"
  done
  grep -c "candidate chosen" "$OUT/tuning_choices.txt"; head -40 "$OUT/tuning_choices.txt"
}
case $part in
  check)
    TESTS_FILTER='*GemmTun*:*OpsDevice*:Fixtures/GoldenCuda*:Fixtures/CudaInvariance*:Shapes/CudaBackendVsCpu*:Hybrids/GoldenCuda*' \
      TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} run tests 2>&1 | tail -4
    grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|\[ info \]" "$OUT/tests.log" | tail -20
    xz -9 "$OUT/tests.log"
    env_setup
    BATCHES=${BATCHES:-1 64} ab
    ;;
  ab)
    run none >/dev/null 2>&1; env_setup
    BATCHES=${BATCHES:-8 256} ab
    PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_decode_peer.py $config --batch-size ${PEER_BATCHES:-1 8 64 256} \
      --input-len 1024 --output-len 64 2>"$OUT/peer.err" | tee "$OUT/peer.jsonl"
    ;;
  prefill)
    run none >/dev/null 2>&1; env_setup
    for shape in "1 8192" "8 1024"; do
      for cfg in main tune; do setting $cfg; echo "# $cfg" >>"$OUT/strata_prefill.jsonl"; strata_batch $shape 1 strata_prefill.jsonl; done
    done
    ;;
  tests)
    unset STRATA_DISABLE_PDL STRATA_GEMM_TUNING
    TESTS_TIMEOUT=${TESTS_TIMEOUT:-420} run tests 2>&1 | tail -8
    grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" "$OUT/tests.log" | tail -12
    xz -9 "$OUT/tests.log"
    ;;
esac
