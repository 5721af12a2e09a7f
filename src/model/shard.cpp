#include "model/shard.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "model/config.h"

namespace strata {

namespace {

// Larger groups than this are not one machine's, nor a plausible typo's fix.
constexpr int kLargestSuggestedTpSize = 64;

bool has_layer(const ModelConfig& c, bool (*pred)(const LayerSpec&)) {
  for (const LayerSpec& l : c.layers)
    if (pred(l)) return true;
  return false;
}

bool splits_groups(int groups, int tp) {
  return groups > 0 && (groups % tp == 0 || tp % groups == 0);
}

// The problems of the rules at `tp`, empty when they hold. The rules follow the layers that
// shard: GQA attention splits its query heads and its KV heads (or replicates them), dense MLPs
// and experts their intermediate width, the LM head the vocabulary (uneven: the last shard is
// narrower).
std::vector<std::string> rule_problems(const ModelConfig& c, int tp) {
  std::vector<std::string> out;
  // Query heads split in GQA and MLA layers alike; KV heads exist in GQA layers only (MLA's
  // latent is per token).
  const bool attention = has_layer(c, [](const LayerSpec& l) { return l.has_kv_cache(); });
  const bool gqa = has_layer(c, [](const LayerSpec& l) {
    return l.attention == AttentionKind::Full || l.attention == AttentionKind::Sliding;
  });
  if (attention && c.num_attention_heads % tp != 0)
    out.push_back(
        fmt::format("num_attention_heads {} is not divisible by it", c.num_attention_heads));
  if (gqa && !splits_groups(c.num_kv_heads, tp))
    out.push_back(fmt::format(
        "num_key_value_heads {} is neither a multiple nor a divisor of it (KV heads are split, or "
        "replicated when there are fewer than ranks)",
        c.num_kv_heads));
  // MoE layers split every expert's intermediate columns (and their shared experts'); experts
  // without a width of their own (gpt-oss) are intermediate_size wide.
  const bool dense_mlp = has_layer(c, [](const LayerSpec& l) { return l.mlp == MlpKind::Dense; });
  const bool moe = has_layer(c, [](const LayerSpec& l) { return l.mlp == MlpKind::MoE; });
  const bool experts_own_width = c.get_int("moe_intermediate_size", 0) > 0;
  if ((dense_mlp || (moe && !experts_own_width)) && c.intermediate_size > 0 &&
      c.intermediate_size % tp != 0)
    out.push_back(fmt::format("intermediate_size {} is not divisible by it", c.intermediate_size));
  if (moe)
    for (const char* field : {"moe_intermediate_size", "shared_expert_intermediate_size",
                              "moe_shared_expert_intermediate_size"}) {
      const int width = c.get_int(field, 0);
      if (width > 0 && width % tp != 0)
        out.push_back(fmt::format("{} {} is not divisible by it", field, width));
    }
  if (c.vocab_size < tp)
    out.push_back(fmt::format("vocab_size {} is smaller than it", c.vocab_size));
  return out;
}

}  // namespace

Shard head_group_shard(int num_groups, int tp_rank, int tp_size) {
  STRATA_CHECK(splits_groups(num_groups, tp_size), "{} head groups over {} ranks", num_groups,
               tp_size);
  if (num_groups % tp_size == 0) return Shard{tp_rank, tp_size};
  return Shard{tp_rank / (tp_size / num_groups), num_groups};
}

std::optional<std::string> tensor_parallel_problem(const ModelConfig& c, int tp_size) {
  if (tp_size == 1) return std::nullopt;
  const std::vector<std::string> found = rule_problems(c, tp_size);
  if (found.empty()) return std::nullopt;
  std::vector<int> allowed;
  for (int t = 1; t <= kLargestSuggestedTpSize; ++t)
    if (rule_problems(c, t).empty()) allowed.push_back(t);
  return fmt::format(
      "--tp-size {}: in {}/config.json {}; tensor parallelism splits every layer evenly over the "
      "ranks: use --tp-size {}",
      tp_size, c.model_dir.empty() ? "." : c.model_dir, fmt::join(found, ", "),
      fmt::join(allowed, " or "));
}

}  // namespace strata
