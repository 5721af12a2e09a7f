#!/usr/bin/env node
// Makes tests/data/tokenizers/tiny_chatml: a byte-level BPE tokenizer of exactly 512 ids (the
// vocab_size of the vendored tiny models in tests/data/models.tar.xz), trained with Hugging Face
// `tokenizers` (the Node binding of the Rust library), with ChatML special tokens and chat
// template, plus the library's own outputs for strata's tests to match.
//
//   cd tests/data/tools && npm ci && node make_tiny_tokenizer.js ../tokenizers/tiny_chatml
//
// Ids: 0..255 the 256 byte-level characters in byte order, 256..508 the first 253 merges that
// BPE training learns from the corpus below, 509 <|endoftext|>, 510 <|im_start|>,
// 511 <|im_end|>. The Node binding trains with the default BpeTrainer (no vocab limit, no
// initial alphabet), so the script trains to the end and keeps the first 253 merges: BPE
// training is greedy, so that prefix is what a trainer stopped at 253 merges learns, and adding
// the byte characters the corpus lacks is what an initial alphabet of ByteLevel.alphabet()
// does. The result is reloaded into the library, which then produces the references:
//   tokenizer.json, tokenizer_config.json (ChatML chat_template, eos <|im_end|>),
//   reference.json: per text, ids without and with special tokens and the decoded ids; and
//     decodes of fixed pseudo-random id sequences (every id of the vocabulary, partial UTF-8
//     sequences, special tokens) with and without skip_special_tokens,
//   chat_reference.json: the template rendered by @huggingface/jinja (the Jinja engine of
//     transformers.js) and the ids of the rendering.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Tokenizer, byteLevelAlphabet } = require('tokenizers');
const { Template } = require('@huggingface/jinja');

const kMerges = 253;
const kSpecials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
const kChatTemplate =
  "{%- for message in messages %}" +
  "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}" +
  "{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

// Plain sentences, chat transcripts in the template's own format, numbers, code and some
// non-ASCII text, so that the merges cover words, role names and multi-byte characters.
const kCorpus = [
  'The quick brown fox jumps over the lazy dog.',
  'Hello world! Hello there, how are you today?',
  'The cat sat on the mat, and the dog sat on the log.',
  'A language model predicts the next token from the tokens before it.',
  'The server answers requests from many clients at the same time.',
  'Streaming sends the text of each token as soon as it is ready.',
  'Tokenizers split text into pieces; the model only sees their ids.',
  'Numbers like 12, 345 and 6789 appear in text, as do 3.14 and 2.718.',
  'for (int i = 0; i < n; ++i) { sum += values[i]; }',
  'def greet(name):\n    return "Hello, " + name\n',
  'Once upon a time there was a small model that wanted to write stories.',
  'It wrote one word at a time, and then another, until the story was done.',
  'Please answer in one short sentence.',
  'What is the capital of France? The capital of France is Paris.',
  'I think that this is the best answer, but I am not sure.',
  'The weather is nice today; tomorrow it will rain in the morning.',
  'café, naïve, Grüße, déjà vu, piñata',
  '日本語のテキストと中文文本',
  'emoji: 🙂 👍 🚀',
  '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n',
  '<|im_start|>user\nHello! Who are you?<|im_end|>\n',
  '<|im_start|>assistant\nI am a small assistant. How can I help you?<|im_end|>\n',
  '<|im_start|>user\nTell me a story about a cat.<|im_end|>\n',
  '<|im_start|>assistant\nThe cat walked to the market and bought some fish.<|im_end|>\n',
];

const kTexts = [
  '', ' ', '\n', '\n\n', 'a', 'Hello', 'Hello world', ' Hello world', 'Hello  world  ',
  'hello\nworld\n', 'The quick brown fox jumps over the lazy dog.',
  'Numbers 12345 and 3.14159', "don't, it's, we'll, I'M", 'tabs\tand   spaces',
  'café naïve Grüße', '日本語のテキスト', 'emoji 🙂👍🚀', 'zwj 👩‍💻 and ñ',
  '<|im_start|>user\nHi there!<|im_end|>\n', 'special in <|endoftext|> the middle',
  '<|im_end|><|im_start|>', 'not special <|im_start', 'for (int i = 0; i < n; ++i) {}',
  'The server answers requests from many clients.',
];

const kChats = [
  [{ role: 'user', content: 'Hello! Who are you?' }],
  [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Hello.' },
    { role: 'user', content: 'Name a prime.\nOnly one.' },
  ],
  [{ role: 'user', content: 'café 🙂 日本' }],
];

// GPT-2's bytes_to_unicode: the byte-level character of each byte value.
function byteLevelChars() {
  const keep = [];
  for (let b = 33; b <= 126; ++b) keep.push(b);
  for (let b = 161; b <= 172; ++b) keep.push(b);
  for (let b = 174; b <= 255; ++b) keep.push(b);
  const chars = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; ++b)
    chars[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + extra++);
  return chars;
}

// Deterministic pseudo-random ids (xorshift32), so the references never change.
function idSequences(vocab) {
  let s = 0x9e3779b9;
  const next = () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s;
  };
  const out = [];
  const all = [];
  for (let id = 0; id < vocab; ++id) all.push(id);
  out.push(all);
  for (let k = 0; k < 24; ++k) {
    const len = 1 + (next() % 12);
    const ids = [];
    for (let j = 0; j < len; ++j) ids.push(next() % vocab);
    out.push(ids);
  }
  out.push([0xc3]);                // a lone lead byte (byte b has id b)
  out.push([0xe6, 0x97]);          // two bytes of a three-byte character
  out.push([510, 0xe6, 0x97, 0xa5, 511, 509]);
  return out;
}

function baseSpec() {
  const byteLevel = { add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', ...byteLevel },
    post_processor: { type: 'ByteLevel', ...byteLevel, trim_offsets: false },
    decoder: { type: 'ByteLevel', ...byteLevel },
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false,
      vocab: {}, merges: [],
    },
  };
}

async function main() {
  const outDir = process.argv[2];
  if (!outDir) {
    console.error('usage: node make_tiny_tokenizer.js OUTPUT_DIR');
    process.exit(2);
  }
  fs.mkdirSync(outDir, { recursive: true });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tiny-tok-'));

  // 1. Train to the end on the corpus (special tokens are added afterwards, so that training
  //    sees their pieces as ordinary text, as the template's role lines do).
  const corpusFile = path.join(work, 'corpus.txt');
  fs.writeFileSync(corpusFile, kCorpus.join('\n') + '\n');
  const trainer = Tokenizer.fromString(JSON.stringify(baseSpec()));
  trainer.train([corpusFile]);
  const trainedFile = path.join(work, 'trained.json');
  trainer.save(trainedFile, false);
  const trained = JSON.parse(fs.readFileSync(trainedFile, 'utf8'));
  const merges = trained.model.merges.map((m) => (Array.isArray(m) ? m : m.split(' ')));
  if (merges.length < kMerges) throw new Error(`training learned only ${merges.length} merges`);

  // 2. The vocabulary: byte characters in byte order, then the first kMerges merges.
  const chars = byteLevelChars();
  const alphabet = new Set(byteLevelAlphabet());
  if (alphabet.size !== 256 || !chars.every((c) => alphabet.has(c)))
    throw new Error('byte-level alphabet differs from bytes_to_unicode');
  const vocab = {};
  chars.forEach((c, b) => { vocab[c] = b; });
  const kept = merges.slice(0, kMerges);
  for (const [a, b] of kept) {
    if (!(a in vocab) || !(b in vocab)) throw new Error(`merge ${a} ${b} uses unknown tokens`);
    if (a + b in vocab) throw new Error(`merge ${a} ${b} repeats a token`);
    vocab[a + b] = Object.keys(vocab).length;
  }
  const spec = baseSpec();
  spec.model.vocab = vocab;
  spec.model.merges = kept;
  spec.added_tokens = kSpecials.map((content, k) => ({
    id: 256 + kMerges + k, content, single_word: false, lstrip: false, rstrip: false,
    normalized: false, special: true,
  }));

  // 3. Reload through the library; its save() writes the canonical tokenizer.json.
  const tok = Tokenizer.fromString(JSON.stringify(spec));
  if (tok.getVocabSize(true) !== 512) throw new Error(`vocab size ${tok.getVocabSize(true)}`);
  for (const [k, s] of kSpecials.entries())
    if (tok.tokenToId(s) !== 256 + kMerges + k) throw new Error(`special ${s} has the wrong id`);
  tok.save(path.join(outDir, 'tokenizer.json'), true);
  const config = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    model_max_length: 4096,
    add_bos_token: false,
    bos_token: null,
    eos_token: '<|im_end|>',
    pad_token: '<|endoftext|>',
    unk_token: null,
    additional_special_tokens: ['<|im_start|>', '<|im_end|>'],
    chat_template: kChatTemplate,
  };
  fs.writeFileSync(path.join(outDir, 'tokenizer_config.json'), JSON.stringify(config, null, 2) + '\n');

  // 4. References, from the reloaded files.
  const ref = Tokenizer.fromFile(path.join(outDir, 'tokenizer.json'));
  const cases = [];
  for (const text of kTexts) {
    const ids = (await ref.encode(text, null, { addSpecialTokens: false })).getIds();
    const withSpecial = (await ref.encode(text, null, { addSpecialTokens: true })).getIds();
    cases.push({ text, ids, ids_with_special: withSpecial, decoded: await ref.decode(ids, false) });
  }
  const decodes = [];
  for (const ids of idSequences(512))
    for (const skip of [false, true])
      decodes.push({ ids, skip_special_tokens: skip, text: await ref.decode(ids, skip) });
  fs.writeFileSync(path.join(outDir, 'reference.json'), JSON.stringify({
    tokenizer: 'tiny_chatml',
    reference: 'huggingface tokenizers 0.23.2 (Node binding)',
    cases,
    decodes,
  }, null, 1) + '\n');

  const template = new Template(kChatTemplate);
  const chats = [];
  for (const messages of kChats)
    for (const addGenerationPrompt of [true, false]) {
      const text = template.render({
        messages, add_generation_prompt: addGenerationPrompt, eos_token: config.eos_token,
      });
      const ids = (await ref.encode(text, null, { addSpecialTokens: false })).getIds();
      chats.push({ messages, add_generation_prompt: addGenerationPrompt, text, ids });
    }
  fs.writeFileSync(path.join(outDir, 'chat_reference.json'), JSON.stringify({
    tokenizer: 'tiny_chatml',
    reference: '@huggingface/jinja 0.5.11, huggingface tokenizers 0.23.2',
    cases: chats,
  }, null, 1) + '\n');
  fs.rmSync(work, { recursive: true, force: true });
  console.log(`wrote ${outDir}: ${kMerges} merges, 512 ids`);
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
