// LoadProgress writes a line at each tenth of a known whole (and every few seconds, which a
// test does not wait for), and one at the end; none below --log-level info.
#include "model/load_progress.h"

#include <gtest/gtest.h>

#include "core/log.h"

namespace strata {
namespace {

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

TEST(LoadProgress, ALineAtEachTenthAndAtTheEnd) {
  ASSERT_TRUE(log::set_level("info"));
  testing::internal::CaptureStderr();  // not a terminal: lines, no bar
  {
    LoadProgress p("weights", 1000);
    for (int i = 0; i < 20; ++i) p.add(50, 200);  // 20 tensors, a tenth every second one
    p.finish();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "INFO loading weights: "), 9u) << err;  // 10%, 20%, ..., 90%
  EXPECT_NE(err.find("loading weights: 10% of 1000 parameters, 400 B in 2 tensors"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("INFO loaded weights: 100% of 1000 parameters, 3.9 KiB in 20 tensors"),
            std::string::npos)
      << err;

  ASSERT_TRUE(log::set_level("warning"));
  testing::internal::CaptureStderr();
  {
    LoadProgress p("weights", 1000);
    p.add(1000, 4000);
    p.finish();
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(log::set_level("info"));
}

}  // namespace
}  // namespace strata
