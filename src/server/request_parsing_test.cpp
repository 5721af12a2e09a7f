#include "server/request_parsing.h"

#include <gtest/gtest.h>

namespace strata {

TEST(RequestParsing, Utf8ValidationRejectsBrokenSequences) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC3"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));  // surrogate
  EXPECT_FALSE(is_valid_utf8("\xFF"));
}

TEST(RequestParsing, BodiesAndFieldsFailWithTheFieldNamed) {
  EXPECT_THROW(parse_body("{not json"), HttpError);
  EXPECT_THROW(parse_body("[1, 2]"), HttpError);
  EXPECT_THROW(parse_body("{\"a\": \"\xFF\"}"), HttpError);
  const json j = parse_body(
      R"({"n": 2, "t": 0.5, "s": "x", "b": true, "f": 3.0, "bad": "3", "ids": [1, 2.5]})");
  EXPECT_EQ(get_integer(j, "n"), 2);
  EXPECT_EQ(get_integer(j, "f"), 3);
  EXPECT_EQ(get_integer(j, "missing"), std::nullopt);
  EXPECT_EQ(get_number(j, "t"), 0.5);
  try {
    get_integer(j, "bad");
    FAIL();
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "bad");
    EXPECT_NE(std::string(e.what()).find("must be an integer, got a string"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(to_token_ids(j["ids"], "ids"), HttpError);
  EXPECT_THROW(reject_unknown_fields(j, {"n"}, "the request"), HttpError);
  const json e = json::parse(error_body(404, "no such model", "invalid_request_error", "model"));
  EXPECT_EQ(e["error"]["code"], 404);
  EXPECT_EQ(e["error"]["param"], "model");
}

}  // namespace strata
