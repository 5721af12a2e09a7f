#include "server/request_fields.h"

#include <gtest/gtest.h>

#include "server/request_parsing.h"

namespace strata {
namespace {

// The message and param of the HttpError `fn` throws ("" when it throws none).
std::pair<std::string, std::string> error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const HttpError& e) {
    return {e.what(), e.param};
  }
  return {"", ""};
}

TEST(RequestFields, UnknownAndHarmlessFieldsAreAcceptedWrongTypesAreNot) {
  const json ok = json::parse(R"({"n": 1, "parallel_tool_calls": true, "metadata": {"a": "b"},
      "store": false, "reasoning_effort": "low", "service_tier": "auto", "user": "u1",
      "some_sdk_field": [1, 2], "response_format": {"type": "text"}, "user2": null})");
  EXPECT_NO_THROW(check_fields(ok, {"n"}, "the request"));
  for (const char* bad : {R"({"user": 5})", R"({"store": "yes"})", R"({"metadata": [1]})",
                          R"({"parallel_tool_calls": 1})"}) {
    const json j = json::parse(bad);
    const auto [message, param] = error_of([&] { check_fields(j, {}, "the request"); });
    EXPECT_NE(message.find("must be"), std::string::npos) << bad;
    EXPECT_EQ(param, j.begin().key());
  }
}

TEST(RequestFields, FieldsThatWouldChangeTheAnswerAreRefusedByName) {
  for (const char* bad : {R"({"guided_json": {"type": "object"}})", R"({"guided_regex": "[a-z]+"})",
                          R"({"prompt_logprobs": 1})"}) {
    const json j = json::parse(bad);
    const auto [message, param] = error_of([&] { check_fields(j, {}, "the request"); });
    EXPECT_NE(message.find("is not supported by this server"), std::string::npos) << bad;
    EXPECT_EQ(param, j.begin().key());
  }
  EXPECT_NO_THROW(check_fields(json::parse(R"({"guided_regex": null})"), {}, "sampling_params"));
}

TEST(RequestFields, SamplingControlsAreReadWithTheirTypesChecked) {
  const json body = json::parse(R"({"temperature": 0.5, "top_k": -1, "min_p": 0.1,
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.2,
      "min_tokens": 3, "logit_bias": {"7": -100, "12": 2.5}, "stop_token_ids": [4],
      "ignore_eos": true})");
  const SamplingParams p = read_sampling_controls(body, "min_tokens");
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.2f);
  EXPECT_EQ(p.min_new_tokens, 3);
  ASSERT_EQ(p.logit_bias.size(), 2u);
  EXPECT_EQ(p.logit_bias[0], (std::pair<int, float>{12, 2.5f}));  // JSON objects: key order
  EXPECT_EQ(p.logit_bias[1], (std::pair<int, float>{7, -100.0f}));
  EXPECT_EQ(p.stop_token_ids, std::vector<int>{4});
  EXPECT_FALSE(p.stop_at_eos);
  // SGLang's spelling on /generate.
  EXPECT_EQ(read_sampling_controls(json::parse(R"({"min_new_tokens": 2})"), "min_new_tokens")
                .min_new_tokens,
            2);
  for (const auto& [bad, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"presence_penalty": "high"})", "presence_penalty"},
           {R"({"repetition_penalty": [1]})", "repetition_penalty"},
           {R"({"min_tokens": 1.5})", "min_tokens"},
           {R"({"min_tokens": -1})", "min_tokens"},
           {R"({"logit_bias": [1, 2]})", "logit_bias"},
           {R"({"logit_bias": {"x": 1}})", "logit_bias"},
           {R"({"logit_bias": {"-3": 1}})", "logit_bias"},
           {R"({"logit_bias": {"3": "up"}})", "logit_bias"}}) {
    const json j = json::parse(bad);
    const auto [message, param] = error_of([&] { read_sampling_controls(j, "min_tokens"); });
    EXPECT_FALSE(message.empty()) << bad;
    EXPECT_EQ(param, field) << bad << " -> " << message;
  }
}

}  // namespace
}  // namespace strata
