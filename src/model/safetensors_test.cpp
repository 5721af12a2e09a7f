#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/json_util.h"

namespace strata {

namespace {

std::string write_file(const std::string& name, const std::string& header, size_t data_bytes) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header;
  std::string data(data_bytes, '\0');
  f << data;
  return path;
}

std::string error_of(const std::string& path) {
  try {
    SafetensorsFile file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, ReadsAValidFile) {
  const auto p = write_file("st_ok.safetensors",
                            R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                                "__metadata__": {"format": "pt"}})",
                            24);
  SafetensorsFile f(p);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors().at("a").shape, (std::vector<int64_t>{2, 3}));
}

TEST(Safetensors, RejectsTruncatedAndInconsistentFiles) {
  EXPECT_NE(
      error_of(write_file("st_trunc.safetensors",
                          R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}})",
                          10))
          .find("truncated"),
      std::string::npos);
  EXPECT_NE(
      error_of(write_file("st_size.safetensors",
                          R"({"a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 24]}})",
                          24))
          .find("needs 12"),
      std::string::npos);
  EXPECT_NE(error_of(write_file("st_json.safetensors", R"({"a": )", 0)).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(
      error_of(write_file("st_dtype.safetensors",
                          R"({"a": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}})", 1))
          .find("unsupported dtype"),
      std::string::npos);
  // A header length larger than the file.
  const std::string path = (std::filesystem::temp_directory_path() / "st_hdr.safetensors").string();
  {
    std::ofstream f(path, std::ios::binary);
    const uint64_t n = 1 << 20;
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << "{}";
  }
  EXPECT_NE(error_of(path).find("header length"), std::string::npos) << error_of(path);
  EXPECT_NE(error_of("/nonexistent/model.safetensors").find("cannot open"), std::string::npos);
}

// Found by fuzz/safetensors_header_fuzz.cpp: a number no double holds made nlohmann throw
// out_of_range, which escaped as an exception that was not a strata Error.
TEST(Safetensors, ANumberBeyondDoubleIsInvalidJsonNotACrash) {
  const std::string header =
      R"({"a": {"dtype": "F32", "shape": [8577777E777], "data_offsets": [0, 4]}})";
  EXPECT_NE(error_of(write_file("st_range.safetensors", header, 4)).find("not valid JSON"),
            std::string::npos);
}

}  // namespace strata
