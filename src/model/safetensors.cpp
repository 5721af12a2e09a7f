#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "core/error.h"
#include "model/safetensors_header.h"

namespace strata {

int64_t TensorInfo::numel() const {
  // The header parser refuses shapes whose count overflows, so this cannot wrap.
  int64_t n = 1;
  for (auto d : shape) STRATA_CHECK(!__builtin_mul_overflow(n, d, &n), "tensor '{}'", name);
  return n;
}

namespace {

struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr && size) munmap(addr, size);
  }
};

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const std::string fix = "Re-download or re-save the checkpoint.";
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open checkpoint file {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot stat checkpoint file {}", path);
  }
  const size_t file_size = static_cast<size_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    fail("{} is truncated: {} bytes, too short for a safetensors header. {}", path, file_size, fix);
  }
  auto m = std::make_shared<Mapping>();
  m->addr = mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m->addr == MAP_FAILED) {
    m->addr = nullptr;
    fail("cannot memory-map {}: {}", path, std::strerror(errno));
  }
  m->size = file_size;
  mapping_ = m;
  const auto* bytes = static_cast<const unsigned char*>(m->addr);

  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian per the format; x86/arm hosts are LE
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8)
    fail("{} is not a valid safetensors file: header length {} exceeds the file size {}. {}", path,
         header_len, file_size, fix);
  const unsigned char* data_start = bytes + 8 + header_len;
  const size_t data_size = file_size - 8 - header_len;
  const std::string_view header_text(reinterpret_cast<const char*>(bytes + 8), header_len);
  for (auto& entry : parse_safetensors_header(header_text, data_size, path)) {
    entry.info.data = data_start + entry.begin;
    std::string name = entry.info.name;
    tensors_.emplace(std::move(name), std::move(entry.info));
  }
}

}  // namespace strata
