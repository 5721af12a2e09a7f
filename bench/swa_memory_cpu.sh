#!/bin/bash
# RSS of strata serve (gemma-3-1b-it shape, dummy weights, CPU) with and without the window space.
cd "$(dirname "$0")/.."
for flag in "" "--disable-hybrid-swa-memory"; do
  log=$(mktemp)
  build/strata serve --model bench/configs/gemma-3-1b-it --load-format dummy --max-total-tokens 65536 \
    --max-running-requests 16 --chunked-prefill-size 2048 --context-length 32768 --port 0 --threads 1 $flag >$log 2>&1 &
  pid=$!
  for i in $(seq 1 300); do grep -q listening $log && break; sleep 1; done
  echo "$flag: $(grep VmRSS /proc/$pid/status)"; grep -E "KV cache|window space" $log
  kill $pid; wait $pid 2>/dev/null
done
