#include "model/layer_spec.h"

#include <fmt/format.h>

namespace strata {

const char* to_string(AttentionKind k) {
  switch (k) {
    case AttentionKind::None:
      return "none";
    case AttentionKind::Full:
      return "full_attention";
    case AttentionKind::Sliding:
      return "sliding_attention";
    case AttentionKind::MLA:
      return "mla";
  }
  return "?";
}

const char* to_string(RecurrentKind k) {
  switch (k) {
    case RecurrentKind::None:
      return "none";
    case RecurrentKind::Mamba2:
      return "mamba2";
    case RecurrentKind::GatedDeltaNet:
      return "gated_delta_net";
    case RecurrentKind::ShortConv:
      return "short_conv";
  }
  return "?";
}

const char* to_string(MlpKind k) {
  switch (k) {
    case MlpKind::None:
      return "none";
    case MlpKind::Dense:
      return "dense";
    case MlpKind::MoE:
      return "moe";
  }
  return "?";
}

std::string LayerSpec::describe() const {
  std::string s;
  if (attention != AttentionKind::None) s += to_string(attention);
  if (attention == AttentionKind::Sliding) s += fmt::format("({})", sliding_window);
  if (recurrent != RecurrentKind::None) {
    if (!s.empty()) s.append("+");
    s.append(to_string(recurrent));
  }
  s.append("/");
  s.append(to_string(mlp));
  return s;
}

}  // namespace strata
