#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "core/error.h"
#include "model/json_util.h"

namespace strata {

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
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
  const std::string header_text(reinterpret_cast<const char*>(bytes + 8), header_len);
  json header;
  try {
    header = json::parse(header_text);
  } catch (const json::parse_error& e) {
    fail("{}: the safetensors header is not valid JSON ({}). {}", path, e.what(), fix);
  }
  if (!header.is_object()) fail("{}: the safetensors header is not a JSON object. {}", path, fix);

  const unsigned char* data_start = bytes + 8 + header_len;
  const size_t data_size = file_size - 8 - header_len;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const json& e = it.value();
    TensorInfo info;
    info.name = it.key();
    info.file = path;
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      fail("{}: header entry for tensor '{}' is malformed (needs dtype, shape, data_offsets). {}",
           path, info.name, fix);
    if (!parse_safetensors_dtype(e["dtype"].get<std::string>(), &info.dtype))
      fail("{}: tensor '{}' has unsupported dtype {}", path, info.name, e["dtype"].dump());
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail("{}: tensor '{}' has an invalid shape {}. {}", path, info.name, e["shape"].dump(),
             fix);
      info.shape.push_back(d.get<int64_t>());
    }
    const json& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail("{}: tensor '{}' has invalid data_offsets {}. {}", path, info.name, off.dump(), fix);
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end)
      fail("{}: tensor '{}' has data_offsets that run backwards. {}", path, info.name, fix);
    if (end > data_size)
      fail(
          "{} is truncated: tensor '{}' ends at data byte {} but the file holds only {} data "
          "bytes. {}",
          path, info.name, end, data_size, fix);
    const uint64_t expected = static_cast<uint64_t>(info.numel()) * dtype_size(info.dtype);
    if (end - begin != expected)
      fail("{}: tensor '{}' occupies {} bytes but shape {} of {} needs {}. {}", path, info.name,
           end - begin, e["shape"].dump(), dtype_name(info.dtype), expected, fix);
    info.data = data_start + begin;
    info.nbytes = end - begin;
    tensors_.emplace(info.name, std::move(info));
  }
}

}  // namespace strata
