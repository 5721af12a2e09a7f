#pragma once
// Safetensors checkpoints, memory-mapped. Every header entry is validated against the file
// (offsets inside the data, byte count = shape x dtype) before anything reads a byte, so a
// truncated or corrupt file is a clear error, never an out-of-bounds read.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace strata {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const unsigned char* data = nullptr;  // into the mapping
  size_t nbytes = 0;
  std::string file;
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  // Keeps the mapping alive for views into it.
  std::shared_ptr<void> mapping() const { return mapping_; }

 private:
  std::string path_;
  std::shared_ptr<void> mapping_;
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace strata
