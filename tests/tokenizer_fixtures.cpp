#include "tokenizer_fixtures.h"

#include <fstream>
#include <memory>
#include <mutex>

#include "core/error.h"

namespace strata::test {

const tok::Tokenizer& fixture_tokenizer(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<tok::Tokenizer>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[name];
  if (!slot)
    slot = std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(tokenizer_fixture_dir(name)));
  return *slot;
}

nlohmann::json fixture_json(const std::string& name, const std::string& file) {
  const std::string path = tokenizer_fixture_dir(name) + "/" + file;
  std::ifstream in(path);
  if (!in) fail("cannot read tokenizer fixture {}", path);
  return nlohmann::json::parse(in);
}

}  // namespace strata::test
