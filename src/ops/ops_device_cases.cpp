// The case table of ops_device_test.cpp, generated from the op list. Every case runs the same
// code on CpuOps and CudaOps; `dt` picks the dtype a tensor has on the device under test (the
// CPU reference is f32 throughout).
#include "ops/ops_device_cases.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/dtype.h"
#include "ops/logit_edits.h"
#include "ops/logprobs.h"
#include "ops/sampling.h"
#include "ops/token_masks.h"

namespace strata::ops_test {

Tensor random(std::vector<int64_t> shape, Rng& rng, float scale) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data()[i] = bf16_to_f32(f32_to_bf16(rng.uniform(-scale, scale)));
  return t;
}

namespace {

using Outputs = std::vector<Tensor>;
constexpr DType F32 = DType::F32, BF16 = DType::BF16, I32 = DType::I32;

DType dt(const Ops& ops, DType want) {
  return ops.device().is_host() && want != I32 ? F32 : want;
}
// CpuOps::upload shares the host tensor, and ops write in place: each run gets its own copy.
Tensor put(Ops& ops, const Tensor& host, DType want) {
  return ops.device().is_host() ? host.clone() : ops.upload(host, want);
}
// A weight matrix in the ops' weight dtype (CpuOps may keep it in bf16 or int8: put would
// hand it the f32 host tensor).
Tensor put_weight(Ops& ops, const Tensor& host) {
  return ops.upload(host.clone(), ops.weight_dtype());
}
Tensor get(Ops& ops, const Tensor& t) {
  return ops.device().is_host() ? t.clone() : ops.to_host(t);
}
Tensor ints(Ops& ops, const std::vector<int32_t>& v, std::vector<int64_t> shape) {
  Tensor t(std::move(shape), I32);
  std::memcpy(t.raw(), v.data(), v.size() * sizeof(int32_t));
  return put(ops, t, I32);
}
const char* name(DType d) {
  return d == BF16 ? "bf16" : "f32";
}
double tol_for(DType out) {
  return out == BF16 ? 1e-2 : 1e-4;
}
// The last is gated only (gpt-oss's clamped SwiGLU).
Activation acts[] = {Activation::Silu, Activation::Gelu, Activation::GeluTanh, Activation::Relu2,
                     Activation::ClampedSwiglu};
const char* act_names[] = {"silu", "gelu", "gelutanh", "relu2", "clamped_swiglu"};

// The same floats element for element (-inf equal to -inf, which a tolerance cannot say).
void expect_same_floats(const Outputs& cpu, const Outputs& cuda) {
  ASSERT_EQ(cpu[0].numel(), cuda[0].numel());
  for (int64_t i = 0; i < cpu[0].numel(); ++i)
    ASSERT_EQ(cpu[0].data()[i], cuda[0].data()[i]) << "element " << i;
}

void add(std::vector<Case>& cases, std::string n, double tol,
         std::function<Outputs(Ops&, Rng&)> run) {
  Case c;
  c.seed = cases.size() + 1;
  c.name = std::move(n);
  c.tol = tol;
  c.run = std::move(run);
  cases.push_back(std::move(c));
}

void memory_cases(std::vector<Case>& cases) {
  for (int64_t rows : {1, 129})
    for (int64_t cols : {1, 257})
      for (DType s : {F32, BF16})
        for (DType d : {F32, BF16})
          add(cases, fmt::format("copy_r{}_c{}_{}_to_{}_strided", rows, cols, name(s), name(d)),
              1e-7, [=](Ops& ops, Rng& rng) {
                const Tensor src = put(ops, random({rows, cols + 7}, rng), s);
                Tensor dst = put(ops, random({rows, cols + 5}, rng), d);
                Tensor view = dst.slice_cols(2, cols);
                ops.copy(src.slice_cols(3, cols), view);
                return Outputs{get(ops, dst)};
              });
  for (int64_t rows : {3, 129})
    for (DType d : {F32, BF16}) {
      add(cases, fmt::format("fill_r{}_{}_strided", rows, name(d)), tol_for(d),
          [=](Ops& ops, Rng& rng) {
            Tensor t = put(ops, random({rows, 260}, rng), d);
            Tensor view = t.slice_cols(1, 257);
            ops.fill(view, 0.3f);
            return Outputs{get(ops, t)};
          });
      add(cases, fmt::format("scale_r{}_{}_strided", rows, name(d)), d == F32 ? 1e-6 : 1e-2,
          [=](Ops& ops, Rng& rng) {
            Tensor t = put(ops, random({rows, 260}, rng), d);
            Tensor view = t.slice_cols(2, 255);
            ops.scale(view, -0.7f);
            return Outputs{get(ops, t)};
          });
      for (DType y : {F32, BF16})
        add(cases, fmt::format("add_r{}_{}_plus_{}_strided", rows, name(d), name(y)),
            d == F32 ? 1e-6 : 1e-2, [=](Ops& ops, Rng& rng) {
              Tensor x = put(ops, random({rows, 300}, rng), d);
              const Tensor other = put(ops, random({rows, 290}, rng), y);
              Tensor view = x.slice_cols(5, 257);
              ops.add(view, other.slice_cols(1, 257));
              return Outputs{get(ops, x)};
            });
    }
  for (int64_t rows : {1, 129})
    for (DType d : {F32, BF16})
      add(cases, fmt::format("gather_rows_r{}_{}_strided", rows, name(d)), 1e-7,
          [=](Ops& ops, Rng& rng) {
            const Tensor x = put(ops, random({129, 84}, rng), d);
            std::vector<int32_t> idx(rows);
            for (auto& i : idx) i = rng.below(129);
            Tensor out = ops.empty({rows, 80}, dt(ops, d));
            ops.gather_rows(x.slice_cols(2, 80), ints(ops, idx, {rows}), out);
            return Outputs{get(ops, out)};
          });
  for (int64_t t : {1, 37})
    for (int64_t width : {64, 257})
      add(cases, fmt::format("embedding_t{}_w{}", t, width), 1e-7, [=](Ops& ops, Rng& rng) {
        const Tensor table = put_weight(ops, random({1000, width}, rng));
        std::vector<int32_t> ids(t);
        for (auto& i : ids) i = rng.below(1000);
        Tensor out = ops.empty({t, width});
        ops.embedding(table, ints(ops, ids, {t}), out);
        return Outputs{get(ops, out)};
      });
  for (int64_t rows : {1, 37})
    for (int64_t vocab : {1000, 50257})
      for (DType d : {F32, BF16})
        add(cases, fmt::format("argmax_r{}_v{}_{}_strided_ties", rows, vocab, name(d)), 0,
            [=](Ops& ops, Rng& rng) {
              Tensor host = random({rows, vocab + 3}, rng);
              for (int64_t r = 0; r < rows; ++r) {  // two equal maxima: the first one wins
                const int64_t j = (r * 7919) % (vocab - 20);
                host.row(r)[1 + j] = host.row(r)[1 + j + 13] = 5.0f;
              }
              const Tensor logits = put(ops, host, d);
              Tensor ids = ops.empty({rows}, I32);
              ops.argmax(logits.slice_cols(1, vocab), ids);
              return Outputs{get(ops, ids)};
            });
  // Sampling: every control on its own and together, greedy rows among sampled ones, top-k
  // ties, strided logits. The draw is a function of (logits, row) alone, so the devices agree
  // token for token (ops/sampling.h).
  for (int64_t vocab : {1000, 50257})
    add(cases, fmt::format("sample_r40_v{}_strided_controls", vocab), 0, [=](Ops& ops, Rng& rng) {
      constexpr int64_t rows = 40;
      Tensor host = random({rows, vocab + 5}, rng, 4.0f);
      std::vector<int32_t> packed(rows * kSamplingRowInts);
      for (int64_t r = 0; r < rows; ++r) {
        SamplingRow row;
        const int kind = static_cast<int>(r % 8);
        row.temperature = kind == 0 ? 0.0f : 0.3f + 0.2f * static_cast<float>(r % 5);
        if (kind == 2 || kind == 5 || kind == 7) row.top_k = 1 + static_cast<int>(r % 40);
        if (kind == 3 || kind == 5 || kind == 7)
          row.top_p = 0.5f + 0.05f * static_cast<float>(r % 9);
        if (kind == 4 || kind == 7) row.min_p = 0.02f * static_cast<float>(1 + r % 6);
        if (kind == 6) {  // ties at the k-th value: all of them stay
          row.top_k = 3;
          for (int j = 0; j < 5; ++j) host.row(r)[2 + j * 11] = 9.0f;
        }
        row.set_seed(1000 + static_cast<uint64_t>(r));
        row.step = static_cast<int32_t>(r * 3);
        row.pack(packed.data() + r * kSamplingRowInts);
      }
      const Tensor logits = put(ops, host, F32);
      Tensor ids = ops.empty({rows}, I32);
      ops.sample(logits.slice_cols(2, vocab), ints(ops, packed, {rows, kSamplingRowInts}), ids);
      return Outputs{get(ops, ids)};
    });
  // Logit edits: biases, repetition penalties on either sign, shifts and bans (-inf) on
  // strided logits, padding entries, rows and tokens at the edges. Exactly the same floats.
  for (int64_t vocab : {1000, 50257}) {
    Case c;
    c.seed = cases.size() + 1;
    c.name = fmt::format("edit_logits_r40_v{}_strided", vocab);
    c.run = [=](Ops& ops, Rng& rng) {
      constexpr int64_t rows = 40;
      const Tensor host = random({rows, vocab + 5}, rng, 4.0f);
      constexpr int capacity = 1024, used = 1000;
      std::vector<int32_t> packed(capacity * kLogitEditInts);
      for (int i = 0; i < capacity; ++i) {
        LogitEdit e;  // padding past `used`
        if (i < used) {
          e.row = i % rows;
          e.token = i < 2 * rows ? (i < rows ? 0 : static_cast<int>(vocab) - 1)
                                 : static_cast<int>((i / rows) * 37 % vocab);
          const int kind = i % 5;
          if (kind == 0 || kind == 3) e.bias = rng.uniform(-5.0f, 5.0f);
          if (kind == 1 || kind == 3) e.repetition = rng.uniform(0.5f, 2.0f);
          if (kind == 2 || kind == 3) e.shift = rng.uniform(-3.0f, 1.0f);
          if (kind == 4) e.shift = -std::numeric_limits<float>::infinity();
        }
        e.pack(packed.data() + i * kLogitEditInts);
      }
      Tensor logits = put(ops, host, F32);
      Tensor view = logits.slice_cols(2, vocab);
      ops.edit_logits(view, ints(ops, packed, {capacity, kLogitEditInts}));
      return Outputs{get(ops, logits)};
    };
    c.compare = expect_same_floats;
    cases.push_back(std::move(c));
  }
  // Grammar masks: rows masked or not, padding entries, a vocabulary that is not a multiple of
  // 64 (the last word part-used), strided logits. Exactly the same floats.
  for (int64_t vocab : {1000, 50257}) {
    Case c;
    c.seed = cases.size() + 1;
    c.name = fmt::format("mask_logits_r9_v{}_strided", vocab);
    c.run = [=](Ops& ops, Rng& rng) {
      constexpr int64_t rows = 9;
      constexpr int capacity = 8, used = 6;
      const int64_t width = 2 * token_mask_words(vocab);
      const Tensor host = random({rows, vocab + 3}, rng, 4.0f);
      std::vector<int32_t> masked(capacity, -1), masks(capacity * width, 0);
      for (int i = 0; i < used; ++i) {
        masked[i] = i == 0 ? static_cast<int32_t>(rows - 1) : i + 1;  // rows 0 and 1 unmasked
        for (int64_t j = 0; j < width; ++j)
          masks[i * width + j] = i == 1 ? -1 : static_cast<int32_t>(rng.next());  // all, or some
      }
      Tensor logits = put(ops, host, F32);
      Tensor view = logits.slice_cols(1, vocab);
      ops.mask_logits(view, ints(ops, masked, {capacity}), ints(ops, masks, {capacity, width}));
      return Outputs{get(ops, logits)};
    };
    c.compare = expect_same_floats;
    cases.push_back(std::move(c));
  }
  // Logprobs: the drawn token's and the top 20 with their ids, over rows full of ties (the
  // inputs are bf16-rounded: ties break to the lower id on every device), strided logits.
  for (int64_t vocab : {1000, 50257})
    for (int top : {0, 5, 20}) {
      Case c;
      c.seed = cases.size() + 1;
      c.name = fmt::format("logprobs_r37_v{}_top{}_strided", vocab, top);
      c.run = [=](Ops& ops, Rng& rng) {
        constexpr int64_t rows = 37;
        const Tensor logits = put(ops, random({rows, vocab + 3}, rng, 6.0f), F32);
        std::vector<int32_t> drawn(rows);
        for (auto& t : drawn) t = rng.below(static_cast<int>(vocab));
        Tensor out = ops.empty({rows, logprob_row_width(top)}, F32);
        ops.logprobs(logits.slice_cols(1, vocab), ints(ops, drawn, {rows}), top, out);
        return Outputs{get(ops, out)};
      };
      c.compare = [top](const Outputs& cpu, const Outputs& cuda) {
        ASSERT_EQ(cpu[0].numel(), cuda[0].numel());
        const int width = logprob_row_width(top);
        for (int64_t i = 0; i < cpu[0].numel(); ++i) {
          const int at = static_cast<int>(i % width);
          const bool id = at >= kLogprobHead && (at - kLogprobHead) % 2 == 0;
          if (id)
            ASSERT_EQ(cpu[0].data()[i], cuda[0].data()[i]) << "token id at " << i;
          else
            ASSERT_NEAR(cpu[0].data()[i], cuda[0].data()[i], 1e-4) << "logprob at " << i;
        }
      };
      cases.push_back(std::move(c));
    }
}

void linear_cases(std::vector<Case>& cases) {
  struct Shape {
    int64_t in, out;
  };
  for (int64_t rows : {1, 3, 8, 13, 37, 257})
    for (Shape s : {Shape{64, 3}, Shape{257, 130}, Shape{1024, 96}, Shape{1288, 131}})
      for (int variant = 0; variant < 5; ++variant) {
        // 0: plain f32 x; 1: strided bf16 x, accumulate, bias; 2: strided f32 x into a
        // strided y, bias, accumulate; 3: bf16 x into a bf16 y, accumulate; 4: a bf16 x view
        // whose rows stay 16-byte aligned into a strided f32 y, accumulate (the residual add
        // of o_proj and down_proj).
        const DType xd = variant == 1 || variant == 3 || variant == 4 ? BF16 : F32;
        const DType yd = variant == 3 ? BF16 : F32;
        const bool x_strided = variant == 1 || variant == 2 || variant == 4,
                   y_strided = variant == 2 || variant == 4;
        const bool acc = variant != 0, bias = variant == 1 || variant == 2;
        const int64_t x_pad = variant == 4 ? 16 : 9, x_first = variant == 4 ? 8 : 4;
        add(cases,
            fmt::format("linear_r{}_in{}_out{}_x{}{}_y{}{}{}{}", rows, s.in, s.out, name(xd),
                        x_strided ? (variant == 4 ? "a" : "s") : "", name(yd), y_strided ? "s" : "",
                        acc ? "_acc" : "", bias ? "_bias" : ""),
            yd == BF16 ? 1e-2 : 1e-3, [=](Ops& ops, Rng& rng) {
              const Tensor xb = put(ops, random({rows, s.in + (x_strided ? x_pad : 0)}, rng), xd);
              const Tensor x = x_strided ? xb.slice_cols(x_first, s.in) : xb;
              const Tensor w =
                  put_weight(ops, random({s.out, s.in}, rng, 1.0f / std::sqrt(float(s.in))));
              const Tensor b = put(ops, random({s.out}, rng, 0.5f), F32);
              Tensor yb = put(ops, random({rows, s.out + (y_strided ? 6 : 0)}, rng), yd);
              Tensor y = y_strided ? yb.slice_cols(3, s.out) : yb;
              ops.linear(x, w, bias ? &b : nullptr, y, acc);
              return Outputs{get(ops, yb)};
            });
      }
  struct Head {
    int heads;
    int64_t k, n;
  };
  for (int64_t rows : {1, 37})
    for (Head h : {Head{4, 64, 80}, Head{4, 128, 576}, Head{16, 576, 64}})
      for (DType d : {F32, BF16})
        add(cases, fmt::format("head_linear_r{}_h{}_k{}_n{}_{}", rows, h.heads, h.k, h.n, name(d)),
            d == BF16 ? 1e-2 : 1e-3, [=](Ops& ops, Rng& rng) {
              const Tensor x = put(ops, random({rows, h.heads * h.k}, rng), d);
              const Tensor w =
                  put_weight(ops, random({h.heads * h.n, h.k}, rng, 1.0f / std::sqrt(float(h.k))));
              Tensor y = ops.empty({rows, h.heads * h.n}, dt(ops, d));
              ops.head_linear(x, w, h.heads, y);
              return Outputs{get(ops, y)};
            });
}

void norm_act_cases(std::vector<Case>& cases) {
  for (int64_t rows : {1, 129})
    for (int64_t width : {257, 1288, 4096, 8200})  // warp, register (2 and 4 slices), block
      for (DType out : {F32, BF16})
        for (float offset : {0.0f, 1.0f})
          add(cases,
              fmt::format("rms_norm_r{}_w{}_to_{}_offset{}", rows, width, name(out), int(offset)),
              tol_for(out), [=](Ops& ops, Rng& rng) {
                const Tensor x = put(ops, random({rows, width}, rng, 2.0f), F32);
                const Tensor w = put(ops, random({width}, rng, 0.5f), F32);
                Tensor y = ops.empty({rows, width}, dt(ops, out));
                ops.rms_norm(x, w, 1e-6f, offset, y);
                return Outputs{get(ops, y)};
              });
  // Per-head q/k norms in place on strided views of a fused qkv row.
  for (int64_t rows : {1, 37})
    for (int64_t hd : {64, 80, 576})
      add(cases, fmt::format("rms_norm_heads_inplace_r{}_hd{}", rows, hd), 1e-4,
          [=](Ops& ops, Rng& rng) {
            const int64_t hq = 4, hkv = 2;
            Tensor qkv = put(ops, random({rows, (hq + 2 * hkv) * hd}, rng, 2.0f), F32);
            const Tensor wq = put(ops, random({hd}, rng), F32),
                         wk = put(ops, random({hd}, rng), F32);
            Tensor q = qkv.slice_cols(0, hq * hd), k = qkv.slice_cols(hq * hd, hkv * hd);
            ops.rms_norm(q, wq, 1e-6f, 0.0f, q);
            ops.rms_norm(k, wk, 1e-6f, 1.0f, k);
            return Outputs{get(ops, qkv)};
          });
  // Whole rows of bf16 views normalized in place: aligned for the register kernel's 8-byte
  // accesses (column 8) and not (column 2, the block kernel's).
  for (int64_t first : {8, 2})
    add(cases, fmt::format("rms_norm_bf16_view_inplace_r5_w2048_at{}", first), 1e-2,
        [=](Ops& ops, Rng& rng) {
          Tensor xb = put(ops, random({5, 2048 + 10}, rng, 2.0f), BF16);
          Tensor x = xb.slice_cols(first, 2048);
          const Tensor w = put(ops, random({2048}, rng), BF16);
          ops.rms_norm(x, w, 1e-5f, 0.0f, x);
          return Outputs{get(ops, xb)};
        });
  add(cases, "rms_norm_heads_bf16_inplace_r37_hd80", 1e-2, [](Ops& ops, Rng& rng) {
    Tensor x = put(ops, random({37, 240}, rng, 2.0f), BF16);
    const Tensor w = put(ops, random({80}, rng), F32);
    ops.rms_norm(x, w, 1e-5f, 0.0f, x);
    return Outputs{get(ops, x)};
  });
  for (int a = 0; a < 5; ++a)
    for (int64_t rows : {1, 129})
      for (int io = 0; io < 3; ++io) {
        const DType in = io == 2 ? BF16 : F32, out = io == 1 ? F32 : BF16;
        add(cases,
            fmt::format("gated_{}_r{}_{}_to_{}_strided", act_names[a], rows, name(in), name(out)),
            in == F32 && out == F32 ? 1e-4 : 1e-2, [=](Ops& ops, Rng& rng) {
              const Tensor gu = put(ops, random({rows, 2 * 257 + 3}, rng, 3.0f), in);
              Tensor y = ops.empty({rows, 257}, dt(ops, out));
              ops.gated_activation(gu.slice_cols(1, 2 * 257), acts[a], y);
              return Outputs{get(ops, y)};
            });
        if (io == 2 || acts[a] == Activation::ClampedSwiglu) continue;
        add(cases, fmt::format("act_{}_r{}_f32s_to_{}", act_names[a], rows, name(out)),
            tol_for(out), [=](Ops& ops, Rng& rng) {
              const Tensor x = put(ops, random({rows, 305}, rng, 3.0f), F32);
              Tensor y = ops.empty({rows, 300}, dt(ops, out));
              ops.activation(x.slice_cols(5, 300), acts[a], y);
              return Outputs{get(ops, y)};
            });
      }
}

void rope_cases(std::vector<Case>& cases) {
  struct R {
    const char* name;
    int heads;
    int64_t head_stride, total, start, cols;
    int rotary;
    bool interleaved;
    float scale;
  };
  const R rs[] = {
      {"neox_hd128", 4, 128, 6 * 128, 0, 4 * 128, 128, false, 1.0f},
      {"interleaved_hd64_kslice", 2, 64, 3 * 64, 64, 2 * 64, 64, true, 1.0f},
      {"partial_hd80_rot40", 3, 80, 4 * 80, 0, 3 * 80, 40, false, 1.0f},
      {"mla_qpe_stride192_rot64", 3, 192, 3 * 192, 128, 3 * 192 - 128, 64, true, 1.2f},
  };
  for (const R& r : rs)
    for (int64_t rows : {1, 37})
      add(cases, fmt::format("rope_{}_r{}", r.name, rows), 1e-4, [=](Ops& ops, Rng& rng) {
        Tensor buf = put(ops, random({rows, r.total}, rng), F32);
        Tensor x = buf.slice_cols(r.start, r.cols);
        std::vector<int32_t> pos(rows);
        for (auto& p : pos) p = rng.below(4096);
        Tensor inv({r.rotary / 2});
        for (int i = 0; i < r.rotary / 2; ++i)
          inv.data()[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / r.rotary));
        RopeTable table{put(ops, inv, F32), r.rotary, r.interleaved, r.scale};
        ops.rope(x, r.heads, r.head_stride, ints(ops, pos, {rows}), table);
        return Outputs{get(ops, buf)};
      });
}

void moe_cases(std::vector<Case>& cases) {
  struct Rt {
    const char* name;
    int e, k;
    bool sigmoid;
    int groups, topk_groups;
    bool top_two, bias, normalize;
    float scaling;
  };
  const Rt routers[] = {
      {"mixtral_e8_top2", 8, 2, false, 1, 1, false, false, true, 1.0f},
      {"e8_top2_ties", 8, 2, false, 1, 1, false, false, false, 1.0f},
      {"dsv2_e64_top6_g8_max", 64, 6, false, 8, 3, false, false, false, 16.0f},
      {"dsv3_e256_top8_g8_toptwo_bias", 256, 8, true, 8, 4, true, true, true, 2.5f},
      {"sigmoid_e128_top6_bias", 128, 6, true, 1, 1, false, true, true, 2.5f},
  };
  for (const Rt& r : routers)
    for (int64_t t : {1, 37, 129}) {
      Case c;
      c.seed = cases.size() + 1;
      c.name = fmt::format("route_{}_t{}", r.name, t);
      RouterConfig cfg;
      cfg.num_experts = r.e, cfg.top_k = r.k;
      cfg.scoring = r.sigmoid ? RouterScoring::Sigmoid : RouterScoring::Softmax;
      cfg.num_groups = r.groups, cfg.topk_groups = r.topk_groups;
      cfg.group_score = r.top_two ? GroupScore::TopTwoSum : GroupScore::Max;
      cfg.correction_bias = r.bias, cfg.normalize_topk = r.normalize;
      cfg.routed_scaling_factor = r.scaling;
      c.run = [=](Ops& ops, Rng& rng) {
        Tensor logits = random({t, r.e}, rng, 4.0f);
        for (int64_t i = 0; i < t; i += 3) logits.row(i)[5] = logits.row(i)[2];  // exact ties
        const Tensor bias = random({r.e}, rng, 0.1f);
        // The choice values before group masking (host, f64): what a near-tie is judged by.
        Tensor choice({t, r.e});
        for (int64_t i = 0; i < t; ++i) {
          const float* l = logits.row(i);
          double m = l[0], sum = 0.0;
          for (int j = 0; j < r.e; ++j) m = std::max(m, double(l[j]));
          for (int j = 0; j < r.e; ++j) sum += std::exp(l[j] - m);
          for (int j = 0; j < r.e; ++j)
            choice.row(i)[j] = float(
                (r.sigmoid ? 1.0 / (1.0 + std::exp(-double(l[j]))) : std::exp(l[j] - m) / sum) +
                (r.bias ? bias.data()[j] : 0.0));
        }
        const Tensor dev_bias = put(ops, bias, F32);
        Tensor ids = ops.empty({t, r.k}, I32), w = ops.empty({t, r.k});
        ops.route(cfg, put(ops, logits, F32), r.bias ? &dev_bias : nullptr, ids, w);
        return Outputs{get(ops, ids), get(ops, w), choice};
      };
      c.compare = [t, k = r.k, name = c.name](const Outputs& cpu, const Outputs& dev) {
        const int32_t* a = cpu[0].ptr<int32_t>();
        const int32_t* b = dev[0].ptr<int32_t>();
        const Tensor& choice = cpu[2];
        for (int64_t i = 0; i < t; ++i) {
          bool flipped = false;
          for (int j = 0; j < k; ++j) {
            const int64_t at = i * k + j;
            if (a[at] == b[at]) continue;
            ASSERT_TRUE(b[at] >= 0 && b[at] < choice.cols()) << name << " token " << i;
            // Only a near-tie may order differently (the devices' exp differ in the last bit).
            EXPECT_NEAR(choice.row(i)[a[at]], choice.row(i)[b[at]], 1e-5)
                << name << ": token " << i << " slot " << j << " cpu expert " << a[at]
                << " cuda expert " << b[at];
            flipped = true;
          }
          if (flipped) continue;
          for (int j = 0; j < k; ++j) {
            const float x = cpu[1].data()[i * k + j], y = dev[1].data()[i * k + j];
            EXPECT_NEAR(x, y, 1e-5 * std::max(1.0f, std::fabs(x)))
                << name << ": token " << i << " slot " << j << " weight";
          }
        }
      };
      cases.push_back(std::move(c));
    }

  struct Ex {
    const char* name;
    int e, k;
    int64_t hidden, inter;
    bool gated;
    Activation act;
    bool bias;
    int64_t t;
    DType x;
    bool strided;
  };
  const Ex experts[] = {
      {"e8_top2_t1_silu", 8, 2, 64, 80, true, Activation::Silu, false, 1, F32, false},
      {"e8_top2_t37_silu", 8, 2, 64, 80, true, Activation::Silu, false, 37, F32, false},
      {"e8_top2_t37_relu2_bias_bf16s", 8, 2, 96, 72, false, Activation::Relu2, true, 37, BF16,
       true},
      {"e4_top2_t257_gelutanh_multitile", 4, 2, 128, 96, true, Activation::GeluTanh, false, 257,
       F32, false},
      {"e64_top6_t129_gelu_strided", 64, 6, 64, 48, true, Activation::Gelu, true, 129, F32, true},
      {"e8_top2_t37_clamped_swiglu_bias", 8, 2, 64, 72, true, Activation::ClampedSwiglu, true, 37,
       F32, false},
  };
  for (const Ex& x : experts)
    add(cases, fmt::format("experts_{}", x.name), 1e-2, [=](Ops& ops, Rng& rng) {
      const int64_t pad = x.strided ? 5 : 0, in_rows = (x.gated ? 2 : 1) * x.inter;
      const Tensor xb = put(ops, random({x.t, x.hidden + pad}, rng), dt(ops, x.x));
      std::vector<int32_t> ids(x.t * x.k);
      std::vector<int32_t> perm(x.e);
      for (int64_t i = 0; i < x.t; ++i) {  // k distinct experts per token
        std::iota(perm.begin(), perm.end(), 0);
        for (int j = 0; j < x.k; ++j) {
          std::swap(perm[j], perm[j + rng.below(x.e - j)]);
          ids[i * x.k + j] = perm[j];
        }
      }
      Tensor weights({x.t, int64_t{x.k}});
      for (int64_t i = 0; i < weights.numel(); ++i) weights.data()[i] = rng.uniform(0.0f, 1.0f);
      ExpertWeights w;
      w.num_experts = x.e, w.hidden = static_cast<int>(x.hidden);
      w.intermediate = static_cast<int>(x.inter), w.gated = x.gated, w.activation = x.act;
      w.w_in = put_weight(
          ops, random({x.e * in_rows, x.hidden}, rng, 1.0f / std::sqrt(float(x.hidden))));
      w.w_down =
          put_weight(ops, random({x.e * x.hidden, x.inter}, rng, 1.0f / std::sqrt(float(x.inter))));
      if (x.bias) {
        w.b_in = put(ops, random({x.e * in_rows}, rng, 0.1f), F32);
        w.b_down = put(ops, random({x.e * x.hidden}, rng, 0.1f), F32);
      }
      Tensor out = put(ops, random({x.t, x.hidden}, rng), F32);
      ops.experts(w, xb.slice_cols(pad, x.hidden), ints(ops, ids, {x.t, int64_t{x.k}}),
                  put(ops, weights, F32), out);
      return Outputs{get(ops, out)};
    });
}

}  // namespace

void expect_close(const Tensor& ref, const Tensor& got, double tol, const std::string& what) {
  ASSERT_EQ(ref.numel(), got.numel()) << what;
  ASSERT_EQ(ref.dtype(), got.dtype()) << what;
  if (ref.dtype() == DType::I32) {
    for (int64_t i = 0; i < ref.numel(); ++i)
      ASSERT_EQ(ref.ptr<int32_t>()[i], got.ptr<int32_t>()[i]) << what << ": element " << i;
    return;
  }
  double scale = 0.0, err = 0.0;
  int64_t worst = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = ref.data()[i], b = got.data()[i];
    ASSERT_TRUE(std::isfinite(b)) << what << ": element " << i << " is " << b;
    scale = std::max(scale, std::fabs(a));
    if (std::fabs(a - b) > err) err = std::fabs(a - b), worst = i;
  }
  EXPECT_LE(err, tol * std::max(scale, 1e-30))
      << what << ": worst element " << worst << " of " << ref.numel() << ", reference "
      << ref.data()[worst] << " got " << got.data()[worst] << " (output scale " << scale << ")";
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  memory_cases(cases);
  linear_cases(cases);
  norm_act_cases(cases);
  rope_cases(cases);
  moe_cases(cases);
  recurrent_cases(cases);
  return cases;
}

}  // namespace strata::ops_test
