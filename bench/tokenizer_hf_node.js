// The Hugging Face side of bench/tokenizer_vs_hf.sh through the `tokenizers` Node binding
// (the same Rust library as the Python package; npm install tokenizers@0.23.2), for machines
// where Python has no `tokenizers`. Prints the same JSON lines as the Python side.
//   RAYON_NUM_THREADS=1 node bench/tokenizer_hf_node.js TOKDIR TEXTFILE SECONDS NAME...
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

(async () => {
  const [dir, file, seconds, ...names] = process.argv.slice(2);
  const text = fs.readFileSync(file).toString('utf8');
  const lines = text.split('\n').filter((l) => l.length > 0);
  for (const [mode, inputs] of [['whole', [text]], ['lines', lines]]) {
    const size = inputs.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
    for (const name of names) {
      const tok = await Tokenizer.fromFile(`${dir}/${name}/tokenizer.json`);
      // One call per pass (encodeBatch for the lines, on one thread with RAYON_NUM_THREADS=1),
      // so that the binding's per-call cost is not what gets measured.
      const pass = async () => {
        const encodings = await tok.encodeBatch(inputs, { addSpecialTokens: false });
        return encodings.reduce((n, e) => n + e.getIds().length, 0);
      };
      let tokens = await pass();  // warm-up
      const t0 = process.hrtime.bigint();
      let passes = 0, dt = 0;
      while (dt < Number(seconds) || passes === 0) {
        tokens = await pass();
        passes++;
        dt = Number(process.hrtime.bigint() - t0) / 1e9;
      }
      console.log(name, mode, JSON.stringify({ inputs: inputs.length, bytes: size, tokens,
        mb_per_s: size * passes / dt / 1e6, tokens_per_s: tokens * passes / dt }));
    }
  }
})();
