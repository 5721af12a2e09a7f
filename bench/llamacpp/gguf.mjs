// A GGUF v3 file writer (the format of ggml's docs/gguf.md), written here from the format's
// definition: the 'GGUF' magic, version 3, the tensor and metadata counts (uint64), the
// metadata key/value pairs, one info record per tensor (name, dimensions innermost first,
// ggml type, offset into the data section), padding to the alignment, then each tensor's data
// at its offset (a multiple of the alignment). Tensor data is produced row by row by the
// caller, so multi-GB files stream through a small buffer.
import fs from "node:fs";

export const ALIGNMENT = 32;

// Metadata value types (gguf_type).
const T = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10 };

// ggml tensor types this writer encodes, with their block size and bytes per block.
export const TENSOR_TYPES = {
  f32: { id: 0, block: 1, blockBytes: 4 },
  f16: { id: 1, block: 1, blockBytes: 2 },
  q8_0: { id: 8, block: 32, blockBytes: 34 },
  bf16: { id: 30, block: 1, blockBytes: 2 },
};

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

// IEEE binary16 of a float32, round to nearest even (ggml's GGML_FP32_TO_FP16 on hardware
// without F16C does the same).
export function f32ToF16(value) {
  f32Scratch[0] = value;
  const bits = u32Scratch[0];
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);  // inf, NaN
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;  // overflow to inf
  if (e <= 0) {  // subnormal half (or zero)
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    return sign | (half + (rest > mid || (rest === mid && (half & 1)) ? 1 : 0));
  }
  const half = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  return sign | (half + (rest > 0x1000 || (rest === 0x1000 && (half & 1)) ? 1 : 0));
}

// bfloat16 of a float32, round to nearest even: the rounding of strata's f32_to_bf16
// (src/core/dtype.h), so the bf16 files hold strata's bf16 weights bit for bit.
export function f32ToBf16(value) {
  f32Scratch[0] = value;
  const bits = u32Scratch[0];
  if ((bits & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

// Encodes one row of float32 values as `type` into `out` (a Buffer) at `at`; returns the end.
// Q8_0: per 32 values, the f16 scale d = max|x| / 127, then 32 int8 q = round(x / d).
export function encodeRow(type, row, out, at) {
  if (type === "f32") {
    for (let i = 0; i < row.length; ++i, at += 4) out.writeFloatLE(row[i], at);
  } else if (type === "f16" || type === "bf16") {
    const convert = type === "f16" ? f32ToF16 : f32ToBf16;
    for (let i = 0; i < row.length; ++i, at += 2) out.writeUInt16LE(convert(row[i]), at);
  } else if (type === "q8_0") {
    for (let b = 0; b < row.length; b += 32) {
      let amax = 0;
      for (let i = b; i < b + 32; ++i) amax = Math.max(amax, Math.abs(row[i]));
      const d = Math.fround(amax / 127);
      const inv = d ? Math.fround(1 / d) : 0;
      out.writeUInt16LE(f32ToF16(d), at);
      at += 2;
      for (let i = b; i < b + 32; ++i, ++at) {
        const x = Math.fround(row[i] * inv);
        out.writeInt8(Math.sign(x) * Math.round(Math.abs(x)), at);  // roundf: half away from 0
      }
    }
  } else {
    throw new Error(`unknown tensor type ${type}`);
  }
  return at;
}

export function rowBytes(type, cols) {
  const t = TENSOR_TYPES[type];
  if (cols % t.block) throw new Error(`${type} rows need a multiple of ${t.block} values, got ${cols}`);
  return (cols / t.block) * t.blockBytes;
}

// Little-endian byte builder for the header part of the file.
class Bytes {
  constructor() { this.parts = []; this.length = 0; }
  push(buf) { this.parts.push(buf); this.length += buf.length; }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.push(b); }
  i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.push(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
  f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.push(b); }
  string(s) { const b = Buffer.from(s, "utf8"); this.u64(b.length); this.push(b); }
  buffer() { return Buffer.concat(this.parts); }
}

// Metadata helpers: each returns [type, value] for writeGguf's `metadata` map.
export const meta = {
  u32: (v) => ["u32", v],
  f32: (v) => ["f32", v],
  string: (v) => ["string", v],
  strings: (v) => ["array", "string", v],
  f32s: (v) => ["array", "f32", v],
  i32s: (v) => ["array", "i32", v],
};

function writeValue(bytes, type, value) {
  if (type === "string") bytes.string(value);
  else bytes[type](value);
}

// tensors: [{name, rows, cols, type, fillRows(first, count, out: Float32Array)}], a matrix of
// `rows` rows of `cols` values (a vector: rows = 1, written with one dimension).
export function writeGguf(path, metadata, tensors) {
  const header = new Bytes();
  header.push(Buffer.from("GGUF", "ascii"));
  header.u32(3);
  header.u64(tensors.length);
  header.u64(Object.keys(metadata).length);
  for (const [key, [type, ...rest]] of Object.entries(metadata)) {
    header.string(key);
    header.u32(T[type]);
    if (type === "array") {
      const [elementType, values] = rest;
      header.u32(T[elementType]);
      header.u64(values.length);
      for (const v of values) writeValue(header, elementType, v);
    } else {
      writeValue(header, type, rest[0]);
    }
  }
  const align = (n) => Math.ceil(n / ALIGNMENT) * ALIGNMENT;
  let offset = 0;
  for (const t of tensors) {
    header.string(t.name);
    const dims = t.rows === 1 ? [t.cols] : [t.cols, t.rows];
    header.u32(dims.length);
    for (const d of dims) header.u64(d);
    header.u32(TENSOR_TYPES[t.type].id);
    header.u64(offset);
    t.offset = offset;
    offset = align(offset + t.rows * rowBytes(t.type, t.cols));
  }
  const head = header.buffer();
  const fd = fs.openSync(path, "w");
  try {
    fs.writeSync(fd, head);
    fs.writeSync(fd, Buffer.alloc(align(head.length) - head.length));
    let written = 0;
    for (const t of tensors) {
      if (t.offset > written) fs.writeSync(fd, Buffer.alloc(t.offset - written));
      const chunkRows = Math.max(1, Math.floor((1 << 20) / t.cols));
      const values = new Float32Array(chunkRows * t.cols);
      const out = Buffer.alloc(chunkRows * rowBytes(t.type, t.cols));
      for (let first = 0; first < t.rows; first += chunkRows) {
        const count = Math.min(chunkRows, t.rows - first);
        t.fillRows(first, count, values);
        let at = 0;
        for (let r = 0; r < count; ++r)
          at = encodeRow(t.type, values.subarray(r * t.cols, (r + 1) * t.cols), out, at);
        fs.writeSync(fd, out, 0, at);
      }
      written = t.offset + t.rows * rowBytes(t.type, t.cols);
    }
  } finally {
    fs.closeSync(fd);
  }
}
