#pragma once
// Progress of loading a stage's weights, reported while it runs (an 8B model takes tens of
// seconds): at --log-level info, a line every few seconds and at each tenth of the whole (when
// the whole is known), with the bytes placed on the device, the tensors, the total and the
// rate; on a terminal a bar redrawn in place instead of the lines. finish() reports the end.
#include <chrono>
#include <cstdint>
#include <string>

namespace strata {

// "512 B", "3.4 MiB", "15.02 GiB": sizes in log lines, tiny test models to 8B ones.
std::string human_bytes(double bytes);

class LoadProgress {
 public:
  // `total_elements`: the parameters the stage will load (0: unknown, as with dummy weights or
  // a pipeline stage, which loads part of a checkpoint); `what` names the load in the lines.
  LoadProgress(std::string what, int64_t total_elements);
  // One tensor of `elements` parameters, `bytes` on the device, is in place.
  void add(int64_t elements, size_t bytes);
  void finish();

  // How often a line is written while loading (a bar is redrawn more often).
  static constexpr double kLineInterval = 2.0;  // seconds

 private:
  void report(bool last);

  std::string what_;
  int64_t total_ = 0, elements_ = 0, tensors_ = 0;
  size_t bytes_ = 0;
  int tenth_reported_ = 0;
  bool bar_ = false, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_report_;
};

}  // namespace strata
