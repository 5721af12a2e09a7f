#!/usr/bin/env bash
# Issue #23, 2026-12-07: the decode tiles kernel with page-table entries fetched a tile ahead,
# MLA's split target of 2 blocks per SM, graph key over every layer's splits. One device call
# per part (each under the 10-minute limit), on the bundle of
# `BUNDLE_KERNEL_BENCH=1 scripts/gpu_bundle.sh` carried as .devtree/gpu:
#   bash .devtree/run.sh one        # what fits one call when device time is short: the GPU tests
#                                   # (200 s), the kernel A/B and MLA rows, strata decode at batch 1 /
#                                   # 64 / 256 and the compiled torch peer
#   bash .devtree/run.sh tests      # GPU tests, the GQA decode kernel sweep, MLA at 16 / 128 heads
#   bash .devtree/run.sh e2e        # strata decode at batch 1 / 8 / 64 / 256 and the compiled torch peer
#   bash .devtree/run.sh profile    # prefill 1 x 8192 and 8 x 1024 (strata, torch eager), then
#                                   # per-kernel GPU times of decode steps at batch 64 and 256
set -o pipefail
part=${1:-tests}
config=bench/configs/llama-3.1-8b-instruct
run() { bash bench/cuda_device_run.sh "$@"; }
if [ "$part" = quick ]; then  # the least that judges correctness: the changed paths' GPU tests
  TESTS_TIMEOUT=170 TESTS_FILTER='Cases/CudaRopeStoreKv*:Shapes/CudaBackendVsCpu*:Shapes/CudaMlaDecodeVsCpu*:Fixtures/GoldenCuda*:Hybrids/GoldenCuda*:Fixtures/CudaInvariance*:Hybrids/CudaInvariance*' \
    run tests 2>&1 | tail -40
  b=.devtree/gpu/bundle/bin/strata_attention_bench
  export LD_LIBRARY_PATH=$PWD/.devtree/gpu/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  for shape in "64 4096" "256 1100" "64 1100"; do
    timeout 60 "$b" $shape | head -1 | tee -a "$OUT/decode_kernel.jsonl"
  done
  exit
fi
if [ "$part" = one ]; then
  TESTS_TIMEOUT=200 bash "$0" tests
  BATCHES="1 64 256" bash "$0" e2e-decode
  exit
fi
case $part in
  tests)
    TESTS_TIMEOUT=${TESTS_TIMEOUT:-260} run tests 2>&1 | tail -60 >"$OUT/tests_summary.txt"
    grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" "$OUT/tests.log" | tail -30
    b=.devtree/gpu/bundle/bin/strata_attention_bench
    export LD_LIBRARY_PATH=$PWD/.devtree/gpu/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    for shape in "64 4096" "8 32768" "64 1100" "256 1100" "1 1100"; do
      timeout 100 "$b" $shape >>"$OUT/decode_kernel.jsonl"
    done
    # The same sweep with main's tiles kernel (its object linked into the same bench, carried
    # as .devtree/base/sb.xz): the A/B on this machine.
    if [ -e .devtree/base/sb.xz ]; then
      xz -dkf .devtree/base/sb.xz && chmod +x .devtree/base/sb
      for shape in "64 4096" "8 32768" "64 1100" "256 1100" "1 1100"; do
        timeout 100 .devtree/base/sb $shape >>"$OUT/decode_kernel_base.jsonl"
      done
    fi
    for h in 16 128; do
      for shape in "64 4096" "8 32768" "1 4096"; do
        timeout 100 "$b" mla $shape $h >>"$OUT/mla_bench.jsonl"
      done
    done
    grep '"shipped": true' "$OUT"/decode_kernel*.jsonl "$OUT/mla_bench.jsonl" | cut -c1-400
    ;;
  e2e | e2e-decode)
    run none >/dev/null 2>&1  # unpack the bundle only
    bin=.devtree/gpu/bundle/bin
    export LD_LIBRARY_PATH=$PWD/.devtree/gpu/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    for b in ${BATCHES:-1 8 64 256}; do
      timeout 120 "$bin/strata" bench-one-batch --model $config --load-format dummy --device cuda \
        --batch-size $b --input-len 1024 --output-len 256 --json | tee -a "$OUT/strata_decode.jsonl"
    done
    PYTHONUNBUFFERED=1 timeout 300 python3 bench/torch_decode_peer.py $config --batch-size ${BATCHES:-1 8 64 256} \
      --input-len 1024 --output-len 256 2>"$OUT/peer.err" | tee "$OUT/peer.jsonl"
    [ "$part" = e2e ] || exit 0
    # Serving the same work as batch 64 (256 prompts, 1024 in / 256 out, 64 at a time), greedy.
    "$bin/strata" serve --model $config --load-format dummy --device cuda --port 30123 \
      --max-running-requests 64 >"$OUT/serve.log" 2>&1 &
    serve_pid=$!
    for i in $(seq 1 120); do curl -sf localhost:30123/health >/dev/null && break; sleep 1; done
    timeout 120 "$bin/strata" bench-serving --port 30123 --num-prompts 256 --random-input-len 1024 \
      --random-output-len 256 --random-range-ratio 1 --max-concurrency 64 --json |
      tee -a "$OUT/serving.jsonl"
    kill $serve_pid; wait $serve_pid
    ;;
  profile)
    run none >/dev/null 2>&1
    bin=.devtree/gpu/bundle/bin
    export LD_LIBRARY_PATH=$PWD/.devtree/gpu/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    for shape in "1 8192" "8 1024"; do
      set -- $shape
      timeout 100 "$bin/strata" bench-one-batch --model $config --load-format dummy --device cuda \
        --batch-size $1 --input-len $2 --output-len 1 --json | tee -a "$OUT/strata_prefill.jsonl"
      PYTHONUNBUFFERED=1 timeout 100 python3 bench/torch_decode_peer.py $config --batch-size $1 \
        --input-len $2 --output-len 4 2>>"$OUT/peer.err" | tee -a "$OUT/peer_prefill.jsonl"
    done
    for b in ${PROFILE_BATCHES:-64 256}; do
      mkdir -p "$OUT/b$b"
      OUT=$OUT/b$b PROFILE_BATCH=$b PROFILE_SKIP=16000 PROFILE_COUNT=720 PROFILE_TIMEOUT=150 \
        PROFILE_OUTPUT_LEN=64 run profile 2>&1 | tail -25
    done
    ;;
esac
