#!/usr/bin/env bash
# Run from the repository root after building; results go to stdout (see docs/benchmarks.md).
set -euo pipefail
# Serving benchmarks on CPU with a dummy 4-layer Llama (bench/configs/llama-512x4).
B=${STRATA:-./build/strata}
M=bench/configs/llama-512x4
run_server() {  # extra flags...
  $B serve --model $M --load-format dummy --port 0 --threads 2 --max-running-requests 32 "$@" > ${TMPDIR:-/tmp}/strata_bench_server.log 2>&1 &
  SRV=$!
  for i in $(seq 1 100); do grep -q listening ${TMPDIR:-/tmp}/strata_bench_server.log && break; sleep 0.5; done
  PORT=$(grep -o '127.0.0.1:[0-9]*' ${TMPDIR:-/tmp}/strata_bench_server.log | cut -d: -f2)
}
stop_server() { kill -TERM $SRV; wait $SRV; }
echo "== random, concurrency 8"
run_server
$B bench-serving --port $PORT --num-prompts 32 --random-input-len 128 --random-output-len 32 --max-concurrency 8 --json
echo "== random, rate 4 req/s"
$B bench-serving --port $PORT --num-prompts 32 --random-input-len 128 --random-output-len 32 --request-rate 4 --seed 2 --json
stop_server
for flag in "" "--disable-radix-cache"; do
  echo "== shared prefix ${flag:-(radix cache on)}"
  run_server $flag
  $B bench-serving --port $PORT --dataset-name generated-shared-prefix --gsp-num-groups 4 --gsp-prompts-per-group 8 --gsp-system-prompt-len 512 --gsp-question-len 32 --gsp-output-len 16 --max-concurrency 8 --json
  curl -s localhost:$PORT/metrics | grep -E "^strata:(cache_hit_rate|cached_tokens_total|prompt_tokens_total)"
  stop_server
done
