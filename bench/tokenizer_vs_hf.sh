#!/usr/bin/env bash
# Encode throughput of strata against Hugging Face `tokenizers` on the same machine, text and
# thread count (docs/benchmarks-tokenizer.md). Usage: bench/tokenizer_vs_hf.sh STRATA_BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA=$1
TOK=$(mktemp -d)
tar -xJf tests/data/tokenizers.tar.xz -C "$TOK"
python3 bench/tokenizer_bench_text.py "$TOK" /tmp/tok_bench.txt --mb 4
echo "== strata"
for n in qwen3 llama3 deepseek_v3 gptoss llama2; do
  "$STRATA" tokenize --tokenizer "$TOK/$n" --bench /tmp/tok_bench.txt --bench-seconds 4
done
echo "== tokenizers $(python3 -c 'import tokenizers; print(tokenizers.__version__)')"
RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false TOK="$TOK" python3 -c "
import os, time, tokenizers
text = open('/tmp/tok_bench.txt', encoding='utf-8').read()
size = len(text.encode('utf-8'))
for n in ['qwen3', 'llama3', 'deepseek_v3', 'gptoss', 'llama2']:
    tok = tokenizers.Tokenizer.from_file(os.environ['TOK'] + f'/{n}/tokenizer.json')
    ids = tok.encode(text, add_special_tokens=False).ids
    t0, passes = time.perf_counter(), 0
    while time.perf_counter() - t0 < 4:
        ids = tok.encode(text, add_special_tokens=False).ids
        passes += 1
    dt = time.perf_counter() - t0
    print(f'{n}: {size * passes / dt / 1e6:.2f} MB/s, {len(ids) * passes / dt / 1e6:.2f} M tokens/s, {len(ids)} tokens')
"
