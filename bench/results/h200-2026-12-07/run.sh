#!/usr/bin/env bash
# Issue #23, 2026-12-07 (seventh session): main's figures on an H200, the first H200 run since
# 2026-12-04, and the A/B of branch gemv-pdl's two additions. One device call per part, on the
# bundle of `BUNDLE_KERNEL_BENCH=1 scripts/gpu_bundle.sh` built on that branch (its switches
# STRATA_DISABLE_PDL / STRATA_DISABLE_GEMV exist only there) and carried as .devtree/gpu (copy
# this script to .devtree/run.sh, carry both). README.md says which calls ran what:
#   bash .devtree/run.sh check     # the decode A/B below at batch 1 and 64 (64 out), then the GPU
#                                  # tests that programmatic dependent launch and the GEMV touch
#   bash .devtree/run.sh kernels   # the attention kernel tests, then the kernels alone: the decode
#                                  # kernel's sweep (64 x 4096, 8 x 32768, 64 / 256 / 8 / 1 x 1100),
#                                  # extend on an 8192 causal square, MLA decode at 128 heads
#   bash .devtree/run.sh ab        # strata's decode at batch 1 / 8 / 64 / 256 (1024 in, 256 out):
#                                  # main's launches and products, programmatic dependent launch,
#                                  # and that with the GEMV at batch 1 (STRATA_DISABLE_PDL /
#                                  # STRATA_DISABLE_GEMV), alternating; prefill 1 x 8192 / 8 x 1024
#                                  # / 64 x 1024
#   bash .devtree/run.sh peer      # the compiled torch peer at the same shapes (its prefill eager
#                                  # torch with flash SDPA)
#   bash .devtree/run.sh serving   # strata serve + bench-serving (256 prompts, 1024 / 256, 64 at a
#                                  # time), and bench-one-batch at batch 64 in the same call
#   bash .devtree/run.sh tests     # the whole GPU suite
set -o pipefail
part=${1:-kernels}
config=bench/configs/llama-3.1-8b-instruct
run() { bash bench/cuda_device_run.sh "$@"; }
bin=.devtree/gpu/bundle/bin
env_setup() { export LD_LIBRARY_PATH=$PWD/.devtree/gpu/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}; }
strata_batch() {  # BATCH INPUT OUTPUT FILE
  timeout 150 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
    --batch-size $1 --input-len $2 --output-len $3 --json | tee -a "$OUT/$4" | cut -c1-300
}
case $part in
  check)  # the decode A/B at batch 1 and 64 (64 out), then the GPU tests that programmatic
          # dependent launch and the GEMV touch (bounded: the device time left was short)
    BATCHES=${BATCHES:-1 64} OUTPUT_LEN=64 NO_PREFILL=1 bash "$0" ab
    TESTS_FILTER='*OpsDevice*:*CudaDecodeTiles*:Fixtures/GoldenCuda*:Fixtures/CudaInvariance*:Shapes/CudaBackendVsCpu*:Hybrids/GoldenCuda*' \
      TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} run tests 2>&1 | tail -4
    grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" "$OUT/tests.log" | tail -12
    grep -c "^\[       OK" "$OUT/tests.log"
    xz -9 "$OUT/tests.log"
    ;;
  kernels)
    # The kernels alone as before: launched without programmatic dependence, so that the bench's
    # back-to-back launches of one kernel do not overlap.
    export STRATA_DISABLE_PDL=1 STRATA_DISABLE_GEMV=1
    TESTS_FILTER='*CudaDecodeTiles*:*CudaExtendTiles*:*CudaMla*' TESTS_TIMEOUT=200 run tests 2>&1 | tail -4
    grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" "$OUT/tests.log" | tail -12
    env_setup
    for shape in "64 1100" "256 1100" "64 4096" "8 32768" "8 1100" "1 1100"; do
      timeout 120 $bin/strata_attention_bench $shape 32 8 128 >>"$OUT/decode_kernel.jsonl"
    done
    python3 - "$OUT/decode_kernel.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for shape in sorted({(r["batch"], r["context"]) for r in rows}):
    rs = [r for r in rows if (r["batch"], r["context"]) == shape]
    print(f"{shape[0]} x {shape[1]}, copy {rs[0]['copy_GBps']:.0f} GB/s")
    for r in rs:
        if r["shipped"]: print(f"  shipped {r['kernel']}: {r['median_ms']:.4f} ms {r['fraction_of_copy']:.3f}")
    for w in (2, 4):
        t = [r for r in rs if r["kernel"] == "tiles" and r.get("tile_warps") == w]
        for r in sorted(t, key=lambda r: r["median_ms"])[:3]:
            print(f"  warps {w} stages {r['tile_stages']} bpsm {r['blocks_per_sm']} splits {r['splits']}: "
                  f"{r['median_ms']:.4f} ms {r['fraction_of_copy']:.3f}")
PY
    timeout 120 $bin/strata_attention_bench extend 8192 | tee "$OUT/extend_kernel.jsonl" | cut -c1-400
    for shape in "64 4096" "8 32768" "1 4096"; do
      timeout 100 $bin/strata_attention_bench mla $shape 128 | tee -a "$OUT/mla_kernel.jsonl" | cut -c1-400
    done
    ;;
  ab)  # strata's decode under three settings, alternating: "main" (no programmatic dependent
       # launch, cuBLAS for every product), "pdl" (dependent launches, cuBLAS), "gemv" (both,
       # the weight-streaming GEMV for 1-4 rows; only batch 1 differs from "pdl" here)
    run none >/dev/null 2>&1; env_setup
    for b in ${BATCHES:-1 8 64 256}; do
      for cfg in main pdl gemv; do
        [ $cfg = gemv ] && [ $b -gt 4 ] && continue
        echo "# $cfg" >>"$OUT/strata_decode.jsonl"
        case $cfg in
          main) export STRATA_DISABLE_PDL=1 STRATA_DISABLE_GEMV=1 ;;
          pdl) export STRATA_DISABLE_PDL=0 STRATA_DISABLE_GEMV=1 ;;
          gemv) export STRATA_DISABLE_PDL=0 STRATA_DISABLE_GEMV=0 ;;
        esac
        echo "batch $b $cfg"
        strata_batch $b 1024 ${OUTPUT_LEN:-256} strata_decode.jsonl
      done
    done
    unset STRATA_DISABLE_PDL STRATA_DISABLE_GEMV
    [ -n "${NO_PREFILL:-}" ] || for shape in "1 8192" "8 1024" "64 1024"; do strata_batch $shape 1 strata_prefill.jsonl; done
    ;;
  peer)  # the compiled torch peer: decode at batch 1 / 8 / 64 / 256, prefill (eager, flash SDPA)
    run none >/dev/null 2>&1; env_setup
    PYTHONUNBUFFERED=1 timeout 330 python3 bench/torch_decode_peer.py $config --batch-size 1 8 64 256 \
      --input-len 1024 --output-len 256 2>"$OUT/peer.err" | tee "$OUT/peer.jsonl"
    for shape in "1 8192" "8 1024"; do
      set -- $shape
      PYTHONUNBUFFERED=1 timeout 100 python3 bench/torch_decode_peer.py $config --batch-size $1 \
        --input-len $2 --output-len 4 2>>"$OUT/peer.err" | tee -a "$OUT/peer_prefill.jsonl"
    done
    ;;
  serving)
    run none >/dev/null 2>&1; env_setup
    strata_batch 64 1024 256 strata_decode64.jsonl
    $bin/strata serve --model $config --load-format dummy --device cuda --port 30123 \
      --max-running-requests 64 >"$OUT/serve.log" 2>&1 &
    serve_pid=$!
    for i in $(seq 1 120); do curl -sf localhost:30123/health >/dev/null && break; sleep 1; done
    timeout 200 $bin/strata bench-serving --port 30123 --num-prompts 256 --random-input-len 1024 \
      --random-output-len 256 --random-range-ratio 1 --max-concurrency 64 --json |
      tee -a "$OUT/serving.jsonl"
    kill $serve_pid; wait $serve_pid
    ;;
  tests)  # the whole GPU suite
    TESTS_TIMEOUT=${TESTS_TIMEOUT:-420} run tests 2>&1 | tail -8
    grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" "$OUT/tests.log" | tail -12
    xz -9 "$OUT/tests.log"
    ;;
esac
