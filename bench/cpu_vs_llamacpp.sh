#!/usr/bin/env bash
# strata against llama.cpp on the CPU, side by side (issue #21): batch 1, a 128-token prompt,
# 32 new tokens (prefill + 31 decode steps), greedy, 2 threads each, the Llama shape of
# bench/configs/llama-2048x16 with the same random weights in both engines (strata's
# --load-format dummy; write_gguf.mjs writes those values into GGUF files for llama.cpp).
# Rows: strata f32, bf16 and (when its bench-one-batch has --quantization) int8; llama.cpp
# (the prebuilt CPU build of npm node-llama-cpp@3.21.1) f32, f16, bf16, Q8_0. The rows run
# interleaved, ROUNDS times, in one sitting; the table gives each row's median over rounds.
# Every run is preceded by a probe of the read bandwidth (strata_membw, beside the strata
# binary), and its decode is also given as a fraction of that floor: the weights a step reads,
# at the probed rate (the median over rounds of each run's fraction).
# Usage: bench/cpu_vs_llamacpp.sh [strata binary (build/strata)]
#   ROUNDS=3 GGUF_DIR=/tmp/strata-gguf RESULTS=FILE.jsonl bench/cpu_vs_llamacpp.sh build/strata
#   BASELINE=/path/to/older/strata ...: that binary's rows too ("strata@baseline f32", ...), in
#   the same rounds, for a before/after measured in the same sitting as llama.cpp.
# First use: `npm ci --prefix bench/llamacpp`; the GGUF files (3.2 + 1.6 + 1.6 + 0.85 GiB) are
# written into GGUF_DIR once, outside the repository. Prints the markdown table on stdout;
# every run's JSON goes to RESULTS.
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA=${1:-build/strata}
ROUNDS=${ROUNDS:-3}
GGUF_DIR=${GGUF_DIR:-/tmp/strata-gguf}
RESULTS=${RESULTS:-$(mktemp /tmp/cpu_vs_llamacpp.XXXXXX.jsonl)}
MODEL=bench/configs/llama-2048x16
INPUT_LEN=128
OUTPUT_LEN=32
THREADS=2

[[ -x "$STRATA" ]] || { echo "error: strata binary '$STRATA' not found: build it or pass its path" >&2; exit 2; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS='$ROUNDS' must be a positive integer" >&2; exit 2; }
[[ -d bench/llamacpp/node_modules/node-llama-cpp ]] ||
  { echo "error: node-llama-cpp is not installed: run 'npm ci --prefix bench/llamacpp'" >&2; exit 2; }

mkdir -p "$GGUF_DIR"
gguf() { echo "$GGUF_DIR/$(basename "$MODEL")-$1.gguf"; }
for type in f32 f16 bf16 q8_0; do
  [[ -f "$(gguf "$type")" ]] || node bench/llamacpp/write_gguf.mjs --model "$MODEL" --type "$type" --out "$(gguf "$type")"
done

# label|command: the strata rows, then llama.cpp's (commands are split at spaces: no spaces in
# paths).
strata_row() {  # label, binary, weights flags
  echo "$1|$2 bench-one-batch --model $MODEL --load-format dummy --batch-size 1" \
    "--input-len $INPUT_LEN --output-len $OUTPUT_LEN --threads $THREADS --json $3"
}
ROWS=()
strata_rows() {  # label prefix, binary
  ROWS+=("$(strata_row "$1 f32" "$2" "--dtype float32")" "$(strata_row "$1 bf16" "$2" "--dtype bfloat16")")
  if "$2" bench-one-batch --help 2>&1 | grep -q -- '--quantization'; then
    ROWS+=("$(strata_row "$1 int8" "$2" "--quantization int8")")
  else
    echo "note: $2 bench-one-batch has no --quantization flag: its int8 row is skipped" >&2
  fi
}
strata_rows strata "$STRATA"
if [[ -n "${BASELINE:-}" ]]; then
  [[ -x "$BASELINE" ]] || { echo "error: BASELINE='$BASELINE' is not an executable strata binary" >&2; exit 2; }
  strata_rows strata@baseline "$BASELINE"
fi
for type in f32 f16 bf16 q8_0; do
  ROWS+=("llama.cpp $type|node bench/llamacpp/bench_llamacpp.mjs --model $(gguf "$type") --input-len $INPUT_LEN --output-len $OUTPUT_LEN --threads $THREADS")
done

# The read floor, probed just before every run (this VM's read bandwidth moved between 33 and
# 52 GB/s from one minute, even one run, to the next on 2026-12-06, so a floor from another
# time says little): strata_membw's read-only bandwidth (1.7 s), built next to the strata
# binary.
MEMBW=$(dirname "$STRATA")/strata_membw
[[ -x "$MEMBW" ]] || { echo "error: '$MEMBW' not found: build the strata_membw target" >&2; exit 2; }
# Weights a decode step reads (every layer's projections and the LM head; one embedding row
# and the ~160 cached positions are under 0.5% of it): the floor's numerator, in parameters.
PARAMS=$(jq '(.head_dim // (.hidden_size / .num_attention_heads)) as $d |
  .num_hidden_layers * (.hidden_size * (.num_attention_heads + 2 * .num_key_value_heads) * $d
    + .num_attention_heads * $d * .hidden_size + 3 * .hidden_size * .intermediate_size)
  + .vocab_size * .hidden_size' "$MODEL/config.json")

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2
: >"$RESULTS"
for round in $(seq "$ROUNDS"); do
  for i in "${!ROWS[@]}"; do
    label=${ROWS[$i]%%|*}
    echo "round $round/$ROUNDS: $label" >&2
    floor=$(OMP_NUM_THREADS=$THREADS "$MEMBW" | tail -n 1 | jq .read_bandwidth_gb_s)
    # The JSON is the command's last stdout line; the row's label, place, round and the read
    # floor probed just before it go with it.
    ${ROWS[$i]#*|} | tail -n 1 | jq -c --arg name "$label" --argjson row "$i" \
      --argjson round "$round" --argjson floor "$floor" \
      '. + {"label": $name, "row": $row, "round": $round, "read_floor_gb_s": $floor}' >>"$RESULTS"
  done
done
echo "results: $RESULTS (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))" >&2

# Median of rounds per row, after checking that every run had the same prompt and new tokens.
jq -rs --argjson input "$INPUT_LEN" --argjson output "$OUTPUT_LEN" '
  def median: sort | if length % 2 == 1 then .[length / 2 | floor]
                     else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def fmt(d): . * pow(10; d) | round | tostring |  # d decimals, kept when they are zeros
    (length | if . <= d then d + 1 - . else 0 end) as $pad | ("0" * $pad // "") + . |
    .[:length - d] + "." + .[length - d:];
  (map(select(.input_len != $input or .output_len != $output or .decode_steps != $output - 1
              or .batch_size != 1))
   | if length > 0 then error("error: runs with another prompt length or new-token count than \($input) + \($output) (batch 1): \(map(.label))") else . end) as $_ |
  # Bytes a weight takes in each format: strata int8 and Q8_0 both carry one 4-byte scale per
  # 64 and one 2-byte scale per 32 values (1.0625).
  def weight_bytes: (.label | split(" ") | last) as $w |
    {"f32": 4, "f16": 2, "bf16": 2, "int8": 1.0625, "q8_0": 1.0625}[$w];
  "| engine, weights | prefill tok/s | decode ms/token | decode tok/s | of read floor | rounds |",
  "| --- | --- | --- | --- | --- | --- |",
  (group_by(.row)[] |
   "| \(.[0].label) | \(map(.prefill_throughput_tok_s) | median | fmt(1)) | " +
   "\(map(.decode_median_latency_ms) | median | fmt(1)) | " +
   "\(map(.decode_throughput_tok_s) | median | fmt(2)) | " +
   # Each run against the probe just before it, then the median.
   "\(map($params * weight_bytes / (.decode_median_latency_ms / 1000) / 1e9
            / .read_floor_gb_s) | median * 100 | round)% | \(length) |"),
  "",
  "read floor (strata_membw, \($threads) threads, read-only, before each run): " +
  "\(map(.read_floor_gb_s) | min | fmt(1))-\(map(.read_floor_gb_s) | max | fmt(1)) GB/s, " +
  "median \(map(.read_floor_gb_s) | median | fmt(1)); " +
  "a decode step reads \($params / 1e6 | round) M weights"
' --argjson params "$PARAMS" --argjson threads "$THREADS" "$RESULTS"
# What llama.cpp says about itself, from its last round: threads, CPU use, repacked buffers.
jq -rs 'map(select(.engine == "llama.cpp")) | group_by(.label)[] | last |
  "\(.label): \(.threads) threads, \(.cpu_seconds_per_wall_second * 100 | round / 100) CPU s per s; " +
  "\(.buffer_log_lines | map(select(test("model buffer|load_backend|REPACK|flash_attn"))) | join("; "))"' "$RESULTS" >&2
jq -rs 'map(select(.engine == "llama.cpp")) | .[0].system_info' "$RESULTS" >&2
