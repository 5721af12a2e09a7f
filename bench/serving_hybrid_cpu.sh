#!/usr/bin/env bash
# The prefix cache on a hybrid (Mamba2 + attention) model: the shared-prefix workload of
# bench/serving_cpu.sh against a dummy-weight NemotronH shape (bench/configs/nemotron-h-512x12)
# with the cache off, `no_buffer` and `extra_buffer` (docs/benchmarks.md). Run from the
# repository root after building; JSON lines and the cache metrics go to stdout.
set -euo pipefail
B=${STRATA:-./build/strata}
M=bench/configs/nemotron-h-512x12
LOG=${TMPDIR:-/tmp}/strata_bench_hybrid_server.log
for setup in "--disable-radix-cache" "--mamba-radix-cache-strategy no_buffer" \
  "--mamba-radix-cache-strategy extra_buffer --mamba-track-interval 128"; do
  echo "== $setup"
  # shellcheck disable=SC2086
  $B serve --model $M --load-format dummy --port 0 --threads 2 --max-running-requests 32 $setup >"$LOG" 2>&1 &
  SRV=$!
  for _ in $(seq 1 100); do grep -q listening "$LOG" && break; sleep 0.5; done
  PORT=$(grep -o '127.0.0.1:[0-9]*' "$LOG" | cut -d: -f2)
  $B bench-serving --port "$PORT" --dataset-name generated-shared-prefix --gsp-num-groups 4 \
    --gsp-prompts-per-group 8 --gsp-system-prompt-len 512 --gsp-question-len 32 --gsp-output-len 16 \
    --max-concurrency 8 --json
  curl -s "localhost:$PORT/metrics" | grep -E "^strata:(cache_hit_rate|cached_tokens_total|prompt_tokens_total)"
  kill -TERM $SRV
  wait $SRV
done
