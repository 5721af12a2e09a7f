#!/usr/bin/env bash
# Checks that a GGUF from write_gguf.mjs holds strata's dummy weights in llama.cpp's layout:
# on a small Llama config (bench/configs/llama-512x4 unless given), f32 weights both sides, the
# same prompt ids, strata's `generate --load-format dummy --return-logits` and llama.cpp must
# pick the same greedy tokens, with the same 5 most probable ids at every step and their
# probabilities within 2e-3 (relative: llama.cpp keeps its KV cache in f16, which moves them by
# up to ~7e-4 here). A wrong generator port, tensor layout, rotary permutation (tried: the
# ranks differ from the second step on) or metadata field fails it.
# Usage: bench/llamacpp/check_same_weights.sh [strata binary] [model dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
STRATA=${1:-build/strata}
MODEL=${2:-bench/configs/llama-512x4}
[[ -x "$STRATA" ]] || { echo "error: strata binary '$STRATA' not found: build it or pass its path" >&2; exit 2; }
[[ -d bench/llamacpp/node_modules/node-llama-cpp ]] ||
  { echo "error: node-llama-cpp is not installed: run 'npm ci --prefix bench/llamacpp'" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
IDS=5,17,42,99,1000,7,7,300,2047,64,128,4000,11,12,13,8000
NEW=6
node bench/llamacpp/write_gguf.mjs --model "$MODEL" --type f32 --out "$WORK/model.gguf"
"$STRATA" generate --model "$MODEL" --load-format dummy --input-ids "$IDS" --max-new-tokens "$NEW" \
  --temperature 0 --threads 2 --json --return-logits >"$WORK/strata.json"
node bench/llamacpp/bench_llamacpp.mjs --model "$WORK/model.gguf" --input-ids "$IDS" \
  --output-len "$NEW" --top-probabilities 5 >"$WORK/llamacpp.json"
node --input-type=module - "$WORK/strata.json" "$WORK/llamacpp.json" <<'EOF'
import fs from "node:fs";
const strata = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const llama = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
let ok = JSON.stringify(strata.output_ids) === JSON.stringify(llama.output_ids);
console.log(`strata    ids ${strata.output_ids}\nllama.cpp ids ${llama.output_ids}`);
strata.logits.forEach((logits, step) => {
  const max = Math.max(...logits);
  const sum = logits.reduce((s, l) => s + Math.exp(l - max), 0);
  const top = logits.map((l, id) => [id, Math.exp(l - max) / sum]).sort((a, b) => b[1] - a[1]).slice(0, 5);
  const theirs = llama.top_probabilities[step];
  top.forEach(([id, p], k) => {
    const [tid, tp] = theirs[k];
    const close = id === tid && Math.abs(p - tp) <= 2e-3 * p;
    if (!close) ok = false;
    if (!close || k === 0)
      console.log(`step ${step} rank ${k}: strata ${id} p=${p.toPrecision(6)}, llama.cpp ${tid} p=${tp.toPrecision(6)}`);
  });
});
console.log(ok ? "same weights: greedy ids and top-5 probabilities agree" : "MISMATCH");
process.exit(ok ? 0 : 1);
EOF
