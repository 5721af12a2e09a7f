#!/usr/bin/env bash
# Decode throughput of tensor parallelism on this machine's CPU (docs/benchmarks.md): the same
# dummy Llama-shaped model (bench/configs/llama-1024x8: 16 q / 4 kv heads, MLP 2816, vocab 8192)
# and the same prompts, as one process on one core (TP=1 --threads 1), one process on all
# cores (TP=1), and two tensor-parallel processes with one core each (TP=2: every layer split,
# an all-reduce after o_proj and down_proj, the logits all-gathered). Batch 1 (latency) and
# batch 16 (throughput). Runs are interleaved and repeated; each prints the `--timing` line of
# strata generate (for TP=2: rank 0's, with `tp_collective_s`, the time its collectives took,
# prefill included, and `tp_collectives`, how many there were).
# Usage: bench/tp_decode.sh [BUILD_DIR] [ROUNDS]   (timings on a shared machine are provisional)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-2}
prompt_len=32 new_tokens=32
prompts=$(mktemp)
trap 'rm -f "$prompts"' EXIT
for requests in 1 16; do
  python3 - "$prompts" "$requests" "$prompt_len" <<'PY'
import random, sys
random.seed(0)
path, n, length = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "w") as f:
    for _ in range(n):
        f.write(",".join(str(random.randrange(3, 8192)) for _ in range(length)) + "\n")
PY
  for round in $(seq "$rounds"); do
    for setup in "--tp-size 1 --threads 1" "--tp-size 1" "--tp-size 2"; do
      echo -n "batch $requests round $round [$setup] "
      "$build/strata" generate --model bench/configs/llama-1024x8 --load-format dummy \
        --input-ids-file "$prompts" --max-new-tokens "$new_tokens" --timing $setup 2>&1 >/dev/null |
        grep '^timing'
    done
  done
done
