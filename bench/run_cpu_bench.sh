#!/usr/bin/env bash
# CPU benchmark of docs/benchmarks.md: memory bandwidth (read-only and copy, strata_membw),
# then bench-one-batch on a dummy Llama-shaped model (hidden 2048, 16 layers, vocabulary 32000)
# at batch 1 and 8, input 128 tokens, 32 output tokens, with f32 weights, bf16 weights
# (--dtype bfloat16) and int8 weights (--quantization int8), on 2 threads. The figures in
# docs/benchmarks.md come from it; run it on a quiet machine (other processes skew both the
# bandwidth and the timings).
# Usage: bench/run_cpu_bench.sh [build dir]   (prints JSON lines)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OMP_NUM_THREADS=2 "$BUILD/strata_membw"
for weights in "--dtype float32" "--dtype bfloat16" "--quantization int8"; do
  for bs in 1 8; do
    # shellcheck disable=SC2086
    "$BUILD/strata" bench-one-batch --model bench/configs/llama-2048x16 --load-format dummy \
      --batch-size "$bs" --input-len 128 --output-len 32 $weights --threads 2 --json
  done
done
