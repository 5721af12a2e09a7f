#!/usr/bin/env bash
# Serving throughput under pipeline parallelism on CPU (docs/benchmarks.md): `strata serve` of a
# dummy 8-layer Llama (bench/configs/llama-1024x8) at --pp-size 1, 2 and 3, each pipeline with
# one micro-batch in flight (--micro-batches 1) and with one per stage (the default), measured
# by `strata bench-serving` (random prompts, fixed output length).
# Run from the repository root after building, on an otherwise idle machine; prints one line
# of JSON per configuration. THREADS: threads per stage (default 1, so that 3 stages fit 3+
# cores); PROMPTS, CONCURRENCY, INPUT_LEN, OUTPUT_LEN size the load.
set -euo pipefail
B=${STRATA:-./build/strata}
M=${MODEL:-bench/configs/llama-1024x8}
THREADS=${THREADS:-1}
PROMPTS=${PROMPTS:-48}
CONCURRENCY=${CONCURRENCY:-16}
INPUT_LEN=${INPUT_LEN:-64}
OUTPUT_LEN=${OUTPUT_LEN:-32}
LOG=${TMPDIR:-/tmp}/strata_pp_bench_server.log
run() {  # pp micro-batches
  local pp=$1 mb=$2
  $B serve --model "$M" --load-format dummy --port 0 --threads "$THREADS" --pp-size "$pp" \
    --micro-batches "$mb" --max-running-requests 64 --disable-radix-cache >"$LOG" 2>&1 &
  local srv=$!
  local port=""
  for _ in $(seq 1 240); do
    port=$(grep -o 'listening on [^ ]*:[0-9]*' "$LOG" | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break
    sleep 0.5
  done
  [ -n "$port" ] || { cat "$LOG"; kill -TERM $srv; exit 1; }
  local result
  result=$($B bench-serving --port "$port" --num-prompts "$PROMPTS" --random-input-len "$INPUT_LEN" \
    --random-output-len "$OUTPUT_LEN" --random-range-ratio 1 --max-concurrency "$CONCURRENCY" --json)
  local waits
  waits=$(curl -s "localhost:$port/metrics" | grep '^strata:pipeline_stage_wait_seconds_total' |
    sed 's/.*stage="\([0-9]*\)"} \(.*\)/\1:\2/' | paste -sd, - || true)
  kill -TERM $srv
  wait $srv || true
  echo "{\"pp_size\": $pp, \"micro_batches\": $mb, \"stage_wait_s\": \"$waits\", \"bench\": $result}"
}
run 1 1
for pp in 2 3; do
  run "$pp" 1
  run "$pp" "$pp"
done
