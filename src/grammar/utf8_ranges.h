#pragma once
// Code point ranges as UTF-8 byte patterns: a grammar over bytes matches a character class by
// alternatives of byte-range sequences, e.g. [\u0080-\u07FF] is [\xC2-\xDF][\x80-\xBF]. The
// split is the classic one (as in RE2 / regex-automata): cut a range at encoded-length
// boundaries, then wherever its continuation bytes would not span full 0x80-0xBF runs.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace strata::grammar {

struct ByteRange {
  uint8_t lo, hi;
};
using Utf8Sequence = std::vector<ByteRange>;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorted, merged, non-overlapping ranges of code points (surrogates are dropped: UTF-8 cannot
// encode them).
using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;
CodePointRanges normalize_ranges(CodePointRanges ranges);
CodePointRanges complement_ranges(const CodePointRanges& ranges);
CodePointRanges subtract_ranges(const CodePointRanges& ranges, const CodePointRanges& removed);

// Byte sequences matching exactly the UTF-8 encodings of the code points in `ranges`.
std::vector<Utf8Sequence> utf8_sequences(const CodePointRanges& ranges);

}  // namespace strata::grammar
