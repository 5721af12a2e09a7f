#include "layers/rope.h"

#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/routing_rope.h"

namespace strata {

double yarn_get_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

namespace {

// transformers' _compute_yarn_parameters: blend interpolated and extrapolated frequencies
// with a linear ramp between the beta_fast and beta_slow correction dimensions.
std::vector<float> yarn_inv_freq(const RopeConfig& r, int dim,
                                 const std::vector<float>& base_freq) {
  const double base = r.theta, factor = r.factor;
  const double orig = r.original_max_position_embeddings;
  if (orig <= 0) fail("config.json: yarn rope scaling needs original_max_position_embeddings");
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(orig / (rotations * 2 * M_PI))) / (2 * std::log(base));
  };
  // transformers rounds the range to whole dimensions unless the config says truncate: false.
  double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
  if (r.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // avoid a division by zero in the ramp
  std::vector<float> out(base_freq.size());
  for (size_t i = 0; i < base_freq.size(); ++i) {
    const float extrapolation = base_freq[i];
    const float interpolation = base_freq[i] / static_cast<float>(factor);
    float ramp = static_cast<float>((static_cast<double>(i) - low) / (high - low));
    ramp = std::clamp(ramp, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    out[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return out;
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const RopeConfig& r, int rotary_dim, bool interleaved)
    : rotary_dim_(rotary_dim), interleaved_(interleaved) {
  STRATA_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0, "rotary dim {}", rotary_dim);
  const int half = rotary_dim / 2;
  inv_freq_.resize(half);
  for (int i = 0; i < half; ++i) {
    // As transformers computes it: in f32, base ** (2i / dim).
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    inv_freq_[i] = 1.0f / std::pow(static_cast<float>(r.theta), exponent);
  }
  if (r.type == "default") {
  } else if (r.type == "linear") {
    for (auto& f : inv_freq_) f /= static_cast<float>(r.factor);
  } else if (r.type == "llama3") {
    const double old_ctx = r.original_max_position_embeddings;
    if (old_ctx <= 0)
      fail("config.json: llama3 rope scaling needs original_max_position_embeddings");
    const double low_wavelen = old_ctx / r.low_freq_factor,
                 high_wavelen = old_ctx / r.high_freq_factor;
    for (auto& f : inv_freq_) {
      const double wavelen = 2 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = static_cast<float>(f / r.factor);
      } else if (wavelen >= high_wavelen) {
        const double smooth =
            (old_ctx / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
        f = static_cast<float>((1 - smooth) * f / r.factor + smooth * f);
      }
    }
  } else if (r.type == "yarn") {
    inv_freq_ = yarn_inv_freq(r, rotary_dim, inv_freq_);
    // transformers (and DeepSeek): the ratio only when both mscale and mscale_all_dim are
    // given and non-zero, else the paper's 0.1 ln(factor) + 1.
    if (r.attention_factor) {
      cos_sin_scale_ = static_cast<float>(*r.attention_factor);
    } else if (r.mscale != 0.0 && r.mscale_all_dim != 0.0) {
      cos_sin_scale_ = static_cast<float>(yarn_get_mscale(r.factor, r.mscale) /
                                          yarn_get_mscale(r.factor, r.mscale_all_dim));
    } else {
      cos_sin_scale_ = static_cast<float>(yarn_get_mscale(r.factor, 1.0));
    }
  } else {
    fail("rope type '{}' is not supported (supported: default, linear, llama3, yarn)", r.type);
  }
}

void RotaryEmbedding::apply(float* x, int64_t num_tokens, int num_heads, int64_t row_stride,
                            int64_t head_stride, const int32_t* positions) const {
  cpu::rope(x, num_tokens, num_heads, row_stride, head_stride, positions, inv_freq_.data(),
            rotary_dim_, interleaved_, cos_sin_scale_);
}

RopeTable RotaryEmbedding::table(ParamLoader& w) const {
  RopeTable t;
  Tensor host({static_cast<int64_t>(inv_freq_.size())});
  std::copy(inv_freq_.begin(), inv_freq_.end(), host.data());
  t.inv_freq = w.upload(host, DType::F32);
  t.rotary_dim = rotary_dim_;
  t.interleaved = interleaved_;
  t.cos_sin_scale = cos_sin_scale_;
  return t;
}

}  // namespace strata
