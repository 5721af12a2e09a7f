// strata's --load-format dummy values (src/core/dummy_random.h, src/core/counter_random.h) in
// JavaScript, so that a GGUF file for llama.cpp holds the very weights strata benchmarks:
//   stream   = fnv1a64(name) ^ (seed * GAMMA)
//   value[i] = (2 * uniform24(splitmix64(stream + i * GAMMA)) - 1) * stddev * 1.7320508  (f32)
// Matrices take stddev 0.02 (src/model/param_loader.cpp); norm weights are 1 and biases 0
// (DummyWeights::load in src/model/weights.cpp). The values are a pure function of (seed, name,
// index), so any row can be made on its own (the GGUF writer permutes q/k rows that way).
// 64-bit words are carried as two uint32 halves: BigInt per element would take minutes for the
// 850 M values of bench/configs/llama-2048x16; check_same_weights.sh compares the result with
// strata's own output.

const GAMMA = 0x9e3779b97f4a7c15n;
const GAMMA_HI = Number(GAMMA >> 32n) >>> 0;
const GAMMA_LO = Number(GAMMA & 0xffffffffn) >>> 0;
const MIX1_HI = 0xbf58476d;
const MIX1_LO = 0x1ce4e5b9;
const MIX2_HI = 0x94d049bb;
const MIX2_LO = 0x133111eb;
const MASK64 = (1n << 64n) - 1n;

export const DUMMY_MATRIX_STDDEV = 0.02;

// FNV-1a of the tensor name xor the seed's multiple of the golden gamma (dummy_stream).
export function dummyStream(seed, name) {
  let h = 1469598103934665603n;
  for (const byte of Buffer.from(name, "utf8")) h = ((h ^ BigInt(byte)) * 1099511628211n) & MASK64;
  return h ^ ((BigInt(seed) * GAMMA) & MASK64);
}

// High 32 bits of the 64-bit product of two uint32 values, from 16-bit parts (each partial
// product is below 2^32, exact in a double).
function mulHi32(a, b) {
  const a0 = a & 0xffff, a1 = a >>> 16, b0 = b & 0xffff, b1 = b >>> 16;
  const p01 = a0 * b1, p10 = a1 * b0;
  const mid = ((a0 * b0) >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  return (a1 * b1 + Math.floor(p01 / 65536) + Math.floor(p10 / 65536) + Math.floor(mid / 65536)) >>> 0;
}

// out[k] = dummy_value(stream, first + k, stddev) for k < out.length.
export function fillDummy(out, stream, first, stddev) {
  const scale = Math.fround(stddev);
  const sqrt3 = Math.fround(1.7320508);
  // mix64's own first step adds GAMMA to its input stream + index * GAMMA, so element k hashes
  // the counter stream + (first + k + 1) * GAMMA.
  const counter = (stream + BigInt(first + 1) * GAMMA) & MASK64;
  let hi = Number(counter >> 32n) >>> 0;
  let lo = Number(counter & 0xffffffffn) >>> 0;
  for (let k = 0; k < out.length; ++k) {
    // x = (x ^ (x >> 30)) * MIX1
    let xl = (lo ^ ((lo >>> 30) | (hi << 2))) >>> 0;
    let xh = (hi ^ (hi >>> 30)) >>> 0;
    let ph = (mulHi32(xl, MIX1_LO) + Math.imul(xl, MIX1_HI) + Math.imul(xh, MIX1_LO)) >>> 0;
    let pl = Math.imul(xl, MIX1_LO) >>> 0;
    // x = (x ^ (x >> 27)) * MIX2
    xl = (pl ^ ((pl >>> 27) | (ph << 5))) >>> 0;
    xh = (ph ^ (ph >>> 27)) >>> 0;
    ph = (mulHi32(xl, MIX2_LO) + Math.imul(xl, MIX2_HI) + Math.imul(xh, MIX2_LO)) >>> 0;
    // x ^ (x >> 31): its top 24 bits (uniform24 takes r >> 40) are those of ph ^ (ph >> 31).
    const top24 = ((ph ^ (ph >>> 31)) >>> 8) >>> 0;
    const u = top24 / 16777216;
    out[k] = Math.fround(Math.fround((2 * u - 1) * scale) * sqrt3);
    const sum = lo + GAMMA_LO;  // the next element's counter
    lo = sum >>> 0;
    hi = (hi + GAMMA_HI + (sum > 0xffffffff ? 1 : 0)) >>> 0;
  }
}
