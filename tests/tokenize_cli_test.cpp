// `strata tokenize` and the text paths of `strata generate` (--prompt, --chat), end to end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.h"
#include "tokenizer/unicode.h"
#include "tokenizer_fixtures.h"

namespace strata::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<json> json_lines(const std::string& out) {
  std::vector<json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(json::parse(line));
  return lines;
}

TEST(TokenizeCli, JsonlMatchesReference) {
  for (const std::string name : {"qwen3", "llama2"}) {
    const json cases = fixture_json(name, "reference.json").at("cases");
    const fs::path input = fs::temp_directory_path() / ("strata_tokenize_" + name + ".jsonl");
    {
      std::ofstream f(input);
      for (const json& c : cases) f << c.at("text").dump() << "\n";
    }
    for (bool special : {false, true}) {
      std::string out, err;
      ASSERT_EQ(
          run_strata("tokenize --tokenizer " + tokenizer_fixture_dir(name) + " --json --jsonl " +
                         input.string() + (special ? " --add-special-tokens" : ""),
                     &out, &err),
          0)
          << err;
      const auto lines = json_lines(out);
      ASSERT_EQ(lines.size(), cases.size());
      for (size_t i = 0; i < lines.size(); ++i) {
        EXPECT_EQ(lines[i].at("ids"), cases[i].at(special ? "ids_with_special" : "ids"))
            << cases[i].at("text");
        if (!special) {
          EXPECT_EQ(lines[i].at("text"), cases[i].at("decoded")) << cases[i].at("text");
        }
      }
    }
    fs::remove(input);
  }
}

TEST(TokenizeCli, TextAndErrors) {
  std::string out, err;
  ASSERT_EQ(
      run_strata("tokenize --tokenizer " + tokenizer_fixture_dir("llama3") + " --json --text 'a b'",
                 &out, &err),
      0)
      << err;
  EXPECT_EQ(json::parse(out), json::parse(R"({"ids": [64, 293], "text": "a b"})"));
  EXPECT_EQ(
      run_strata("tokenize --tokenizer " + tokenizer_fixture_dir("llama3") + " --json", &out, &err),
      1);
  EXPECT_NE(err.find("exactly one of --text"), std::string::npos) << err;
  EXPECT_EQ(run_strata("tokenize --tokenizer /no/such/dir --text a", &out, &err), 1);
  EXPECT_NE(err.find("no tokenizer at /no/such/dir"), std::string::npos) << err;
}

// A byte-level tokenizer whose ids fit the tiny test models (vocab 512): bytes are ids 0-255,
// <bos>, <user>, <assistant> and fillers up to 511, and a chat template using them.
fs::path write_tiny_tokenizer() {
  const fs::path dir =
      fs::temp_directory_path() / ("strata_tiny_tokenizer_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[tok::ByteLevelAlphabet::get().from_bytes(std::string(1, static_cast<char>(b)))] = b;
  for (int extra = 256; extra < 512; ++extra)
    if (extra < 300 || extra > 302) vocab["<extra_" + std::to_string(extra) + ">"] = extra;
  json added = json::array();
  int id = 300;
  for (const char* t : {"<bos>", "<user>", "<assistant>"})
    added.push_back({{"id", id++}, {"content", t}, {"special", true}, {"normalized", false}});
  const json spec = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", added},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens",
         {{"<bos>", {{"id", "<bos>"}, {"ids", {300}}, {"tokens", {"<bos>"}}}}}}}}};
  std::ofstream(dir / "tokenizer.json") << spec.dump();
  const json config = {
      {"bos_token", "<bos>"},
      {"chat_template",
       "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
       "{% if add_generation_prompt %}<assistant>{% endif %}"}};
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  return dir;
}

TEST(GenerateCli, PromptAndChatGoThroughTheTokenizer) {
  const fs::path tokenizer = write_tiny_tokenizer();
  const std::string base = "generate --model " + fixture_dir("qwen3") + " --tokenizer " +
                           tokenizer.string() + " --max-new-tokens 4 --json ";
  const tok::Tokenizer t = tok::Tokenizer::load(tokenizer.string());
  struct Case {
    std::string flags;
    std::vector<int> input_ids;
  };
  for (const Case& c :
       {Case{"--prompt 'hi'", {300, 104, 105}}, Case{"--chat 'hi'", {300, 301, 104, 105, 302}}}) {
    std::string out, err;
    ASSERT_EQ(run_strata(base + c.flags, &out, &err), 0) << err;
    const json j = json::parse(out);
    EXPECT_EQ(j.at("input_ids").get<std::vector<int>>(), c.input_ids) << c.flags;
    const auto output_ids = j.at("output_ids").get<std::vector<int>>();
    EXPECT_EQ(output_ids.size(), 4u);
    EXPECT_EQ(j.at("text"), t.decode(output_ids, true));
    // The same ids given directly generate the same tokens.
    std::string ids;
    for (int id : c.input_ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    ASSERT_EQ(run_strata(base + "--input-ids " + ids, &out, &err), 0) << err;
    EXPECT_EQ(json::parse(out).at("output_ids").get<std::vector<int>>(), output_ids);
  }
  fs::remove_all(tokenizer);
}

}  // namespace
}  // namespace strata::test
