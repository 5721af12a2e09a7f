#!/usr/bin/env bash
# Pipeline parallelism on GPUs (docs/benchmarks.md): the Llama-3.1-8B shape with random
# weights, PP=2 on two GPUs (NCCL) against PP=1 on one. For each batch, one `strata generate
# --timing` run per setup: B prompts of INPUT_LEN random ids, OUTPUT_LEN new tokens each, greedy,
# all prefilled, then decoded together. Prints one JSON line per run: the setup and the
# stages' timing lines (the last stage's decode tok/s counts every token sampled after the last prefill; the
# median inter-token time is the time per decode step a request sees).
# Usage: bench/pp_cuda.sh [STRATA] [INPUT_LEN] [OUTPUT_LEN]      (from the repository root)
set -uo pipefail
strata=${1:-build/strata}
input_len=${2:-1024}
output_len=${3:-256}
config=bench/configs/llama-3.1-8b-instruct
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
logs=${PP_CUDA_LOGS:-$tmp}  # each run's stderr (every stage's timing line, errors)
for batch in 1 64 256; do
  python3 - "$tmp/prompts_$batch.txt" "$batch" "$input_len" <<'PY'
import random, sys
path, n, length = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(n)
with open(path, "w") as f:
    for _ in range(n):
        f.write(",".join(str(random.randrange(3, 128000)) for _ in range(length)) + "\n")
PY
  setups=("--pp-size 1" "--pp-size 2")
  [ "$batch" -gt 1 ] && setups+=("--pp-size 2 --micro-batches 4")
  for setup in "${setups[@]}"; do
    log="$logs/b${batch}_$(echo "$setup" | tr -d ' -').err"
    # shellcheck disable=SC2086
    timeout 300 "$strata" generate --model $config --load-format dummy --device cuda \
      --input-ids-file "$tmp/prompts_$batch.txt" --max-new-tokens "$output_len" \
      --context-length $((input_len + output_len)) --pp-timeout 120 --timing $setup \
      >/dev/null 2>"$log"
    rc=$?
    stages=$(grep '^timing: ' "$log" | sed 's/^timing: //' | paste -sd, -)
    echo "{\"batch\": $batch, \"input_len\": $input_len, \"output_len\": $output_len, \"setup\": \"$setup\", \"rc\": $rc, \"stages\": [$stages]}"
  done
done
