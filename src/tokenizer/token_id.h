#pragma once
// A token id as tokenizer.json gives it: an integer in [0, kMaxTokenId], checked before it is
// used. A float or an out-of-range number is undefined behavior as an int (the tokenizer fuzzer
// found `2.7e79` taken for an id), and a huge id would size the id tables by itself.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

namespace strata::tok {

// Past every published vocabulary (the largest are ~260k) by far.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

// The id, or nothing when `v` is not an integer in [0, kMaxTokenId].
inline std::optional<int> token_id(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t id = v.get<uint64_t>();
    if (id <= static_cast<uint64_t>(kMaxTokenId)) return static_cast<int>(id);
  } else if (v.is_number_integer()) {
    const int64_t id = v.get<int64_t>();
    if (id >= 0 && id <= kMaxTokenId) return static_cast<int>(id);
  }
  return std::nullopt;
}

}  // namespace strata::tok
