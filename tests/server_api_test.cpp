// The API surface real clients use, over HTTP on loopback with the tiny Llama (and the tiny
// ChatML tokenizer where text is needed): fields SDKs add are ignored while wrong types of
// known ones are 400s, the sampling controls (logit_bias, min_tokens, penalties, n, seeds)
// on /generate and the OpenAI routes, batched /generate, the utility routes, --api-key, CORS,
// and tools rendered through a real chat template (Qwen3's).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "server_harness.h"
#include "test_util.h"

namespace strata {

namespace {

using namespace std::chrono_literals;

using test::Harness;

json completion(const std::vector<int>& ids, int n) {
  return {{"prompt", ids}, {"max_tokens", n}, {"temperature", 0}, {"ignore_eos", true}};
}

std::vector<int> ids_of(const json& choice) {
  return choice["token_ids"].get<std::vector<int>>();
}

std::unique_ptr<Harness> text_harness(ServerOptions so = {},
                                      const std::string& tokenizer = test::tiny_tokenizer_dir(),
                                      int context_length = 0) {
  RunnerOptions ro = test::harness_runner_options(4096, 16);
  if (context_length > 0) ro.max_context_len = context_length;
  return std::make_unique<Harness>("llama", ro, SchedulerOptions{}, tokenizer, "llama",
                                   std::move(so));
}

}  // namespace

TEST(ServerApi, FieldsSdksAddAreIgnoredAndWrongTypesOfKnownOnesAreNot) {
  Harness h;
  json body = completion({4, 5, 6}, 3);
  const auto [plain_status, plain] = h.post("/v1/completions", body);
  ASSERT_EQ(plain_status, 200) << plain.dump();
  const json added = json::parse(R"({"parallel_tool_calls": false, "metadata": {"a": "b"},
      "store": false, "reasoning_effort": "low", "service_tier": "auto", "user": "me",
      "some_new_sdk_field": {"x": [1]}})");
  for (const auto& [k, v] : added.items()) body[k] = v;
  const auto [status, reply] = h.post("/v1/completions", body);
  ASSERT_EQ(status, 200) << reply.dump();
  EXPECT_EQ(ids_of(reply["choices"][0]), ids_of(plain["choices"][0]));
  // max_completion_tokens on /v1/completions too (vLLM's reading).
  json newer = completion({4, 5, 6}, 3);
  newer.erase("max_tokens");
  newer["max_completion_tokens"] = 2;
  const auto [s2, r2] = h.post("/v1/completions", newer);
  ASSERT_EQ(s2, 200) << r2.dump();
  EXPECT_EQ(r2["usage"]["completion_tokens"], 2);
  // An unknown sampling_params field on /generate is ignored too.
  const auto [s3, r3] = h.post(
      "/generate",
      json{{"input_ids", {4, 5, 6}},
           {"sampling_params", {{"max_new_tokens", 3}, {"temperature", 0}, {"future_knob", 1}}}});
  EXPECT_EQ(s3, 200) << r3.dump();
  for (const auto& [bad, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt": [1], "store": "yes"})", "store"},
           {R"({"prompt": [1], "presence_penalty": "x"})", "presence_penalty"},
           {R"({"prompt": [1], "logit_bias": {"a": 1}})", "logit_bias"},
           {R"({"prompt": [1], "logit_bias": {"100000": 1}})", ""},
           {R"({"prompt": [1], "response_format": {"type": "json_object"}})", "response_format"},
           {R"({"prompt": [1], "n": 2, "best_of": 1})", "best_of"},
           {R"({"prompt": [1], "min_tokens": 30, "max_tokens": 5})", ""}}) {
    const auto [s, e] = h.post("/v1/completions", bad);
    EXPECT_EQ(s, 400) << bad << " -> " << e.dump();
    if (!field.empty()) {
      EXPECT_EQ(e["error"]["param"], field) << bad << " -> " << e.dump();
    }
  }
}

TEST(ServerApi, SamplingControlsActOnEveryRoute) {
  Harness h;
  const std::vector<int> prompt = {7, 8, 9, 10};
  // logit_bias +100 makes one token the greedy choice at every step, on both APIs.
  json forced = completion(prompt, 4);
  forced["logit_bias"] = {{"42", 100}};
  const auto [s1, r1] = h.post("/v1/completions", forced);
  ASSERT_EQ(s1, 200) << r1.dump();
  EXPECT_EQ(ids_of(r1["choices"][0]), std::vector<int>(4, 42));
  const auto [s2, r2] =
      h.post("/generate",
             json{{"input_ids", prompt},
                  {"sampling_params",
                   {{"max_new_tokens", 4}, {"temperature", 0}, {"logit_bias", {{"42", 100}}}}}});
  ASSERT_EQ(s2, 200) << r2.dump();
  EXPECT_EQ(r2["output_ids"].get<std::vector<int>>(), std::vector<int>(4, 42));

  // min_tokens: a stop token (the first greedy token) cannot end the answer before it.
  const auto [s3, plain] = h.post("/v1/completions", completion(prompt, 6));
  ASSERT_EQ(s3, 200);
  const int first = plain["choices"][0]["token_ids"][0];
  json stopping = completion(prompt, 6);
  stopping["stop_token_ids"] = {first};
  const auto [s4, stopped] = h.post("/v1/completions", stopping);
  EXPECT_EQ(ids_of(stopped["choices"][0]).size(), 1u);
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
  stopping["min_tokens"] = 3;
  const auto [s5, held] = h.post("/v1/completions", stopping);
  ASSERT_EQ(s5, 200) << held.dump();
  const auto held_ids = ids_of(held["choices"][0]);
  ASSERT_GE(held_ids.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NE(held_ids[i], first) << i;
  // SGLang's spelling on /generate: the same tokens.
  const auto [s6, gen] = h.post("/generate", json{{"input_ids", prompt},
                                                  {"sampling_params",
                                                   {{"max_new_tokens", 6},
                                                    {"temperature", 0},
                                                    {"ignore_eos", true},
                                                    {"stop_token_ids", {first}},
                                                    {"min_new_tokens", 3}}}});
  ASSERT_EQ(s6, 200) << gen.dump();
  EXPECT_EQ(gen["output_ids"].get<std::vector<int>>(), held_ids);

  // Penalties: the same request gives the same tokens on both APIs, and differs from plain
  // greedy decoding (the scheduler test checks the values against their definitions).
  json penalized = completion(prompt, 12);
  penalized["repetition_penalty"] = 2.0;
  penalized["frequency_penalty"] = 1.0;
  penalized["presence_penalty"] = 1.0;
  const auto [s7, pen] = h.post("/v1/completions", penalized);
  ASSERT_EQ(s7, 200) << pen.dump();
  const auto [s8, plain12] = h.post("/v1/completions", completion(prompt, 12));
  EXPECT_NE(ids_of(pen["choices"][0]), ids_of(plain12["choices"][0]));
  const auto [s9, gen_pen] = h.post("/generate", json{{"input_ids", prompt},
                                                      {"sampling_params",
                                                       {{"max_new_tokens", 12},
                                                        {"temperature", 0},
                                                        {"ignore_eos", true},
                                                        {"repetition_penalty", 2.0},
                                                        {"frequency_penalty", 1.0},
                                                        {"presence_penalty", 1.0}}}});
  EXPECT_EQ(gen_pen["output_ids"].get<std::vector<int>>(), ids_of(pen["choices"][0]));
  h.expect_pools_empty();
}

TEST(ServerApi, SeededSamplesAreReproducibleAndNChoicesDiffer) {
  Harness h;
  json body = {{"prompt", {3, 4, 5}},
               {"max_tokens", 8},
               {"temperature", 1.5},
               {"min_p", 0.01},
               {"ignore_eos", true},
               {"seed", 1234},
               {"n", 3}};
  const auto [s1, a] = h.post("/v1/completions", body);
  const auto [s2, b] = h.post("/v1/completions", body);
  ASSERT_EQ(s1, 200) << a.dump();
  ASSERT_EQ(a["choices"].size(), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(ids_of(a["choices"][k]), ids_of(b["choices"][k]));
  EXPECT_FALSE(ids_of(a["choices"][0]) == ids_of(a["choices"][1]) &&
               ids_of(a["choices"][1]) == ids_of(a["choices"][2]));
  // n on /generate: a list, sample j seeded seed + j as on the OpenAI route.
  const auto [s3, g] = h.post("/generate", json{{"input_ids", {3, 4, 5}},
                                                {"sampling_params",
                                                 {{"max_new_tokens", 8},
                                                  {"temperature", 1.5},
                                                  {"min_p", 0.01},
                                                  {"ignore_eos", true},
                                                  {"seed", 1234},
                                                  {"n", 3}}}});
  ASSERT_EQ(s3, 200) << g.dump();
  ASSERT_TRUE(g.is_array() && g.size() == 3u) << g.dump();
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(g[k]["output_ids"].get<std::vector<int>>(), ids_of(a["choices"][k]));
    EXPECT_EQ(g[k]["index"], k);
  }
}

TEST(ServerApi, GenerateTakesABatch) {
  auto h = text_harness();
  const json sp = {{"max_new_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}};
  std::vector<json> singles;
  for (const char* t : {"Hello there", "The quick brown fox"}) {
    const auto [s, one] = h->post("/generate", json{{"text", t}, {"sampling_params", sp}});
    ASSERT_EQ(s, 200) << one.dump();
    EXPECT_TRUE(one.is_object());
    singles.push_back(one);
  }
  const auto [s1, batch] = h->post(
      "/generate", json{{"text", {"Hello there", "The quick brown fox"}}, {"sampling_params", sp}});
  ASSERT_EQ(s1, 200) << batch.dump();
  ASSERT_TRUE(batch.is_array() && batch.size() == 2u) << batch.dump();
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(batch[k]["text"], singles[k]["text"]);
    EXPECT_EQ(batch[k]["output_ids"], singles[k]["output_ids"]);
  }
  // input_ids as a list of lists, with per-prompt sampling_params.
  const auto [s2, ids] = h->post(
      "/generate", json{{"input_ids", {{4, 5, 6}, {7, 8}}},
                        {"sampling_params",
                         {sp, {{"max_new_tokens", 2}, {"temperature", 0}, {"ignore_eos", true}}}}});
  ASSERT_EQ(s2, 200) << ids.dump();
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0]["output_ids"].size(), 5u);
  EXPECT_EQ(ids[1]["output_ids"].size(), 2u);
  // Streamed: every event names its request by index; the last of each is the whole answer.
  bool done = false;
  const auto events = h->stream("/generate",
                                json{{"text", {"Hello there", "The quick brown fox"}},
                                     {"sampling_params", sp},
                                     {"stream", true}},
                                &done);
  EXPECT_TRUE(done);
  std::map<int, json> last;
  for (const auto& e : events) last[e["index"].get<int>()] = e;
  ASSERT_EQ(last.size(), 2u);
  for (int k = 0; k < 2; ++k) EXPECT_EQ(last[k]["text"], singles[k]["text"]);
  const auto [s3, bad] =
      h->post("/generate", json{{"input_ids", {{4}, {5}}}, {"sampling_params", json::array({sp})}});
  EXPECT_EQ(s3, 400) << bad.dump();
}

TEST(ServerApi, TokenizeDetokenizeModelsAndServerInfo) {
  auto h = text_harness();
  const auto [s1, tok] = h->post("/tokenize", json{{"prompt", "Hello world"}});
  ASSERT_EQ(s1, 200) << tok.dump();
  EXPECT_EQ(tok["tokens"].get<std::vector<int>>(), h->codec()->encode("Hello world", true));
  EXPECT_EQ(tok["count"], tok["tokens"].size());
  const auto [s2, detok] = h->post("/detokenize", json{{"tokens", tok["tokens"]}});
  ASSERT_EQ(s2, 200) << detok.dump();
  EXPECT_EQ(detok["prompt"], h->codec()->decode(tok["tokens"], false));
  // Chat messages: the ids the chat route prompts with (its usage counts them).
  const json messages = {{{"role", "user"}, {"content", "Hi!"}}};
  const auto [s3, chat_tok] = h->post("/tokenize", json{{"messages", messages}});
  const auto [s4, chat] = h->post(
      "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}});
  ASSERT_EQ(s3, 200) << chat_tok.dump();
  ASSERT_EQ(s4, 200) << chat.dump();
  EXPECT_EQ(chat_tok["count"], chat["usage"]["prompt_tokens"]);
  const auto [s5, no_gen] =
      h->post("/tokenize", json{{"messages", messages}, {"add_generation_prompt", false}});
  EXPECT_LT(no_gen["count"].get<int>(), chat_tok["count"].get<int>());
  EXPECT_EQ(h->post("/detokenize", json{{"tokens", {1, 99999}}}).first, 400);

  auto cli = h->client();
  auto model = cli.Get("/v1/models/llama");
  ASSERT_TRUE(model);
  EXPECT_EQ(model->status, 200);
  EXPECT_EQ(json::parse(model->body)["id"], "llama");
  auto missing = cli.Get("/v1/models/gpt-9");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["code"], 404);
  auto info = cli.Get("/get_server_info");
  ASSERT_EQ(info->status, 200);
  const json i = json::parse(info->body);
  EXPECT_EQ(i["served_model_name"], "llama");
  EXPECT_EQ(i["internal_states"][0]["num_running_reqs"], 0);
}

TEST(ServerApi, AbortRequestEndsTheNamedRequest) {
  RunnerOptions ro = test::harness_runner_options(4096, 16);
  ro.max_context_len = 1024;
  Harness h("llama", ro, SchedulerOptions{});
  // As long as the context allows (1024 positions), so that it cannot finish before the abort
  // sent on its first event arrives, however the machine is loaded.
  json body = {
      {"input_ids", {4, 5, 6}},
      {"rid", "long-one"},
      {"stream", true},
      {"sampling_params", {{"max_new_tokens", 1000}, {"temperature", 0}, {"ignore_eos", true}}}};
  std::vector<json> events;
  bool done = false;
  int aborted = -1;
  std::thread client([&] {
    events = h.stream("/generate", body, &done, [&](const json&) {
      if (aborted < 0)
        aborted = h.post("/abort_request", json{{"rid", "long-one"}}).second["aborted"].get<int>();
    });
  });
  client.join();
  EXPECT_EQ(aborted, 1);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["meta_info"]["finish_reason"]["type"], "abort");
  EXPECT_LT(events.back()["output_ids"].size(), 1000u);
  EXPECT_EQ(h.post("/abort_request", json{{"rid", "long-one"}}).second["aborted"], 0);
  EXPECT_EQ(h.post("/abort_request", json::object()).first, 400);
  h.expect_pools_empty();
}

TEST(ServerApi, ApiKeyAndCors) {
  ServerOptions so;
  so.api_key = "sk-test";
  so.allowed_origins = {"http://ui.example"};
  Harness h("llama", test::harness_runner_options(4096, 4), SchedulerOptions{}, "", "llama", so);
  auto cli = h.client();
  const std::string body = completion({4, 5}, 2).dump();
  auto none = cli.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["type"], "invalid_request_error");
  auto wrong =
      cli.Post("/v1/completions", {{"Authorization", "Bearer sk-nope"}}, body, "application/json");
  EXPECT_EQ(wrong->status, 401);
  auto right =
      cli.Post("/v1/completions", {{"Authorization", "Bearer sk-test"}}, body, "application/json");
  EXPECT_EQ(right->status, 200) << right->body;
  EXPECT_EQ(cli.Get("/health")->status, 200);  // open to load balancers
  EXPECT_EQ(cli.Get("/v1/models")->status, 401);

  // CORS: a preflight from an allowed origin, without credentials, is answered; another
  // origin is refused; answers to the allowed origin carry its header.
  auto preflight = cli.Options("/v1/chat/completions",
                               {{"Origin", "http://ui.example"},
                                {"Access-Control-Request-Method", "POST"},
                                {"Access-Control-Request-Headers", "authorization,content-type"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "http://ui.example");
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"),
            "authorization,content-type");
  auto foreign = cli.Options("/v1/chat/completions", {{"Origin", "http://evil.example"},
                                                      {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(foreign->status, 403);
  auto answered = cli.Post("/v1/completions",
                           {{"Authorization", "Bearer sk-test"}, {"Origin", "http://ui.example"}},
                           body, "application/json");
  EXPECT_EQ(answered->get_header_value("Access-Control-Allow-Origin"), "http://ui.example");
}

// Tools go through the chat template (Qwen3's, over the tiny tokenizer's ChatML tokens): the
// prompt describes them, the format is read from it (hermes), and tool_choice "none" leaves
// them out. Calls forced by tool_choice (required, named) are constrained by the grammar engine,
// so even the random model answers a valid call.
TEST(ServerApi, ToolsAreRenderedThroughTheChatTemplate) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("strata_tools_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(test::tiny_tokenizer_dir() + "/tokenizer.json", dir / "tokenizer.json",
                fs::copy_options::overwrite_existing);
  json config = json::parse(std::ifstream(test::tiny_tokenizer_dir() + "/tokenizer_config.json"));
  config["chat_template"] = json::parse(std::ifstream(
      std::string(STRATA_TOKENIZER_DATA) + "/qwen3/tokenizer_config.json"))["chat_template"];
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  auto h = text_harness({}, dir.string(), 1024);  // Qwen3's tool prompt is ~400 tokens
  // Sent as text: a json object's dump would sort the keys before the server saw them.
  const std::string tools_text =
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in )"
      R"(a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, )"
      R"("required": ["city"]}}}])";
  const auto [s1, with] = h->post(
      "/tokenize", R"({"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": )" +
                       tools_text + "}");
  const json tools = json::parse(tools_text);  // (sorted keys) where the order does not matter
  const json messages = {{{"role", "user"}, {"content", "Weather in Paris?"}}};
  ASSERT_EQ(s1, 200) << with.dump();
  const std::string prompt = h->codec()->decode(with["tokens"], false);
  EXPECT_NE(prompt.find("<tool_call>"), std::string::npos) << prompt;
  // The tool as written, keys in the client's order (Python's json.dumps in transformers).
  EXPECT_NE(prompt.find(R"({"type": "function", "function": {"name": "get_weather", )"
                        R"("description": "Weather in a city", "parameters": {"type": "object", )"
                        R"("properties": {"city": {"type": "string"}}, "required": ["city"]}}})"),
            std::string::npos)
      << prompt;

  json chat = {{"messages", messages}, {"tools", tools}, {"max_tokens", 4}, {"temperature", 0}};
  nlohmann::ordered_json ordered_chat = nlohmann::ordered_json::parse(chat.dump());
  ordered_chat["tools"] = nlohmann::ordered_json::parse(tools_text);
  const auto [s2, answer] = h->post("/v1/chat/completions", ordered_chat.dump());
  ASSERT_EQ(s2, 200) << answer.dump();
  EXPECT_EQ(answer["usage"]["prompt_tokens"], with["count"]);
  EXPECT_EQ(answer["choices"][0]["message"]["role"], "assistant");
  chat["tool_choice"] = "none";
  const auto [s3, untooled] = h->post("/v1/chat/completions", chat);
  ASSERT_EQ(s3, 200) << untooled.dump();
  EXPECT_LT(untooled["usage"]["prompt_tokens"].get<int>(), with["count"].get<int>());
  // Forced calls: a tool whose arguments are bounded (an enum), so that the constrained random
  // model finishes within max_tokens.
  const json unit_tool = json::parse(
      R"({"type": "function", "function": {"name": "set_unit", "parameters": {"type": "object", )"
      R"("properties": {"unit": {"enum": ["c", "f"]}}, "required": ["unit"]}}})");
  json forced = {{"messages", messages}, {"max_tokens", 64}, {"temperature", 0.8}, {"seed", 3}};
  forced["tools"] = {tools[0], unit_tool};
  forced["tool_choice"] = {{"type", "function"}, {"function", {{"name", "set_unit"}}}};
  // Whole, then streamed (the same seed: the same output): each call opens with its id and
  // name, its arguments follow in fragments as the constrained output grows, joining to the
  // whole answer's.
  auto expect_forced_calls_stream = [&](const std::string& what) {
    const auto [s, whole] = h->post("/v1/chat/completions", forced);
    ASSERT_EQ(s, 200) << whole.dump();
    const json& calls = whole["choices"][0]["message"]["tool_calls"];
    ASSERT_GE(calls.size(), 1u) << what << whole.dump();
    EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls") << what;
    for (const auto& c : calls) {
      EXPECT_EQ(c["function"]["name"], "set_unit");
      const json args = json::parse(c["function"]["arguments"].get<std::string>());
      EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args.dump();
    }
    json body = forced;
    body["stream"] = true;
    bool done = false;
    std::vector<json> deltas;
    std::string finish;
    for (const auto& e : h->stream("/v1/chat/completions", body, &done))
      for (const auto& c : e["choices"]) {
        if (c["delta"].contains("tool_calls"))
          for (const auto& d : c["delta"]["tool_calls"]) deltas.push_back(d);
        if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
      }
    EXPECT_TRUE(done);
    EXPECT_EQ(finish, "tool_calls") << what;
    std::vector<std::string> names(calls.size()), arguments(calls.size());
    std::vector<int> fragments(calls.size(), 0);
    for (const auto& d : deltas) {
      const size_t k = d["index"];
      ASSERT_LT(k, calls.size()) << what;
      EXPECT_EQ(d.contains("id"), names[k].empty()) << what << ": only the first delta opens";
      if (d.contains("id")) {
        names[k] = d["function"]["name"];
        EXPECT_EQ(d["function"]["arguments"], "") << what;
      } else {
        ++fragments[k];
      }
      arguments[k] += d["function"]["arguments"].get<std::string>();
    }
    for (size_t k = 0; k < calls.size(); ++k) {
      EXPECT_EQ(names[k], "set_unit") << what;
      EXPECT_EQ(arguments[k], calls[k]["function"]["arguments"]) << what << " call " << k;
      EXPECT_GT(fragments[k], 1) << what << ": the arguments came whole, not as they arrived";
    }
  };
  expect_forced_calls_stream("named");
  forced["tools"] = {unit_tool};
  forced["tool_choice"] = "required";
  expect_forced_calls_stream("required");
  // A named function the request does not offer is a 400 naming tool_choice.
  forced["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  const auto [s7, unknown] = h->post("/v1/chat/completions", forced);
  EXPECT_EQ(s7, 400);
  EXPECT_EQ(unknown["error"]["param"], "tool_choice");
  // A history with a call (arguments as JSON text, as OpenAI sends them) and its result.
  json history = messages;
  history.push_back(
      {{"role", "assistant"},
       {"content", ""},  // Qwen3's template, like Python, cannot search None
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}});
  history.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18 C"}});
  const auto [s4, turn] = h->post("/tokenize", json{{"messages", history}, {"tools", tools}});
  ASSERT_EQ(s4, 200) << turn.dump();
  const std::string rendered = h->codec()->decode(turn["tokens"], false);
  const size_t call = rendered.find(R"({"name": "get_weather", "arguments": {)");
  ASSERT_NE(call, std::string::npos) << rendered;  // an object, not the JSON text quoted
  EXPECT_NE(rendered.find("Paris", call), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("18 C"), std::string::npos) << rendered;
  // Without a format in the template (the tiny ChatML one) and no --tool-call-parser: a 400.
  auto plain = text_harness();
  chat.erase("tool_choice");
  const auto [s5, refused] = plain->post("/v1/chat/completions", chat);
  EXPECT_EQ(s5, 400) << refused.dump();
  fs::remove_all(dir);
}

// A regex that matches exactly `text` (the grammar engine then makes the model write it).
std::string literal_regex(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    if (std::string("\\^$.|?*+()[]{}").find(ch) != std::string::npos) out += '\\';
    out += ch;
  }
  return out;
}

// Recorded answers in each parser's format, written by the model through a literal regex:
// streamed, each call opens with its id and name (arguments ""), its arguments come in more
// than one fragment, and they join to the arguments of the same answer not streamed.
TEST(ServerApi, ToolCallArgumentsStreamAsTheyArrive) {
  const std::string args = R"({"city": "Oslo", "days": [1, 2, 3], "unit": "celsius"})";
  const std::string ds =
      "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>";
  for (const auto& [parser, answer] : std::vector<std::pair<std::string, std::string>>{
           {"hermes", "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + args +
                          "}\n</tool_call>"},
           {"llama3", "{\"name\": \"get_weather\", \"parameters\": " + args + "}"},
           {"deepseekv31", ds + "get_weather<\uff5ctool\u2581sep\uff5c>" + args +
                               "<\uff5ctool\u2581call\u2581end\uff5c>"},
           {"mistral", "[TOOL_CALLS]get_weather[ARGS]" + args},
           {"gpt-oss",
            "<|channel|>commentary to=functions.get_weather <|constrain|>json"
            "<|message|>" +
                args + "<|call|>"}}) {
    ServerOptions so;
    so.tool_call_parser = parser;
    auto h = text_harness(so, test::tiny_tokenizer_dir(), 1024);
    const json tools = json::parse(
        R"([{"type": "function", "function": {"name": "get_weather", "parameters": {}}}])");
    json body = {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                 {"tools", tools},
                 {"max_tokens", 400},
                 {"temperature", 0},
                 {"regex", literal_regex(answer)}};
    const auto [s, whole] = h->post("/v1/chat/completions", body);
    ASSERT_EQ(s, 200) << whole.dump();
    const json& calls = whole["choices"][0]["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), 1u) << parser << ": " << whole.dump();
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(calls[0]["function"]["arguments"], args) << parser;
    EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
    body["stream"] = true;
    bool done = false;
    std::string content, arguments, finish;
    std::vector<json> call_deltas;
    for (const auto& e : h->stream("/v1/chat/completions", body, &done))
      for (const auto& c : e["choices"]) {
        if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
        if (c["delta"].contains("tool_calls"))
          for (const auto& d : c["delta"]["tool_calls"]) call_deltas.push_back(d);
        if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
      }
    EXPECT_TRUE(done);
    ASSERT_GT(call_deltas.size(), 2u) << parser;  // the opening and >1 fragment
    EXPECT_EQ(call_deltas[0]["index"], 0);
    EXPECT_EQ(call_deltas[0]["type"], "function");
    EXPECT_EQ(call_deltas[0]["id"].get<std::string>().rfind("call_", 0), 0u);
    EXPECT_EQ(call_deltas[0]["function"]["name"], "get_weather");
    EXPECT_EQ(call_deltas[0]["function"]["arguments"], "");
    for (const auto& d : call_deltas) {
      EXPECT_EQ(d["index"], 0);
      arguments += d["function"]["arguments"].get<std::string>();
    }
    for (size_t k = 1; k < call_deltas.size(); ++k) EXPECT_FALSE(call_deltas[k].contains("id"));
    EXPECT_EQ(arguments, calls[0]["function"]["arguments"]) << parser;
    const json& whole_content = whole["choices"][0]["message"]["content"];
    EXPECT_EQ(content, whole_content.is_null() ? "" : whole_content.get<std::string>()) << parser;
    EXPECT_EQ(finish, "tool_calls");
  }
}

}  // namespace strata
