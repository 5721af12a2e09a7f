#include "grammar/utf8_ranges.h"

#include <algorithm>
#include <string>

#include "tokenizer/unicode.h"

namespace strata::grammar {

CodePointRanges normalize_ranges(CodePointRanges ranges) {
  CodePointRanges split;
  for (auto [lo, hi] : ranges) {
    hi = std::min(hi, kMaxCodePoint);
    if (lo > hi) continue;
    // Surrogates D800-DFFF have no UTF-8 encoding.
    if (lo < 0xD800 && hi >= 0xD800) {
      split.push_back({lo, 0xD7FF});
      if (hi > 0xDFFF) split.push_back({0xE000, hi});
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      if (hi > 0xDFFF) split.push_back({0xE000, hi});
    } else {
      split.push_back({lo, hi});
    }
  }
  std::sort(split.begin(), split.end());
  CodePointRanges merged;
  for (auto r : split) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  return merged;
}

CodePointRanges complement_ranges(const CodePointRanges& ranges) {
  CodePointRanges sorted = normalize_ranges(ranges), out;
  uint32_t next = 0;
  for (auto [lo, hi] : sorted) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalize_ranges(out);
}

CodePointRanges subtract_ranges(const CodePointRanges& ranges, const CodePointRanges& removed) {
  // a - b = a & ~b; with both sorted, intersect a with the complement of b.
  CodePointRanges a = normalize_ranges(ranges), keep = complement_ranges(removed), out;
  size_t j = 0;
  for (auto [lo, hi] : a) {
    while (j < keep.size() && keep[j].second < lo) ++j;
    for (size_t k = j; k < keep.size() && keep[k].first <= hi; ++k)
      out.push_back({std::max(lo, keep[k].first), std::min(hi, keep[k].second)});
  }
  return normalize_ranges(out);
}

namespace {

void split_range(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  if (lo > hi) return;
  // One encoded length per piece.
  static constexpr uint32_t kLengthMax[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t max : kLengthMax)
    if (lo <= max && hi > max) {
      split_range(lo, max, out);
      split_range(max + 1, hi, out);
      return;
    }
  if (hi < 0x80) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  // Within one length: every trailing run of 6-bit groups must span 0x00-0x3F fully, or the
  // range is cut there so that each piece is a product of byte ranges.
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_range(lo, lo | m, out);
        split_range((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_range(lo, (hi & ~m) - 1, out);
        split_range(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  tok::utf8_append(a, static_cast<char32_t>(lo));
  tok::utf8_append(b, static_cast<char32_t>(hi));
  Utf8Sequence seq;
  for (size_t k = 0; k < a.size(); ++k)
    seq.push_back({static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k])});
  out.push_back(seq);
}

}  // namespace

std::vector<Utf8Sequence> utf8_sequences(const CodePointRanges& ranges) {
  std::vector<Utf8Sequence> out;
  for (auto [lo, hi] : normalize_ranges(ranges)) split_range(lo, hi, out);
  return out;
}

}  // namespace strata::grammar
