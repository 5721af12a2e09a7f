#!/usr/bin/env bash
# Decode throughput of pipeline parallelism on this machine's CPU: the same dummy Llama-shaped
# model (bench/configs/llama-1024x8) and the same prompts, as one process with all cores
# (PP=1), one process with one core (PP=1, --threads 1; also with the requests in the two
# micro-batches PP=2 uses, which isolates the cost of smaller batches), and two stage
# processes (PP=2, one core each, two micro-batches in flight). Runs are interleaved and
# repeated; each prints the `--timing` lines of strata generate (one per stage).
# Usage: bench/pp_decode.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
requests=16 prompt_len=32 new_tokens=32
prompts=$(mktemp)
trap 'rm -f "$prompts"' EXIT
python3 - "$prompts" "$requests" "$prompt_len" <<'PY'
import random, sys
random.seed(0)
path, n, length = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "w") as f:
    for _ in range(n):
        f.write(",".join(str(random.randrange(3, 8192)) for _ in range(length)) + "\n")
PY
for round in $(seq "$rounds"); do
  for setup in "--pp-size 1" "--pp-size 1 --threads 1" "--pp-size 1 --threads 1 --micro-batches 2" "--pp-size 2"; do
    echo -n "round $round [$setup] "
    "$build/strata" generate --model bench/configs/llama-1024x8 --load-format dummy \
      --input-ids-file "$prompts" --max-new-tokens "$new_tokens" --timing $setup 2>&1 >/dev/null | grep '^timing'
  done
done
