#!/usr/bin/env node
// llama.cpp's side of bench/cpu_vs_llamacpp.sh, timed as `strata bench-one-batch` times strata
// (src/cli/bench_command.cpp): one untimed warm-up pass, then a prefill of --input-len token ids
// that samples the first new token, then --output-len - 1 decode steps of one token each;
// greedy. Token ids go in directly (the context sequence's controlledEvaluate), so no tokenizer
// or chat template runs. llama.cpp is the prebuilt CPU build that node-llama-cpp ships.
//   node bench_llamacpp.mjs --model FILE.gguf [--input-len 128] [--output-len 32]
//       [--threads 2] [--input-ids 5,17,42] [--top-probabilities K]
// Prints one JSON object: strata's bench-one-batch keys (prefill_throughput_tok_s,
// decode_median_latency_ms, decode_throughput_tok_s, decode_steps, output_ids) plus what
// llama.cpp reports about itself: the threads its context runs with, the CPU time the process
// used per wall second while timed, its system info (CPU features, backend variant) and the log
// lines naming weight buffers (CPU_REPACK / AMX when it repacks Q8_0 weights).
// --top-probabilities K adds, per new token, the K most probable ids and their probabilities
// (softmax of the raw logits): check_same_weights.sh compares them with strata's logits. It
// slows each step (a full-vocabulary sort), so timed runs leave it off.
import fs from "node:fs";

import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function fail(message) {
  console.error(`error: ${message}`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { "input-len": "128", "output-len": "32", threads: "2", "top-probabilities": "0" };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i].replace(/^--/, "");
    if (!["model", "input-len", "output-len", "threads", "input-ids", "top-probabilities"].includes(flag) || i + 1 >= argv.length)
      fail(`bad flag '${argv[i]}': use --model FILE.gguf [--input-len N] [--output-len N] ` +
           `[--threads N] [--input-ids a,b,c] [--top-probabilities K], each with a value`);
    args[flag] = argv[i + 1];
  }
  if (!args.model || !fs.existsSync(args.model))
    fail(`--model '${args.model ?? ""}' is not a file: pass a GGUF (bench/llamacpp/write_gguf.mjs writes one)`);
  for (const flag of ["input-len", "output-len", "threads"])
    if (!/^[1-9]\d*$/.test(args[flag])) fail(`--${flag} '${args[flag]}' must be a positive integer`);
  if (!/^\d+$/.test(args["top-probabilities"]))
    fail(`--top-probabilities '${args["top-probabilities"]}' must be a non-negative integer`);
  const inputIds = args["input-ids"]?.split(",").map(Number);
  if (inputIds && !inputIds.every((id) => Number.isInteger(id) && id >= 0))
    fail(`--input-ids '${args["input-ids"]}' must be comma-separated non-negative token ids`);
  return {
    model: args.model,
    inputLen: Number(args["input-len"]),
    outputLen: Number(args["output-len"]),
    threads: Number(args.threads),
    inputIds,
    topProbabilities: Number(args["top-probabilities"]),
  };
}

// A fixed pseudo-random prompt in [3, vocab): past <unk>, <s>, </s>, as any prompt of ids.
function promptIds(length, vocab) {
  const ids = [];
  let state = 12345;
  for (let i = 0; i < length; ++i) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    ids.push(3 + (state % (vocab - 3)));
  }
  return ids;
}

// Evaluates `ids` into the sequence (one llama_decode batch) and returns the greedy next token
// and, when topK > 0, the topK most probable ids with their probabilities.
async function step(sequence, ids, topK) {
  const generateNext = { token: true, probabilities: topK > 0, options: { temperature: 0 } };
  const items = ids.map((id, i) => (i === ids.length - 1 ? [id, { generateNext }] : id));
  const { next } = (await sequence.controlledEvaluate(items))[ids.length - 1];
  const top = topK > 0 ? [...next.probabilities.entries()].slice(0, topK) : undefined;
  return { token: next.token, top };
}

async function run(sequence, prompt, outputLen, topK = 0) {
  const t0 = performance.now();
  let next = await step(sequence, prompt, topK);
  const prefillS = (performance.now() - t0) / 1e3;
  const outputs = [next];
  const stepS = [];
  for (let s = 1; s < outputLen; ++s) {
    const t = performance.now();
    next = await step(sequence, [next.token], topK);
    stepS.push((performance.now() - t) / 1e3);
    outputs.push(next);
  }
  return { prefillS, stepS, outputIds: outputs.map((o) => o.token), top: outputs.map((o) => o.top) };
}

const args = parseArgs(process.argv.slice(2));
const logLines = [];
const llama = await getLlama({
  gpu: false,
  build: "never",  // the prebuilt binary or nothing: this benchmark is of the shipped build
  logLevel: LlamaLogLevel.debug,
  logger: (level, message) => logLines.push(message.trimEnd()),
});
const model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0 });
const vocab = model.tokens.nTokens ?? model.fileInsights.tokenizer?.ggml?.tokens?.length;
const prompt = args.inputIds ?? promptIds(args.inputLen, vocab);
const contextSize = Math.ceil((prompt.length + args.outputLen) / 256) * 256;
const context = await model.createContext({
  contextSize,
  batchSize: prompt.length,  // the whole prompt in one batch, as strata's prefill
  sequences: 1,
  threads: { ideal: args.threads, min: args.threads },
});
const sequence = context.getSequence();

await run(sequence, prompt.slice(0, Math.min(prompt.length, 16)), 3);  // warm-up, untimed
await sequence.clearHistory();
const cpu0 = process.cpuUsage();
const wall0 = performance.now();
const { prefillS, stepS, outputIds, top } = await run(sequence, prompt, args.outputLen,
                                                    args.topProbabilities);
const cpu = process.cpuUsage(cpu0);
const wallS = (performance.now() - wall0) / 1e3;

const sorted = [...stepS].sort((a, b) => a - b);
const median = sorted.length ? sorted[sorted.length >> 1] : 0;  // bench-one-batch's median
const decodeTotal = stepS.reduce((a, b) => a + b, 0);
console.log(JSON.stringify({
  engine: "llama.cpp",
  model: args.model,
  batch_size: 1,
  input_len: prompt.length,
  output_len: outputIds.length,
  prefill_latency_s: prefillS,
  prefill_throughput_tok_s: prompt.length / prefillS,
  decode_median_latency_ms: median * 1e3,
  decode_throughput_tok_s: stepS.length ? stepS.length / decodeTotal : 0,
  decode_steps: stepS.length,
  output_ids: outputIds,
  ...(args.topProbabilities > 0 ? { top_probabilities: top } : {}),
  threads: context.currentThreads,
  cpu_seconds_per_wall_second: (cpu.user + cpu.system) / 1e6 / wallS,
  system_info: llama.systemInfo,
  buffer_log_lines: logLines.filter((l) => /load_backend|buffer size|REPACK|AMX|repack|flash_attn/i.test(l)),
}));
await context.dispose();
await model.dispose();
await llama.dispose();
