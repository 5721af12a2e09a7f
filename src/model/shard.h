#pragma once
// How a tensor-parallel rank's share of a dimension is cut (docs/tensor_parallel.md): piece
// `index` of `count` pieces of ceil(n / count) each, the last one taking what is left. Every
// width that must split evenly (heads, intermediate sizes) is checked to divide by the TP size
// up front (tensor_parallel_problems), so the uneven last piece only occurs for the vocabulary
// of the LM head.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata {

struct ModelConfig;

struct Shard {
  int index = 0, count = 1;
  int64_t begin(int64_t n) const { return std::min(n, index * piece(n)); }
  int64_t size(int64_t n) const { return std::min(n, begin(n) + piece(n)) - begin(n); }
  bool whole() const { return count == 1; }

 private:
  int64_t piece(int64_t n) const { return (n + count - 1) / count; }
};

// The groups a rank of `tp_size` holds of `num_groups` groups that its heads read (KV heads of
// GQA, B and C groups of Mamba2): its 1/tp of them when tp divides num_groups, else (tp a
// multiple of num_groups) the one group its heads belong to, replicated on the
// tp / num_groups ranks that share it.
Shard head_group_shard(int num_groups, int tp_rank, int tp_size);

// Why `config` cannot be split over `tp_size` ranks: one line naming each config field and
// value that does not split, and the --tp-size values that would work (nullopt: it can).
std::optional<std::string> tensor_parallel_problem(const ModelConfig& config, int tp_size);

}  // namespace strata
