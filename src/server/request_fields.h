#pragma once
// Which request fields strata reads, ignores or refuses, and the sampling controls that
// /generate's sampling_params and the OpenAI bodies share (one reading of each field).
//
// As vLLM documents: fields a server does not know are ignored (logged once each at debug
// level), since SDKs and frameworks add their own; fields that would change the result and
// are not supported get a 400 naming them; a known field of the wrong type is a 400 naming
// it, also when it is one of the ignored ones (OpenAI's `user` is a string, `store` a bool).
#include <set>
#include <string>

#include "model/json_util.h"
#include "runtime/sampler.h"
#include "server/generation_defaults.h"

namespace strata {

// Checks the fields of `obj` (the request body, or `where`: "sampling_params"): OpenAI and
// SGLang fields that change nothing here are type-checked, fields that would change the
// answer in ways strata does not do are refused, and fields in neither list nor in `known`
// (what the route reads) are logged and ignored.
void check_fields(const json& obj, const std::set<std::string>& known, const std::string& where);

// The sampling controls of `obj`: temperature, top_p, top_k, min_p, presence_penalty,
// frequency_penalty, repetition_penalty, logit_bias, stop_token_ids, ignore_eos, and the
// minimum output length under `min_tokens_key` (OpenAI/vLLM: min_tokens; SGLang:
// min_new_tokens). Types are checked here (400 naming the field), ranges by
// SamplingParams::validate. Fields left out take `defaults` (generation_defaults.h). The
// caller sets max_new_tokens and the seed.
SamplingParams read_sampling_controls(const json& obj, const std::string& min_tokens_key,
                                      const SamplingDefaults& defaults = {});

// OpenAI's logit_bias: {"token id": bias, ...} (keys are strings in JSON).
std::vector<std::pair<int, float>> read_logit_bias(const json& obj);

}  // namespace strata
