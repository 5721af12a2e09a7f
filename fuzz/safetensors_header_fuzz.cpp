// libFuzzer target: the safetensors header parser (model/safetensors_header.h). Input: the
// header text; the data section is as long as the first 8 bytes say (so offsets near the end
// of the data are reachable). Anything but a strata Error is a bug.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "model/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t data_size = 0;
  std::memcpy(&data_size, data, 8);
  const std::string_view header(reinterpret_cast<const char*>(data + 8), size - 8);
  try {
    for (const auto& e : strata::parse_safetensors_header(header, data_size, "fuzz.safetensors"))
      if (e.begin + e.info.nbytes > data_size || e.begin % strata::dtype_size(e.info.dtype) != 0)
        __builtin_trap();  // an entry the rules should have refused
  } catch (const strata::Error&) {
  }
  return 0;
}
