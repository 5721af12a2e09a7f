#pragma once
// The safetensors header parser, apart from the file mapping so that tests and the fuzz
// target feed it bytes directly. Every rule the format implies is checked here, once: a JSON
// object without duplicate keys, each tensor's dtype, a shape whose element and byte counts fit
// in 64 bits, data offsets in order, inside the data, aligned to the dtype, sized to the shape,
// and not overlapping another tensor's bytes.
#include <string>
#include <string_view>
#include <vector>

#include "model/safetensors.h"

namespace strata {

struct SafetensorsEntry {
  TensorInfo info;     // name, dtype, shape, nbytes, file (data is left null)
  uint64_t begin = 0;  // offset of the first byte in the data section
};

// Parses `header` (the JSON text after the 8-byte length) for a data section of `data_size`
// bytes; `path` names the file in errors. Throws Error naming the tensor and the rule.
std::vector<SafetensorsEntry> parse_safetensors_header(std::string_view header, size_t data_size,
                                                       const std::string& path);

}  // namespace strata
