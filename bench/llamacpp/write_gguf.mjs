#!/usr/bin/env node
// Writes a llama-architecture GGUF holding the weights strata's `--load-format dummy` makes
// for a Llama config.json, so llama.cpp and strata run the same model in a benchmark:
//   node write_gguf.mjs --model bench/configs/llama-2048x16 --type f32|f16|bf16|q8_0 \
//       --out /tmp/llama-2048x16-f32.gguf [--seed 0]
// Tensor names and layout are those of llama.cpp's convert_hf_to_gguf.py for LlamaForCausalLM
// (token_embd, blk.N.attn_norm / attn_q / attn_k / attn_v / attn_output / ffn_norm /
// ffn_gate / ffn_up / ffn_down, output_norm, output), with its q/k row permutation: Hugging
// Face's rotary pairs dimension j with j + d/2 inside a head, llama.cpp's LLAMA graph pairs 2j
// with 2j + 1, so row (head h, half t, j) moves to row (h, j, t). With it llama.cpp computes
// what strata computes (check_same_weights.sh compares their greedy tokens); for speed alone
// it changes nothing (the same bytes in another row order).
// The tokenizer is a stand-in SentencePiece ("llama") vocabulary of the config's size
// (<unk>, <s>, </s>, the 256 byte tokens, then unique placeholder pieces): the benchmark feeds
// token ids, and llama.cpp needs a vocabulary to load the file.
import fs from "node:fs";
import path from "node:path";

import { writeGguf, meta } from "./gguf.mjs";
import { dummyStream, fillDummy, DUMMY_MATRIX_STDDEV } from "./strata_dummy.mjs";

const FILE_TYPE = { f32: 0, f16: 1, q8_0: 7, bf16: 32 };  // llama_ftype: ALL_F32, MOSTLY_*

function fail(message) {
  console.error(`error: ${message}`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { seed: "0" };
  const known = ["--model", "--type", "--out", "--seed"];
  for (let i = 0; i < argv.length; i += 2) {
    if (!known.includes(argv[i]))
      fail(`unknown flag '${argv[i]}': use ${known.join(", ")} (each with a value)`);
    if (i + 1 >= argv.length) fail(`${argv[i]} needs a value`);
    args[argv[i].slice(2)] = argv[i + 1];
  }
  for (const flag of ["model", "type", "out"])
    if (!args[flag]) fail(`--${flag} is required (usage: --model DIR --type T --out FILE.gguf)`);
  if (!(args.type in FILE_TYPE))
    fail(`--type '${args.type}' is not one of ${Object.keys(FILE_TYPE).join(", ")}`);
  if (!/^\d+$/.test(args.seed)) fail(`--seed '${args.seed}' must be a non-negative integer`);
  return args;
}

// The Llama config fields the file needs, checked before anything is written.
function readLlamaConfig(dir) {
  const file = path.join(dir, "config.json");
  if (!fs.existsSync(file)) fail(`--model ${dir} has no config.json: pass a model directory`);
  const c = JSON.parse(fs.readFileSync(file, "utf8"));
  if (c.model_type !== "llama")
    fail(`${file}: model_type '${c.model_type}' is not 'llama': this writer makes Llama GGUFs only`);
  for (const field of ["rope_scaling", "attention_bias", "mlp_bias"])
    if (c[field]) fail(`${file}: '${field}' is set: this writer handles plain Llama configs only`);
  const need = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "vocab_size"];
  for (const field of need)
    if (!Number.isInteger(c[field]) || c[field] < 1)
      fail(`${file}: '${field}' must be a positive integer, got ${JSON.stringify(c[field])}`);
  const heads = c.num_attention_heads;
  const headDim = c.head_dim ?? c.hidden_size / heads;
  if (!Number.isInteger(headDim) || headDim % 2)
    fail(`${file}: head_dim ${headDim} must be an even integer (rotary pairs)`);
  const firstId = (v, fallback) => (Array.isArray(v) ? v[0] : v ?? fallback);
  return {
    hidden: c.hidden_size,
    intermediate: c.intermediate_size,
    layers: c.num_hidden_layers,
    heads,
    kvHeads: c.num_key_value_heads ?? heads,
    headDim,
    vocab: c.vocab_size,
    context: c.max_position_embeddings ?? 4096,
    eps: c.rms_norm_eps ?? 1e-6,
    ropeTheta: c.rope_theta ?? 10000,
    tied: c.tie_word_embeddings === true,
    bos: firstId(c.bos_token_id, 1),
    eos: firstId(c.eos_token_id, 2),
  };
}

function standInVocabulary(size) {
  const tokens = [], scores = [], types = [];  // llama_token_type: 1 normal, 2 unknown, 3 control, 6 byte
  const add = (text, score, type) => { tokens.push(text); scores.push(score); types.push(type); };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  for (let b = 0; b < 256 && tokens.length < size; ++b)
    add(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`, 0, 6);
  while (tokens.length < size) add(`\u2581piece${tokens.length}`, -tokens.length, 1);
  return { tokens: tokens.slice(0, size), scores: scores.slice(0, size), types: types.slice(0, size) };
}

// Row r of llama.cpp's q (or k) matrix is Hugging Face's row sourceRow(r).
function rotaryRowOrder(headDim) {
  const half = headDim / 2;
  return (r) => {
    const head = Math.floor(r / headDim), within = r % headDim;
    return head * headDim + (within & 1) * half + (within >> 1);
  };
}

function tensors(cfg, type, seed) {
  const list = [];
  const matrix = (name, hfName, rows, cols, sourceRow = (r) => r) => {
    const stream = dummyStream(seed, hfName);
    list.push({
      name, rows, cols, type,
      fillRows(first, count, out) {
        for (let r = 0; r < count; ++r)
          fillDummy(out.subarray(r * cols, (r + 1) * cols), stream, sourceRow(first + r) * cols,
                    DUMMY_MATRIX_STDDEV);
      },
    });
  };
  const norm = (name, n) =>  // strata's dummy norm weights are 1; GGUF keeps norms in f32
    list.push({ name, rows: 1, cols: n, type: "f32", fillRows: (f, c, out) => out.fill(1) });

  const { hidden, intermediate, heads, kvHeads, headDim, vocab } = cfg;
  const rotary = rotaryRowOrder(headDim);
  matrix("token_embd.weight", "model.embed_tokens.weight", vocab, hidden);
  for (let l = 0; l < cfg.layers; ++l) {
    const hf = `model.layers.${l}.`, blk = `blk.${l}.`;
    norm(`${blk}attn_norm.weight`, hidden);
    matrix(`${blk}attn_q.weight`, `${hf}self_attn.q_proj.weight`, heads * headDim, hidden, rotary);
    matrix(`${blk}attn_k.weight`, `${hf}self_attn.k_proj.weight`, kvHeads * headDim, hidden, rotary);
    matrix(`${blk}attn_v.weight`, `${hf}self_attn.v_proj.weight`, kvHeads * headDim, hidden);
    matrix(`${blk}attn_output.weight`, `${hf}self_attn.o_proj.weight`, hidden, heads * headDim);
    norm(`${blk}ffn_norm.weight`, hidden);
    matrix(`${blk}ffn_gate.weight`, `${hf}mlp.gate_proj.weight`, intermediate, hidden);
    matrix(`${blk}ffn_up.weight`, `${hf}mlp.up_proj.weight`, intermediate, hidden);
    matrix(`${blk}ffn_down.weight`, `${hf}mlp.down_proj.weight`, hidden, intermediate);
  }
  norm("output_norm.weight", hidden);
  if (!cfg.tied) matrix("output.weight", "lm_head.weight", vocab, hidden);  // tied: token_embd
  return list;
}

function metadata(cfg, type, name) {
  const vocab = standInVocabulary(cfg.vocab);
  return {
    "general.architecture": meta.string("llama"),
    "general.name": meta.string(name),
    "general.file_type": meta.u32(FILE_TYPE[type]),
    "general.alignment": meta.u32(32),
    "llama.context_length": meta.u32(cfg.context),
    "llama.embedding_length": meta.u32(cfg.hidden),
    "llama.block_count": meta.u32(cfg.layers),
    "llama.feed_forward_length": meta.u32(cfg.intermediate),
    "llama.attention.head_count": meta.u32(cfg.heads),
    "llama.attention.head_count_kv": meta.u32(cfg.kvHeads),
    "llama.attention.key_length": meta.u32(cfg.headDim),
    "llama.attention.value_length": meta.u32(cfg.headDim),
    "llama.rope.dimension_count": meta.u32(cfg.headDim),
    "llama.rope.freq_base": meta.f32(cfg.ropeTheta),
    "llama.attention.layer_norm_rms_epsilon": meta.f32(cfg.eps),
    "llama.vocab_size": meta.u32(cfg.vocab),
    "tokenizer.ggml.model": meta.string("llama"),
    "tokenizer.ggml.tokens": meta.strings(vocab.tokens),
    "tokenizer.ggml.scores": meta.f32s(vocab.scores),
    "tokenizer.ggml.token_type": meta.i32s(vocab.types),
    "tokenizer.ggml.bos_token_id": meta.u32(cfg.bos),
    "tokenizer.ggml.eos_token_id": meta.u32(cfg.eos),
    "tokenizer.ggml.unknown_token_id": meta.u32(0),
  };
}

const args = parseArgs(process.argv.slice(2));
const cfg = readLlamaConfig(args.model);
if (cfg.vocab < 3 || cfg.bos >= cfg.vocab || cfg.eos >= cfg.vocab)
  fail(`vocab_size ${cfg.vocab} must hold bos ${cfg.bos} and eos ${cfg.eos} (at least 3 tokens)`);
const started = Date.now();
const name = `${path.basename(path.resolve(args.model))} strata dummy seed ${args.seed}`;
const tmp = `${args.out}.partial`;  // renamed when complete: a killed run leaves no usable file
writeGguf(tmp, metadata(cfg, args.type, name), tensors(cfg, args.type, BigInt(args.seed)));
fs.renameSync(tmp, args.out);
const bytes = fs.statSync(args.out).size;
console.error(`wrote ${args.out}: ${(bytes / 2 ** 30).toFixed(2)} GiB, ${args.type}, ` +
              `${((Date.now() - started) / 1000).toFixed(0)} s`);
