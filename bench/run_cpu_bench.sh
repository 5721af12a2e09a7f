#!/usr/bin/env bash
# CPU benchmark of docs/benchmarks.md: memory bandwidth, then bench-one-batch on a dummy
# Llama-shaped model (hidden 2048, 16 layers, vocabulary 32000) at batch 1 and 8, with f32 and
# with bf16 weights (--dtype bfloat16), on 2 threads.
# Usage: bench/run_cpu_bench.sh [build dir]   (prints JSON lines)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
"$BUILD/strata_membw"
for dtype in float32 bfloat16; do
  for bs in 1 8; do
    "$BUILD/strata" bench-one-batch --model bench/configs/llama-2048x16 --load-format dummy \
      --batch-size "$bs" --input-len 128 --output-len 8 --dtype "$dtype" --threads 2 --json
  done
done
