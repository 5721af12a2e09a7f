#!/usr/bin/env bash
# Encode throughput of strata against Hugging Face `tokenizers` on the same machine, text and
# thread count (docs/benchmarks-tokenizer.md), two ways: the whole ~4 MB file as one string,
# and each line as its own input (request-sized prompts). Both sides print their token counts,
# which must be equal. Python's `tokenizers` is used where installed, else its Node binding
# (NODE_PATH pointing at an `npm install tokenizers`). Usage: bench/tokenizer_vs_hf.sh STRATA_BINARY [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA=$1
SECONDS_EACH=${2:-4}
TOK=$(mktemp -d)
tar -xJf tests/data/tokenizers.tar.xz -C "$TOK"
python3 bench/tokenizer_bench_text.py "$TOK" /tmp/tok_bench.txt --mb 4
NAMES="qwen3 llama3 deepseek_v3 gptoss llama2"
echo "== strata"
for mode in "" --bench-lines; do
  for n in $NAMES; do
    echo "$n ${mode:-whole} $("$STRATA" tokenize --tokenizer "$TOK/$n" --bench /tmp/tok_bench.txt \
      --bench-seconds "$SECONDS_EACH" $mode)"
  done
done
if ! python3 -c 'import tokenizers' 2>/dev/null; then
  echo "== tokenizers (Node binding, NODE_PATH=${NODE_PATH:-})"
  RAYON_NUM_THREADS=1 node bench/tokenizer_hf_node.js "$TOK" /tmp/tok_bench.txt "$SECONDS_EACH" $NAMES
  exit
fi
echo "== tokenizers $(python3 -c 'import tokenizers; print(tokenizers.__version__)')"
RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false TOK="$TOK" NAMES="$NAMES" SECONDS_EACH="$SECONDS_EACH" \
  python3 - <<'PY'
import json, os, time, tokenizers
# newline='': keep \r and \r\n as they are. Text mode would turn them into \n, and tokenizers
# would encode a different string than strata reads (that is how an earlier run of this
# benchmark got token counts 0.03-0.2% apart).
text = open('/tmp/tok_bench.txt', encoding='utf-8', newline='').read()
lines = [l for l in text.split('\n') if l]
seconds = float(os.environ['SECONDS_EACH'])
for mode, inputs in (('whole', [text]), ('lines', lines)):
    size = sum(len(s.encode('utf-8')) for s in inputs)
    for n in os.environ['NAMES'].split():
        tok = tokenizers.Tokenizer.from_file(os.environ['TOK'] + f'/{n}/tokenizer.json')
        # One call per pass (encode_batch on one thread for the lines), so that Python's
        # per-call cost is not what gets measured.
        run = lambda: sum(len(e.ids) for e in tok.encode_batch(inputs, add_special_tokens=False))
        tokens = run()  # warm-up
        t0, passes = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds or passes == 0:
            tokens = run()
            passes += 1
        dt = time.perf_counter() - t0
        print(n, mode, json.dumps({'inputs': len(inputs), 'bytes': size, 'tokens': tokens,
                                   'mb_per_s': size * passes / dt / 1e6,
                                   'tokens_per_s': tokens * passes / dt}))
PY
