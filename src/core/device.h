#pragma once
// Device: where a tensor's bytes live and where an op runs: host memory (the CPU reference)
// or the memory of one CUDA GPU.
#include <string>

namespace strata {

struct Device {
  enum class Kind { Host, Cuda };
  Kind kind = Kind::Host;
  int index = 0;  // cuda:N

  static Device host() { return {}; }
  static Device cuda(int index) { return {Kind::Cuda, index}; }
  bool is_host() const { return kind == Kind::Host; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_host() ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace strata
