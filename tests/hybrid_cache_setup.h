#pragma once
// The parameter space of the hybrid prefix-cache tests (scheduler-level and over HTTP): hybrid
// fixtures × both Mamba cache strategies × page sizes 1 and 16.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

namespace strata::test {

using HybridCacheSetup = std::tuple<std::string, std::string, int>;  // fixture, strategy, page

class HybridCacheTest : public ::testing::TestWithParam<HybridCacheSetup> {
 protected:
  const std::string& fixture() const { return std::get<0>(GetParam()); }
  const std::string& strategy() const { return std::get<1>(GetParam()); }
  int page() const { return std::get<2>(GetParam()); }
  std::string name() const {
    return fixture() + " " + strategy() + " page " + std::to_string(page());
  }
};

// Every recurrent kind (Mamba2, short conv, Gated DeltaNet): the scheduler-level tests.
inline auto hybrid_cache_setups() {
  return ::testing::Combine(
      ::testing::Values("nemotron_h", "bamba", "falcon_h1", "lfm2", "qwen3_next"),
      ::testing::Values("no_buffer", "extra_buffer"), ::testing::Values(1, 16));
}

// The Mamba2 families only: what the HTTP layer adds is the same for every recurrent kind, and
// a server run costs seconds.
inline auto mamba2_cache_setups() {
  return ::testing::Combine(::testing::Values("nemotron_h", "bamba", "falcon_h1"),
                            ::testing::Values("no_buffer", "extra_buffer"),
                            ::testing::Values(1, 16));
}

inline std::string hybrid_cache_setup_name(const ::testing::TestParamInfo<HybridCacheSetup>& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_page" +
         std::to_string(std::get<2>(info.param));
}

}  // namespace strata::test
