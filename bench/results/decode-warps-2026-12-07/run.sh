#!/usr/bin/env bash
# Issue #23, 2026-12-07 (sixth session): the tensor-core decode kernel at 2 warps a block (32-key
# tiles) beside 4 (64-key tiles), and main's figures against the compiled torch peer on the
# machine lent. One device call per part, on the bundle of `BUNDLE_KERNEL_BENCH=1
# scripts/gpu_bundle.sh` carried as .devtree/gpu (copy this script to .devtree/run.sh, carry both):
#   bash .devtree/run.sh sweep     # the decode kernel's tests (every warp count and ring depth),
#                                  # then its sweep (warps x ring depth x split target, and the lane
#                                  # kernel) at 64 x 4096, 8 x 32768, 64 / 256 / 8 / 1 x 1100
#   bash .devtree/run.sh tests     # the whole GPU suite
#   bash .devtree/run.sh e2e       # decode at batch 1 / 8 / 64 / 256 (1024 in, 256 out): strata
#                                  # and the compiled torch peer
#   bash .devtree/run.sh prefill   # prefill 1 x 8192 and 8 x 1024: strata and the peer (eager
#                                  # torch, flash SDPA); then serving: strata serve + bench-serving
#                                  # (256 prompts, 1024 / 256, 64 at a time)
set -o pipefail
part=${1:-sweep}
config=bench/configs/llama-3.1-8b-instruct
run() { bash bench/cuda_device_run.sh "$@"; }
bin=.devtree/gpu/bundle/bin
env_setup() { export LD_LIBRARY_PATH=$PWD/.devtree/gpu/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}; }
case $part in
  sweep)
    TESTS_FILTER='*CudaDecodeTiles*:*CudaExtendTiles*:Shapes/CudaBackendVsCpu*' TESTS_TIMEOUT=200 run tests 2>&1 | tail -4
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
    ;;
  tests)  # the whole GPU suite
    TESTS_TIMEOUT=${TESTS_TIMEOUT:-420} run tests 2>&1 | tail -8
    grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" "$OUT/tests.log" | tail -12
    ;;
  e2e)
    run none >/dev/null 2>&1; env_setup
    for b in ${BATCHES:-1 8 64 256}; do
      timeout 100 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
        --batch-size $b --input-len 1024 --output-len ${OUTPUT_LEN:-256} --json |
        tee -a "$OUT/strata_decode.jsonl" | cut -c1-300
    done
    PYTHONUNBUFFERED=1 timeout 300 python3 bench/torch_decode_peer.py $config --batch-size ${BATCHES:-1 8 64 256} \
      --input-len 1024 --output-len ${OUTPUT_LEN:-256} 2>"$OUT/peer.err" | tee "$OUT/peer.jsonl"
    ;;
  prefill)
    run none >/dev/null 2>&1; env_setup
    for shape in "1 8192" "8 1024"; do
      set -- $shape
      timeout 100 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
        --batch-size $1 --input-len $2 --output-len 1 --json | tee -a "$OUT/strata_prefill.jsonl" | cut -c1-300
      PYTHONUNBUFFERED=1 timeout 100 python3 bench/torch_decode_peer.py $config --batch-size $1 \
        --input-len $2 --output-len 4 2>>"$OUT/peer.err" | tee -a "$OUT/peer_prefill.jsonl"
    done
    timeout 100 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
      --batch-size 64 --input-len 1024 --output-len 256 --json | tee -a "$OUT/strata_decode64.jsonl" | cut -c1-300
    $bin/strata serve --model $config --load-format dummy --device cuda --port 30123 \
      --max-running-requests 64 >"$OUT/serve.log" 2>&1 &
    serve_pid=$!
    for i in $(seq 1 120); do curl -sf localhost:30123/health >/dev/null && break; sleep 1; done
    timeout 200 $bin/strata bench-serving --port 30123 --num-prompts 256 --random-input-len 1024 \
      --random-output-len 256 --random-range-ratio 1 --max-concurrency 64 --json |
      tee -a "$OUT/serving.jsonl"
    kill $serve_pid; wait $serve_pid
    ;;
esac
