// libFuzzer target: the JSON bodies of the HTTP routes, as far as they are read without a
// model: field checks (known, ignored, refused fields and their types) and the sampling
// controls every route reads, then their ranges. Input: a request body. Anything but an
// HttpError or a strata Error (each a 4xx) is a bug.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "server/request_fields.h"
#include "server/request_parsing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  const strata::json j = strata::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return 0;
  for (const char* min_key : {"min_tokens", "min_new_tokens"}) {
    try {
      strata::check_fields(j, {"prompt", "messages", "max_tokens", "stream", "n", "model"},
                           "request");
      strata::SamplingParams p = strata::read_sampling_controls(j, min_key);
      p.validate();
      (void)strata::read_logit_bias(j);
      if (j.contains("sampling_params") && j["sampling_params"].is_object())
        (void)strata::read_sampling_controls(j["sampling_params"], min_key).validate();
    } catch (const strata::HttpError&) {
    } catch (const strata::Error&) {
    }
  }
  return 0;
}
