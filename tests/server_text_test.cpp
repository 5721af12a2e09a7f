// Text over HTTP: the tiny ChatML tokenizer (tests/data/tokenizers/tiny_chatml) paired with a
// dense (llama), an MLA (deepseek_v2_lite) and a hybrid (nemotron_h) fixture. Text
// completions equal `strata generate --prompt`, chat completions `strata generate --chat`;
// streamed text concatenates to the non-streamed text; stop strings cut the text before
// them with finish_reason "stop"; bad text requests get clear 4xx answers and leave the
// server serving; a server without a tokenizer says how to give it one.
#include <gtest/gtest.h>

#include "server_harness.h"
#include "test_util.h"

namespace strata {
namespace {

using test::Harness;

const std::vector<std::string> kFixtures = {"llama", "deepseek_v2_lite", "nemotron_h"};
constexpr int kTokens = 16;
const std::string kPrompt = "The quick brown fox";
const std::string kMessage = "Hello! Who are you?";

json generate_cli(const std::string& fixture, const std::string& flag, const std::string& text) {
  return test::generate_text(fixture, flag, text, kTokens);
}

json completion(const std::string& prompt, bool stream = false) {
  return {{"model", "llama"}, {"prompt", prompt},   {"max_tokens", kTokens},
          {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}};
}

json chat(const std::string& message, bool stream = false) {
  return {{"model", "llama"},
          {"messages", json::array({{{"role", "user"}, {"content", message}}})},
          {"max_tokens", kTokens},
          {"temperature", 0},
          {"ignore_eos", true},
          {"stream", stream}};
}

// What a client assembles from a stream of choice 0.
struct Streamed {
  std::string text, finish;
  std::vector<int> ids;
  json matched;
};
Streamed collect(const Harness& h, const std::string& path, const json& body) {
  bool done = false;
  Streamed s;
  for (const json& e : h.stream(path, body, &done))
    for (const json& ch : e["choices"]) {
      EXPECT_EQ(ch["index"], 0);
      s.text += ch.contains("delta") ? ch["delta"].value("content", "") : ch.value("text", "");
      for (int id : ch.value("token_ids", json::array()))
        s.ids.push_back(id);  // not in role chunks
      if (!ch["finish_reason"].is_null()) {
        s.finish = ch["finish_reason"];
        s.matched = ch["matched_stop"];
      }
    }
  EXPECT_TRUE(done);
  return s;
}

// A stop string from `text`: up to 3 whole characters from its middle on, none of them
// U+FFFD (which stands for bytes that are not text; random weights produce many).
std::string pick_stop(const std::string& text) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    chars.push_back(text.substr(i, n));
    i += n;
  }
  for (size_t k = chars.size() / 2; k < chars.size(); ++k) {
    std::string stop;
    for (size_t j = k; j < chars.size() && j < k + 3 && chars[j] != "\xEF\xBF\xBD"; ++j)
      stop += chars[j];
    if (!stop.empty()) return stop;
  }
  return "";
}

TEST(ServerText, CompletionsAndChatEqualGenerateOnDenseMlaAndHybridModels) {
  for (const auto& fixture : kFixtures) {
    SCOPED_TRACE(fixture);
    Harness h({}, 4096, 16, fixture, test::tiny_tokenizer_dir());
    const json expected = generate_cli(fixture, "--prompt", kPrompt);
    ASSERT_TRUE(expected.is_object());
    auto [status, c] = h.post("/v1/completions", completion(kPrompt));
    ASSERT_EQ(status, 200) << c.dump();
    EXPECT_EQ(c["choices"][0]["text"], expected["text"]);
    EXPECT_EQ(c["choices"][0]["token_ids"], expected["output_ids"]);
    EXPECT_EQ(c["usage"]["prompt_tokens"], expected["input_ids"].size());
    const Streamed s = collect(h, "/v1/completions", completion(kPrompt, true));
    EXPECT_EQ(s.text, expected["text"]);
    EXPECT_EQ(s.ids, expected["output_ids"].get<std::vector<int>>());
    EXPECT_EQ(s.finish, "length");
    auto [s2, g] =
        h.post("/generate",
               json{{"text", kPrompt},
                    {"sampling_params",
                     {{"max_new_tokens", kTokens}, {"temperature", 0}, {"ignore_eos", true}}}});
    ASSERT_EQ(s2, 200) << g.dump();
    EXPECT_EQ(g["text"], expected["text"]);
    EXPECT_EQ(g["output_ids"], expected["output_ids"]);

    const json expected_chat = generate_cli(fixture, "--chat", kMessage);
    ASSERT_TRUE(expected_chat.is_object());
    auto [s3, ch] = h.post("/v1/chat/completions", chat(kMessage));
    ASSERT_EQ(s3, 200) << ch.dump();
    EXPECT_EQ(ch["choices"][0]["message"]["content"], expected_chat["text"]);
    EXPECT_EQ(ch["choices"][0]["token_ids"], expected_chat["output_ids"]);
    EXPECT_EQ(ch["usage"]["prompt_tokens"], expected_chat["input_ids"].size());
    const Streamed sc = collect(h, "/v1/chat/completions", chat(kMessage, true));
    EXPECT_EQ(sc.text, expected_chat["text"]);
    EXPECT_EQ(sc.ids, expected_chat["output_ids"].get<std::vector<int>>());
    h.expect_pools_empty();
  }
}

TEST(ServerText, StopStringsCutTheTextBeforeThemAndEndWithStop) {
  for (const auto& fixture : kFixtures) {
    SCOPED_TRACE(fixture);
    Harness h({}, 4096, 16, fixture, test::tiny_tokenizer_dir());
    auto [status, whole] = h.post("/v1/completions", completion(kPrompt));
    ASSERT_EQ(status, 200) << whole.dump();
    const std::string text = whole["choices"][0]["text"];
    const auto ids = whole["choices"][0]["token_ids"].get<std::vector<int>>();
    const std::string stop = pick_stop(text);
    ASSERT_FALSE(stop.empty()) << "no text to stop at in " << json(text).dump();
    const std::string cut = text.substr(0, text.find(stop));
    for (bool stream : {false, true}) {
      json body = completion(kPrompt, stream);
      body["stop"] = json::array({"\x01never", stop});
      Streamed got;
      if (stream) {
        got = collect(h, "/v1/completions", body);
      } else {
        auto [s, c] = h.post("/v1/completions", body);
        ASSERT_EQ(s, 200) << c.dump();
        got = {c["choices"][0]["text"], c["choices"][0]["finish_reason"],
               c["choices"][0]["token_ids"].get<std::vector<int>>(),
               c["choices"][0]["matched_stop"]};
      }
      EXPECT_EQ(got.text, cut) << "stop " << json(stop).dump() << " in " << json(text).dump();
      EXPECT_EQ(got.finish, "stop");
      EXPECT_EQ(got.matched, stop);
      // Generation ended at the token that completed the stop string.
      ASSERT_LE(got.ids.size(), ids.size());
      EXPECT_TRUE(std::equal(got.ids.begin(), got.ids.end(), ids.begin()));
      EXPECT_NE(h.codec()->decode(got.ids, true).find(stop), std::string::npos);
      const std::vector<int> before(got.ids.begin(), got.ids.end() - 1);
      EXPECT_EQ(h.codec()->decode(before, true).find(stop), std::string::npos);
    }
    auto [s, g] = h.post("/generate", json{{"text", kPrompt},
                                           {"sampling_params",
                                            {{"max_new_tokens", kTokens},
                                             {"temperature", 0},
                                             {"ignore_eos", true},
                                             {"stop", stop}}}});
    ASSERT_EQ(s, 200) << g.dump();
    EXPECT_EQ(g["text"], cut);
    EXPECT_EQ(g["meta_info"]["finish_reason"]["type"], "stop");
    EXPECT_EQ(g["meta_info"]["finish_reason"]["matched"], stop);
    // A stop string completed by the last token allowed still ends with "stop" (and is cut).
    const int stop_at = static_cast<int>(g["output_ids"].size());
    json last = completion(kPrompt);
    last["stop"] = stop;
    last["max_tokens"] = stop_at;
    auto [s3, c3] = h.post("/v1/completions", last);
    EXPECT_EQ(c3["choices"][0]["finish_reason"], "stop") << c3.dump();
    EXPECT_EQ(c3["choices"][0]["text"], cut);
    // A stop string that never comes changes nothing.
    json body = completion(kPrompt);
    body["stop"] = "\x01never";
    auto [s4, c4] = h.post("/v1/completions", body);
    EXPECT_EQ(c4["choices"][0]["text"], text);
    EXPECT_EQ(c4["choices"][0]["finish_reason"], "length");
    h.expect_pools_empty();
  }
}

TEST(ServerText, TextTrackerHoldsBackWhatMayBeginAStopString) {
  const auto codec = TokenizerCodec::load(test::tiny_tokenizer_dir());
  const std::string text = "Hello world, hello there";
  const std::vector<int> ids = codec->encode(text, false);
  for (const std::string stop : {"world", "hello", "o w", "there"}) {
    TextTracker tracker(codec.get(), {"never", stop}, true);
    std::string sent;
    // As the scheduler does: the request ends at the token whose text completes the stop.
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::vector<int> so_far(ids.begin(), ids.begin() + i + 1);
      const bool stopped = codec->decode(so_far, true).find(stop) != std::string::npos;
      sent += tracker.advance({ids[i]}, stopped, stopped);
      EXPECT_EQ(sent.find(stop), std::string::npos) << stop;
      // Held back: only an end of the text that may begin a stop string (ASCII: no
      // unfinished characters).
      const std::string held = codec->decode(so_far, true).substr(sent.size());
      if (!stopped) {
        EXPECT_TRUE(held.empty() || stop.compare(0, held.size(), held) == 0 ||
                    std::string("never").compare(0, held.size(), held) == 0)
            << json(held).dump();
      }
      if (stopped) break;
    }
    EXPECT_EQ(sent, text.substr(0, text.find(stop))) << stop;
  }
  // Special tokens: skipped by default, kept on request.
  const std::vector<int> turn = codec->encode("<|im_start|>user\nHi<|im_end|>", false);
  TextTracker skip(codec.get(), {}, true), keep(codec.get(), {}, false);
  EXPECT_EQ(skip.advance(turn, true, false), "user\nHi");
  EXPECT_EQ(keep.advance(turn, true, false), "<|im_start|>user\nHi<|im_end|>");
}

TEST(ServerText, LogprobsNameTokensByTheirText) {
  Harness h({}, 4096, 16, "llama", test::tiny_tokenizer_dir());
  json body = completion(kPrompt);
  body["logprobs"] = 2;
  auto [status, c] = h.post("/v1/completions", body);
  ASSERT_EQ(status, 200) << c.dump();
  const json& choice = c["choices"][0];
  ASSERT_EQ(choice["logprobs"]["tokens"].size(), choice["token_ids"].size());
  size_t offset = 0;
  for (size_t i = 0; i < choice["token_ids"].size(); ++i) {
    const std::string name = h.codec()->token_text(choice["token_ids"][i]);
    EXPECT_EQ(choice["logprobs"]["tokens"][i], name);
    EXPECT_EQ(choice["logprobs"]["text_offset"][i], offset);
    offset += name.size();
    // Greedy: the chosen token is the most likely one, listed under its name.
    const json& top = choice["logprobs"]["top_logprobs"][i];
    ASSERT_TRUE(top.contains(name)) << top.dump();
    EXPECT_EQ(top[name], choice["logprobs"]["token_logprobs"][i]);
  }
  json chat_body = chat(kMessage);
  chat_body["logprobs"] = true;
  chat_body["top_logprobs"] = 2;
  auto [s2, ch] = h.post("/v1/chat/completions", chat_body);
  ASSERT_EQ(s2, 200) << ch.dump();
  const json& content = ch["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), ch["choices"][0]["token_ids"].size());
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string name = h.codec()->token_text(ch["choices"][0]["token_ids"][i]);
    EXPECT_EQ(content[i]["token"], name);
    EXPECT_EQ(content[i]["bytes"].size(), name.size());
    EXPECT_EQ(content[i]["top_logprobs"].size(), 2u);
  }
}

TEST(ServerText, BadTextRequestsGetClearFourHundredsAndTheServerStaysUp) {
  Harness h({}, 4096, 16, "llama", test::tiny_tokenizer_dir());
  auto expect_error = [](const Harness& server, const std::string& path, const std::string& body,
                         const std::string& words) {
    auto [s, e] = server.post(path, body);
    EXPECT_EQ(s, 400) << body << " -> " << e.dump();
    ASSERT_TRUE(e.is_object() && e.contains("error")) << e.dump();
    const std::string message = e["error"]["message"];
    EXPECT_NE(message.find(words), std::string::npos) << body << " -> " << message;
  };
  const std::string cc = "/v1/chat/completions";
  expect_error(h, "/v1/completions", "{\"prompt\": \"caf\xC3\"}", "not valid UTF-8");
  expect_error(h, "/v1/completions", R"({"prompt": "\ud800"})", "not valid JSON");
  expect_error(h, "/v1/completions", R"({"prompt": 42})", "'prompt' must be a string");
  expect_error(h, "/v1/completions", R"({"prompt": ["Hi", 5]})", "must hold strings or lists");
  expect_error(h, "/v1/completions", R"({"prompt": "Hi", "stop": 5})",
               "'stop' must be a string or a list of strings");
  expect_error(h, "/v1/completions", R"({"prompt": "Hi", "skip_special_tokens": "yes"})",
               "'skip_special_tokens' must be true or false");
  expect_error(h, "/v1/completions", R"({"prompt": [1, 512]})", "outside the vocabulary");
  expect_error(h, "/v1/completions", R"({"prompt": "Hi", "stop_token_ids": [600]})",
               "outside the vocabulary");
  expect_error(h, cc, R"({"messages": "hi"})", "'messages' must be a non-empty list");
  expect_error(h, cc, R"({"messages": [{"role": "user", "content": 5}]})",
               "must be a string or a list of text parts");
  expect_error(h, cc,
               R"({"messages": [{"role": "user", "content": [{"type": "image_url", "x": 1}]}]})",
               "only text content parts");
  expect_error(h, cc,
               R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": []})",
               "'chat_template_kwargs' must be an object");
  expect_error(h, "/generate", R"({"text": []})", "'text' is an empty list");
  expect_error(h, "/generate", R"({"text": 5})", "'text' must be a string");
  expect_error(h, "/generate", R"({"text": "Hi", "sampling_params": {"stop": [1]}})",
               "'stop' must be a string or a list of strings");
  EXPECT_EQ(h.client().Get("/health")->status, 200);
  EXPECT_EQ(h.post("/v1/completions", completion(kPrompt)).first, 200);
  h.expect_pools_empty();

  // Without a tokenizer, whatever needs text says how to give the server one.
  Harness bare;
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/completions", R"({"prompt": "Hi"})"},
           {cc, R"({"messages": [{"role": "user", "content": "hi"}]})"},
           {"/generate", R"({"text": "Hi"})"},
           {"/v1/completions", R"({"prompt": [1, 2], "stop": "x"})"}})
    expect_error(bare, path, body, "--tokenizer-path");
  EXPECT_EQ(
      bare.post("/v1/completions", std::string(R"({"prompt": [1, 2], "max_tokens": 2})")).first,
      200);

  // Another model's tokenizer: its ids do not fit this model.
  Harness mismatched({}, 4096, 16, "llama", std::string(STRATA_TOKENIZER_DATA) + "/qwen3");
  expect_error(mismatched, "/v1/completions", R"({"prompt": "Hello world"})",
               "outside the model's vocabulary (0..511)");
}

// The real binary with --tokenizer-path: text in, the text `strata generate` gives out.
TEST(ServerText, ServeCommandTakesTheTokenizerPath) {
  const json expected = generate_cli("llama", "--prompt", kPrompt);
  test::ServeProcess serve("--model " + test::fixture_dir("llama") + " --tokenizer-path " +
                           test::tiny_tokenizer_dir() + " --threads 2 --context-length 256");
  const int port = serve.port();
  ASSERT_GT(port, 0) << serve.log();
  httplib::Client c = serve.client();
  auto res = c.Post("/v1/completions", completion(kPrompt).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], expected["text"]) << res->body;
  EXPECT_EQ(serve.stop(), 0) << serve.log();

  std::string out, err;
  EXPECT_EQ(test::run_strata("serve --model " + test::fixture_dir("llama") +
                                 " --tokenizer-path /nonexistent --port 0",
                             &out, &err),
            1);
  EXPECT_NE(err.find("--tokenizer-path: no tokenizer at /nonexistent"), std::string::npos) << err;
}

}  // namespace
}  // namespace strata
