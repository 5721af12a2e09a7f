#include "model/safetensors_header.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "model/json_util.h"

namespace strata {

namespace {

constexpr const char* kFix = "Re-download or re-save the checkpoint.";
// Tensor entries are two levels deep ({"name": {"shape": [..]}}); __metadata__ is flat. Deeper
// nesting is never valid, and refusing it bounds the parser's and destructor's recursion.
constexpr int kMaxHeaderDepth = 4;

// Parses the header as a JSON object, refusing duplicate top-level keys (nlohmann would keep
// the last one silently, so two entries could describe one tensor) and deep nesting.
json parse_header_json(std::string_view text, const std::string& path) {
  std::set<std::string> keys;
  std::string duplicate;
  bool too_deep = false;
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxHeaderDepth) too_deep = true;
    if (event == json::parse_event_t::key && depth == 1 &&
        !keys.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    // Nothing deeper than the limit is kept, so nothing deep is built.
    return !too_deep;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), check);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for numbers no double holds (found by fuzzing).
    fail("{}: the safetensors header is not valid JSON ({}). {}", path, e.what(), kFix);
  }
  if (too_deep)
    fail("{}: the safetensors header nests deeper than {} levels; no valid header does. {}", path,
         kMaxHeaderDepth, kFix);
  if (!duplicate.empty())
    fail("{}: the safetensors header names tensor '{}' twice. {}", path, duplicate, kFix);
  if (!header.is_object()) fail("{}: the safetensors header is not a JSON object. {}", path, kFix);
  return header;
}

}  // namespace

std::vector<SafetensorsEntry> parse_safetensors_header(std::string_view text, size_t data_size,
                                                       const std::string& path) {
  const json header = parse_header_json(text, path);
  std::vector<SafetensorsEntry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const json& e = it.value();
    SafetensorsEntry entry;
    TensorInfo& info = entry.info;
    info.name = it.key();
    info.file = path;
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      fail("{}: header entry for tensor '{}' is malformed (needs dtype, shape, data_offsets). {}",
           path, info.name, kFix);
    if (!parse_safetensors_dtype(e["dtype"].get<std::string>(), &info.dtype))
      fail("{}: tensor '{}' has unsupported dtype {}", path, info.name, e["dtype"].dump());
    const uint64_t element_bytes = dtype_size(info.dtype);
    // Element and byte counts in 64 bits without overflow: a shape like [2^33, 2^31] is refused
    // here instead of wrapping to a small size that would pass the size check below.
    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail("{}: tensor '{}' has an invalid shape {}. {}", path, info.name, e["shape"].dump(),
             kFix);
      const auto dim = static_cast<uint64_t>(d.get<int64_t>());
      if (__builtin_mul_overflow(numel, dim, &numel) || numel > uint64_t{INT64_MAX})
        fail("{}: tensor '{}' has shape {}, whose element count overflows 64 bits. {}", path,
             info.name, e["shape"].dump(), kFix);
      info.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t expected = 0;
    if (__builtin_mul_overflow(numel, element_bytes, &expected))
      fail("{}: tensor '{}' has shape {}, whose byte count overflows 64 bits. {}", path, info.name,
           e["shape"].dump(), kFix);
    const json& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail("{}: tensor '{}' has invalid data_offsets {}. {}", path, info.name, off.dump(), kFix);
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end)
      fail("{}: tensor '{}' has data_offsets {} that run backwards. {}", path, info.name,
           off.dump(), kFix);
    if (end > data_size)
      fail(
          "{} is truncated: tensor '{}' ends at data byte {} but the file holds only {} data "
          "bytes. {}",
          path, info.name, end, data_size, kFix);
    if (end - begin != expected)
      fail("{}: tensor '{}' occupies {} bytes but shape {} of {} needs {}. {}", path, info.name,
           end - begin, e["shape"].dump(), dtype_name(info.dtype), expected, kFix);
    if (begin % element_bytes != 0)
      fail(
          "{}: tensor '{}' starts at data byte {}, not a multiple of its {}-byte {} elements "
          "(data_offsets {}). {}",
          path, info.name, begin, element_bytes, dtype_name(info.dtype), off.dump(), kFix);
    entry.begin = begin;
    info.nbytes = expected;
    entries.push_back(std::move(entry));
  }
  // No two tensors may share bytes: in offset order, each starts where the last one ended or
  // later (empty tensors occupy nothing).
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries)
    if (e.info.nbytes > 0) by_offset.push_back(&e);
  std::sort(
      by_offset.begin(), by_offset.end(),
      [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsEntry& prev = *by_offset[i - 1];
    const SafetensorsEntry& cur = *by_offset[i];
    if (cur.begin < prev.begin + prev.info.nbytes)
      fail(
          "{}: tensors '{}' (data bytes {}..{}) and '{}' (from byte {}) overlap; each tensor "
          "needs bytes of its own. {}",
          path, prev.info.name, prev.begin, prev.begin + prev.info.nbytes, cur.info.name, cur.begin,
          kFix);
  }
  return entries;
}

}  // namespace strata
