#pragma once
// What each decoder layer is made of. Built once from config.json (layer_kinds.cpp);
// pools, attention backends, pipeline partitioning and the scheduler all read this list
// and never re-derive it (DESIGN.md §1.3).
#include <string>
#include <vector>

namespace strata {

enum class AttentionKind { None, Full, Sliding, MLA };
enum class RecurrentKind { None, Mamba2, GatedDeltaNet, ShortConv };
enum class MlpKind { None, Dense, MoE };

struct LayerSpec {
  AttentionKind attention = AttentionKind::None;
  RecurrentKind recurrent = RecurrentKind::None;
  MlpKind mlp = MlpKind::Dense;
  int sliding_window = 0;  // > 0 only for AttentionKind::Sliding

  bool has_kv_cache() const { return attention != AttentionKind::None; }
  bool has_recurrent_state() const { return recurrent != RecurrentKind::None; }
  std::string describe() const;
};

const char* to_string(AttentionKind k);
const char* to_string(RecurrentKind k);
const char* to_string(MlpKind k);

// Global ids of the layers in `layers` that satisfy `pred`.
template <typename Pred>
std::vector<int> layer_ids_where(const std::vector<LayerSpec>& layers, Pred pred) {
  std::vector<int> ids;
  for (int i = 0; i < static_cast<int>(layers.size()); ++i)
    if (pred(layers[i])) ids.push_back(i);
  return ids;
}

}  // namespace strata
