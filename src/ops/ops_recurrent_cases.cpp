// The recurrent-layer op cases of ops_device_test.cpp (Mamba2 and LFM2's short conv: causal conv
// with and without SiLU, elementwise gates, selective scan in
// its decode and SSD chunked forms, gated RMS norm, column scaling) at awkward sizes: one token,
// lengths that are not multiples of the chunk, groups 1 and > 1, requests that resume from
// their slot and requests that start fresh, state slots out of order, f32 and bf16 state.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "ops/ops_device_cases.h"

namespace strata::ops_test {

namespace {

using Outputs = std::vector<Tensor>;

Tensor put(Ops& ops, const Tensor& host, DType want) {
  if (ops.device().is_host() && want == DType::BF16) {  // a bf16 state on the CPU, too
    Tensor t(host.shape(), DType::BF16);
    for (int64_t i = 0; i < host.numel(); ++i) t.ptr<uint16_t>()[i] = f32_to_bf16(host.data()[i]);
    return t;
  }
  return ops.device().is_host() ? host.clone() : ops.upload(host, want);
}

Tensor get(Ops& ops, const Tensor& t) {
  if (!t.on_host()) return ops.to_host(t);
  if (t.dtype() == DType::F32) return t.clone();
  Tensor out(t.shape());
  convert_to_f32(t.dtype(), t.raw(), out.data(), static_cast<size_t>(t.numel()));
  return out;
}

Tensor seqs_tensor(Ops& ops, const std::vector<int32_t>& v) {
  Tensor t({static_cast<int64_t>(v.size() / kStateSeqInts), kStateSeqInts}, DType::I32);
  std::memcpy(t.raw(), v.data(), v.size() * sizeof(int32_t));
  return ops.device().is_host() ? t : ops.upload(t, DType::I32);
}

// Requests of `lens` tokens in slots slots[i] (out of order), the odd ones resuming from their
// slot's state: [begin, len, slot, resumes] each.
std::vector<int32_t> make_seqs(const std::vector<int>& lens, const std::vector<int>& slots) {
  std::vector<int32_t> v;
  int begin = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    v.insert(v.end(), {begin, lens[i], slots[i], static_cast<int32_t>(i % 2)});
    begin += lens[i];
  }
  return v;
}

int total(const std::vector<int>& lens) {
  int t = 0;
  for (int l : lens) t += l;
  return t;
}

void add(std::vector<Case>& cases, std::string n, double tol,
         std::function<Outputs(Ops&, Rng&)> run) {
  Case c;
  c.seed = 1000 + cases.size();
  c.name = std::move(n);
  c.tol = tol;
  c.run = std::move(run);
  cases.push_back(std::move(c));
}

const std::vector<int> kSlots = {3, 0, 2, 1};

}  // namespace

void recurrent_cases(std::vector<Case>& cases) {
  for (const std::vector<int>& lens :
       {std::vector<int>{1}, std::vector<int>{1, 1, 1}, std::vector<int>{7, 2, 1, 13}})
    for (int channels : {5, 130})
      for (bool bias : {true, false})
        for (bool silu : {true, false}) {
          // Mamba2's conv (kernel 4, SiLU) and LFM2's short conv (kernel 3, no activation).
          const int K = silu ? 4 : 3, T = total(lens);
          add(cases,
              fmt::format("causal_conv1d_t{}_b{}_c{}_k{}{}{}", T, lens.size(), channels, K,
                          bias ? "_bias" : "", silu ? "_silu" : ""),
              1e-5, [=](Ops& ops, Rng& rng) {
                const Tensor x = put(ops, random({T, channels + 9}, rng), DType::F32);
                const Tensor w = put(ops, random({channels, K}, rng), DType::F32);
                const Tensor b = put(ops, random({channels}, rng), DType::F32);
                Tensor states = put(ops, random({4, channels * (K - 1)}, rng), DType::F32);
                Tensor out = ops.empty({T, channels});
                const std::vector<int> slots(kSlots.begin(), kSlots.begin() + lens.size());
                ops.causal_conv1d(x.slice_cols(4, channels), w, bias ? &b : nullptr, silu,
                                  seqs_tensor(ops, make_seqs(lens, slots)), states, out);
                return Outputs{get(ops, out), get(ops, states)};
              });
        }

  struct Shape {
    int heads, head_dim, groups, state;
  };
  for (const Shape sh : {Shape{4, 8, 1, 16}, Shape{4, 16, 2, 64}, Shape{2, 64, 2, 128}})
    for (bool decode : {true, false})
      for (DType state_dtype : {DType::F32, DType::BF16}) {
        const std::vector<int> lens =
            decode ? std::vector<int>{1, 1, 1} : std::vector<int>{1, 16, 40, 3};
        const int T = total(lens), chunk = 16, H = sh.heads, P = sh.head_dim, N = sh.state;
        const int64_t inner = int64_t{H} * P, width = inner + 2 * int64_t{sh.groups} * N;
        add(cases,
            fmt::format("ssm_scan_{}_h{}_p{}_g{}_n{}_t{}_{}", decode ? "decode" : "chunked", H, P,
                        sh.groups, N, T, state_dtype == DType::BF16 ? "bf16_state" : "f32_state"),
            state_dtype == DType::BF16 ? 1e-2 : 1e-3, [=](Ops& ops, Rng& rng) {
              const Tensor xbc = put(ops, random({T, width + 3}, rng), DType::F32);
              const Tensor dt = put(ops, random({T, H + 2}, rng, 2.0f), DType::F32);
              SsmParams p;
              p.num_heads = H;
              p.head_dim = P;
              p.n_groups = sh.groups;
              p.state_size = N;
              p.chunk_size = chunk;
              p.dt_min = 0.001f;
              p.dt_max = 0.5f;
              Tensor a = random({H}, rng);
              for (int64_t h = 0; h < H; ++h) a.data()[h] = -std::exp(a.data()[h]);
              p.A = put(ops, a, DType::F32);
              p.D = put(ops, random({H}, rng), DType::F32);
              p.dt_bias = put(ops, random({H}, rng), DType::F32);
              Tensor states = put(ops, random({4, inner * N}, rng, 0.5f), state_dtype);
              Tensor y = ops.empty({T, inner});
              const std::vector<int> slots(kSlots.begin(), kSlots.begin() + lens.size());
              ops.ssm_scan(xbc.slice_cols(1, width), dt.slice_cols(2, H), p,
                           seqs_tensor(ops, make_seqs(lens, slots)), decode, states, y);
              return Outputs{get(ops, y), get(ops, states)};
            });
      }

  // The gated delta rule: one key head or several, several value heads per key head, one token,
  // lengths that split a chunk of 16, decode and prefill, f32 and bf16 state.
  struct DeltaShape {
    int k_heads, v_heads, k_dim, v_dim;
  };
  for (const DeltaShape sh :
       {DeltaShape{1, 1, 8, 8}, DeltaShape{2, 4, 16, 16}, DeltaShape{2, 6, 8, 4}})
    for (bool decode : {true, false})
      for (DType state_dtype : {DType::F32, DType::BF16}) {
        const std::vector<int> lens =
            decode ? std::vector<int>{1, 1, 1} : std::vector<int>{1, 16, 40, 3};
        const int T = total(lens), HV = sh.v_heads;
        const int64_t width = 2 * int64_t{sh.k_heads} * sh.k_dim + int64_t{HV} * sh.v_dim;
        const int64_t state_numel = int64_t{HV} * sh.k_dim * sh.v_dim;
        add(cases,
            fmt::format("gated_delta_rule_{}_hk{}_hv{}_dk{}_dv{}_t{}_{}",
                        decode ? "decode" : "chunked", sh.k_heads, HV, sh.k_dim, sh.v_dim, T,
                        state_dtype == DType::BF16 ? "bf16_state" : "f32_state"),
            state_dtype == DType::BF16 ? 1e-2 : 1e-4, [=](Ops& ops, Rng& rng) {
              const Tensor qkv = put(ops, random({T, width + 5}, rng), DType::F32);
              const Tensor ba = put(ops, random({T, 2 * HV + 3}, rng, 2.0f), DType::F32);
              DeltaNetParams p;
              p.num_k_heads = sh.k_heads;
              p.num_v_heads = HV;
              p.k_dim = sh.k_dim;
              p.v_dim = sh.v_dim;
              p.chunk_size = 16;
              Tensor A = random({HV}, rng);
              for (int64_t h = 0; h < HV; ++h) A.data()[h] = -std::exp(A.data()[h]);
              p.A = put(ops, A, DType::F32);
              p.dt_bias = put(ops, random({HV}, rng), DType::F32);
              Tensor states = put(ops, random({4, state_numel}, rng, 0.5f), state_dtype);
              Tensor y = ops.empty({T, int64_t{HV} * sh.v_dim});
              const std::vector<int> slots(kSlots.begin(), kSlots.begin() + lens.size());
              ops.gated_delta_rule(qkv.slice_cols(2, width), ba.slice_cols(1, HV),
                                   ba.slice_cols(1 + HV, HV), p,
                                   seqs_tensor(ops, make_seqs(lens, slots)), decode, states, y);
              return Outputs{get(ops, y), get(ops, states)};
            });
      }

  for (int64_t rows : {1, 37})
    for (int groups : {1, 4})
      for (bool weighted : {true, false})
        for (bool before : {false, true}) {
          if (!weighted && before) continue;  // the gate alone has no order
          add(cases,
              fmt::format("gated_rms_norm_r{}_g{}{}{}", rows, groups, weighted ? "_weight" : "",
                          before ? "_norm_first" : ""),
              1e-2, [=](Ops& ops, Rng& rng) {
                const int width = 96;
                const Tensor y = put(ops, random({rows, width}, rng), DType::F32);
                const Tensor z = put(ops, random({rows, width + 11}, rng, 3.0f), DType::F32);
                const Tensor w = put(ops, random({width}, rng), DType::F32);
                Tensor out = ops.empty_activation({rows, width});
                ops.gated_rms_norm(y, z.slice_cols(5, width), weighted ? &w : nullptr, groups,
                                   1e-5f, before, out, {});
                return Outputs{get(ops, out)};
              });
        }
  // Groups spanning tensor-parallel ranks: this rank's sums of squares (into a strided column
  // block, as the layer lays them out for its all-reduce), then the norm by given sums of
  // groups 3x wider than this rank's part of them.
  for (int64_t rows : {1, 37})
    for (int groups : {1, 4})
      for (bool before : {false, true})
        add(cases,
            fmt::format("gated_rms_norm_spanning_r{}_g{}{}", rows, groups,
                        before ? "_norm_first" : ""),
            1e-2, [=](Ops& ops, Rng& rng) {
              const int width = 96;
              const Tensor y = put(ops, random({rows, width}, rng), DType::F32);
              const Tensor z = put(ops, random({rows, width + 11}, rng, 3.0f), DType::F32);
              const Tensor w = put(ops, random({width}, rng), DType::F32);
              Tensor sums = ops.empty({rows, groups + 2});
              ops.fill(sums, 0.0f);
              Tensor mine = sums.slice_cols(1, groups);
              ops.gated_sum_squares(y, z.slice_cols(5, width), groups, before, mine);
              // Every other rank's part adds as much again, twice: groups 3x as wide.
              ops.scale(sums, 3.0f);
              Tensor out = ops.empty_activation({rows, width});
              ops.gated_rms_norm(y, z.slice_cols(5, width), &w, groups, 1e-5f, before, out,
                                 {&mine, 3 * width / groups});
              return Outputs{get(ops, sums), get(ops, out)};
            });

  // The gates: strided f32 factors (a full matrix or one per row, plain or through a
  // sigmoid) into f32 or the activation dtype, and in place.
  for (bool activation_out : {false, true})
    for (bool per_row : {false, true})
      for (bool sigmoid : {false, true})
        add(cases,
            fmt::format("mul_r5_c67_strided{}{}{}", per_row ? "_per_row" : "",
                        sigmoid ? "_sigmoid" : "", activation_out ? "_activation" : ""),
            activation_out ? 1e-2 : 1e-5, [=](Ops& ops, Rng& rng) {
              const Tensor a = put(ops, random({5, 3 * 67}, rng), DType::F32);
              const Tensor b = put(ops, random({5, 70}, rng, 3.0f), DType::F32);
              Tensor out = activation_out ? ops.empty_activation({5, 67}) : ops.empty({5, 67});
              const Tensor factor = per_row ? b.slice_cols(3, 1) : b.slice_cols(3, 67);
              ops.mul(a.slice_cols(67, 67), factor, sigmoid, out);
              return Outputs{get(ops, out)};
            });
  add(cases, "mul_in_place_sigmoid", 1e-5, [](Ops& ops, Rng& rng) {
    Tensor a = put(ops, random({3, 40}, rng), DType::F32);
    const Tensor b = put(ops, random({3, 40}, rng, 3.0f), DType::F32);
    ops.mul(a, b, true, a);
    return Outputs{get(ops, a)};
  });

  add(cases, "scale_columns_r3_c100_strided", 1e-6, [](Ops& ops, Rng& rng) {
    Tensor x = put(ops, random({3, 104}, rng), DType::F32);
    const Tensor s = put(ops, random({100}, rng, 4.0f), DType::F32);
    Tensor view = x.slice_cols(2, 100);
    ops.scale_columns(view, s);
    return Outputs{get(ops, x)};
  });
}

}  // namespace strata::ops_test
