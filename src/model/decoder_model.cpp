#include "model/decoder_model.h"

#include "core/error.h"

namespace strata {

DecoderModel::DecoderModel(const ModelConfig& config, ParamLoader& weights, StagePlan stage,
                           const LayerFactory& make_layer, DecoderNames names)
    : config_(config), stage_(stage), names_(std::move(names)) {
  const int64_t h = config.hidden_size, vocab = config.vocab_size;
  const bool need_embed = stage.is_first || (stage.is_last && config.tie_word_embeddings);
  if (need_embed) embed_ = Embedding::load(weights, names_.embed, vocab, h);
  for (int i = stage.start_layer; i < stage.end_layer; ++i) layers_.push_back(make_layer(i));
  if (stage.is_last) {
    final_norm_ = RMSNorm::load(weights, names_.final_norm, h,
                                static_cast<float>(config.rms_norm_eps), names_.norm_weight_offset);
    lm_head_ = config.tie_word_embeddings
                   ? Linear::vocab_parallel_view(weights, embed_.table())
                   : Linear::load_vocab_parallel(weights, names_.lm_head, h, vocab);
  }
}

std::map<int, KVLayerLayout> DecoderModel::kv_layouts() const {
  std::map<int, KVLayerLayout> out;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (auto l = layers_[i]->kv_layout()) out[stage_.start_layer + static_cast<int>(i)] = *l;
  return out;
}

std::map<int, RecurrentStateLayout> DecoderModel::state_layouts() const {
  std::map<int, RecurrentStateLayout> out;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (auto l = layers_[i]->state_layout()) out[stage_.start_layer + static_cast<int>(i)] = *l;
  return out;
}

Tensor DecoderModel::forward(const ForwardBatch& batch, ForwardContext& ctx,
                             const Tensor& hidden_in) {
  Ops& ops = *ctx.ops;
  Tensor hidden;
  if (stage_.is_first) {
    hidden = embed_.forward(ops, ctx.input_ids);
    if (names_.embed_scale != 1.0f) ops.scale(hidden, names_.embed_scale);
  } else {
    STRATA_CHECK(hidden_in.ndim() == 2 && hidden_in.dim(0) == batch.num_tokens(),
                 "stage input {} for {} tokens", hidden_in.shape_str(), batch.num_tokens());
    hidden = ops.empty({hidden_in.rows(), hidden_in.cols()});
    ops.copy(hidden_in, hidden);
  }
  for (auto& layer : layers_) layer->forward(hidden, batch, ctx);
  if (!stage_.is_last) return hidden;

  // Logits only where they are needed: each request's last token unless all are asked for.
  Tensor selected = hidden;
  if (!batch.return_all_logits) {
    selected = ops.empty({batch.batch_size(), hidden.cols()});
    ops.gather_rows(hidden, ctx.last_token_rows, selected);
  }
  Tensor logits = lm_head_.forward(ops, final_norm_.forward(ops, selected));
  if (names_.logits_scale != 1.0f) ops.scale(logits, names_.logits_scale);
  return logits;
}

}  // namespace strata
