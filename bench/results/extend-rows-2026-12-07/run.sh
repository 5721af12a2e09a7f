#!/usr/bin/env bash
# Issue #23, 2026-12-07 (second session): the extend kernel with 32 query rows per warp (K and V
# fragments shared by two row tiles, Q through shared memory). (Run 1, in run1-h100/, also timed
# the decode tensor-core kernel's last split merging the splits instead of a stage 2 launch: it
# lost, and is not in the code this script runs.) One device call per part, on the
# bundle of `BUNDLE_KERNEL_BENCH=1 scripts/gpu_bundle.sh` carried as .devtree/gpu, with main's
# binaries before the change carried as .devtree/base/{ab,strata}.xz (xz of the earlier
# bundle's strata_attention_bench and strata; same libraries):
#   bash .devtree/run.sh quick      # the changed paths' GPU tests; the extend kernel at 16 / 32 rows
#                                   # a warp and main's, 1024-8192 tokens; prefill 1 x 8192 and
#                                   # 8 x 1024: strata, main's strata and the torch peer
#   bash .devtree/run.sh e2e        # decode at batch 1 / 8 / 64 / 256: strata (BASE=1: and main's)
#                                   # and the compiled torch peer
#   bash .devtree/run.sh serving    # strata serve + bench-serving (256 prompts, 1024 / 256, 64 at a time)
#   bash .devtree/run.sh tests      # the whole GPU suite
# (The batch-64 / 256 decode profile: `profile` in ../decode-slots-2026-12-07/run.sh.)
set -o pipefail
part=${1:-quick}
config=bench/configs/llama-3.1-8b-instruct
run() { bash bench/cuda_device_run.sh "$@"; }
bin=.devtree/gpu/bundle/bin
base() {  # unpack main's binaries beside the bundle's (same libraries)
  for f in ab strata; do [ -x .devtree/base/$f ] || { xz -dkf .devtree/base/$f.xz && chmod +x .devtree/base/$f; }; done
}
env_setup() { export LD_LIBRARY_PATH=$PWD/.devtree/gpu/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}; }
case $part in
  quick)
    TESTS_TIMEOUT=200 TESTS_FILTER='Cases/CudaExtendTiles*:Shapes/CudaBackendVsCpu*:Fixtures/GoldenCuda*:Hybrids/GoldenCuda*:Fixtures/CudaInvariance*:Hybrids/CudaInvariance*' \
      run tests 2>&1 | tail -25
    base; env_setup
    for tokens in 1024 2048 4096 8192; do
      for rows in 16 32; do
        timeout 60 $bin/strata_attention_bench extend $tokens 32 8 128 $rows | tee -a "$OUT/extend_kernel.jsonl"
      done
      timeout 60 .devtree/base/ab extend $tokens 32 8 128 | sed 's/^{/{"main": true, /' | tee -a "$OUT/extend_kernel.jsonl"
    done
    for rows in 16 32; do
      timeout 60 $bin/strata_attention_bench extend 8192 32 8 64 $rows | tee -a "$OUT/extend_kernel.jsonl"
    done
    timeout 60 .devtree/base/ab extend 8192 32 8 64 | sed 's/^{/{"main": true, /' | tee -a "$OUT/extend_kernel.jsonl"
    for shape in "1 8192" "8 1024"; do
      set -- $shape
      for s in $bin/strata .devtree/base/strata; do
        timeout 100 $s bench-one-batch --model $config --load-format dummy --device cuda \
          --batch-size $1 --input-len $2 --output-len 1 --json | sed "s|^{|{\"binary\": \"$s\", |" |
          tee -a "$OUT/strata_prefill.jsonl" | cut -c1-300
      done
      PYTHONUNBUFFERED=1 timeout 100 python3 bench/torch_decode_peer.py $config --batch-size $1 \
        --input-len $2 --output-len 4 2>>"$OUT/peer.err" | tee -a "$OUT/peer_prefill.jsonl"
    done
    ;;
  e2e)
    run none >/dev/null 2>&1; env_setup; base
    for b in ${BATCHES:-1 8 64 256}; do
      for s in $bin/strata ${BASE:+.devtree/base/strata}; do
        timeout 100 $s bench-one-batch --model $config --load-format dummy --device cuda \
          --batch-size $b --input-len 1024 --output-len ${OUTPUT_LEN:-256} --json |
          sed "s|^{|{\"binary\": \"$s\", |" | tee -a "$OUT/strata_decode.jsonl" | cut -c1-300
      done
    done
    PYTHONUNBUFFERED=1 timeout 240 python3 bench/torch_decode_peer.py $config --batch-size ${BATCHES:-1 8 64 256} \
      --input-len 1024 --output-len ${OUTPUT_LEN:-256} 2>"$OUT/peer.err" | tee "$OUT/peer.jsonl"
    ;;
  serving)
    run none >/dev/null 2>&1; env_setup
    timeout 100 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
      --batch-size 64 --input-len 1024 --output-len 256 --json | tee -a "$OUT/strata_decode.jsonl" | cut -c1-300
    $bin/strata serve --model $config --load-format dummy --device cuda --port 30123 \
      --max-running-requests 64 >"$OUT/serve.log" 2>&1 &
    serve_pid=$!
    for i in $(seq 1 120); do curl -sf localhost:30123/health >/dev/null && break; sleep 1; done
    timeout 200 $bin/strata bench-serving --port 30123 --num-prompts 256 --random-input-len 1024 \
      --random-output-len 256 --random-range-ratio 1 --max-concurrency 64 --json |
      tee -a "$OUT/serving.jsonl"
    kill $serve_pid; wait $serve_pid
    ;;
  tests)
    TESTS_TIMEOUT=${TESTS_TIMEOUT:-420} run tests 2>&1 | tail -40
    grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" "$OUT/tests.log" | tail -30
    ;;
esac
