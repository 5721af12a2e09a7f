// Long-input references for the tokenizer fixtures, from Hugging Face `tokenizers` itself
// (its Node binding runs the same Rust library as the Python package):
//   npm install tokenizers@0.23.2            (in a scratch directory; set NODE_PATH to it)
//   python3 bench/tokenizer_bench_text.py DIR /tmp/bench.txt --mb 4
//   node tests/data/tools/make_long_reference.js DIR /tmp/bench.txt 200000
// DIR is the unpacked tests/data/tokenizers.tar.xz. Writes DIR/long_text.txt (the first
// ~N bytes of the benchmark text, cut at a newline; \r and \r\n kept as they are) and, for
// each tokenizer, DIR/<name>/long_reference.json: {"ids", "ids_with_special", "decoded"}.
// The reference.json cases are short strings; this one is a single long string that mixes
// them all, so pre-tokenizer and added-token boundaries between cases are covered too.
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

(async () => {
  const [dir, benchFile, maxBytes] = process.argv.slice(2);
  const bytes = fs.readFileSync(benchFile);
  let end = Math.min(bytes.length, Number(maxBytes));
  while (end > 0 && bytes[end - 1] !== 0x0a) end--;
  const text = bytes.subarray(0, end).toString('utf8');
  fs.writeFileSync(path.join(dir, 'long_text.txt'), text);
  for (const name of ['qwen3', 'llama3', 'deepseek_v3', 'gptoss', 'llama2']) {
    const tok = await Tokenizer.fromFile(path.join(dir, name, 'tokenizer.json'));
    const plain = await tok.encode(text, null, { addSpecialTokens: false });
    const special = await tok.encode(text, null, { addSpecialTokens: true });
    const ids = Array.from(plain.getIds());
    const reference = {
      ids,
      ids_with_special: Array.from(special.getIds()),
      decoded: await tok.decode(ids, false),
    };
    fs.writeFileSync(path.join(dir, name, 'long_reference.json'), JSON.stringify(reference));
    console.log(`${name}: ${text.length} chars, ${ids.length} ids`);
  }
})();
