#include "model/load_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/log.h"

namespace strata {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

std::string human_bytes(double bytes) {
  if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
  if (bytes < double(1 << 20)) return fmt::format("{:.1f} KiB", bytes / 1024);
  if (bytes < double(1 << 30)) return fmt::format("{:.1f} MiB", bytes / double(1 << 20));
  return fmt::format("{:.2f} GiB", bytes / double(1 << 30));
}

LoadProgress::LoadProgress(std::string what, int64_t total_elements)
    : what_(std::move(what)),
      total_(total_elements),
      // A bar only where a person watches: a terminal, and a log that shows info lines.
      bar_(isatty(STDERR_FILENO) == 1 && log::enabled(log::Level::info)),
      start_(std::chrono::steady_clock::now()),
      last_report_(start_) {}

void LoadProgress::add(int64_t elements, size_t bytes) {
  elements_ += elements;
  bytes_ += bytes;
  ++tensors_;
  if (!log::enabled(log::Level::info)) return;
  const double since = seconds_since(last_report_);
  // The whole's last tenth is finish()'s line.
  const int tenth =
      total_ > 0 && elements_ < total_ ? static_cast<int>(10 * elements_ / total_) : 0;
  if (bar_ ? since >= 0.1 : since >= kLineInterval || tenth > tenth_reported_) report(false);
}

void LoadProgress::finish() {
  if (finished_) return;
  finished_ = true;
  if (log::enabled(log::Level::info)) report(true);
}

void LoadProgress::report(bool last) {
  last_report_ = std::chrono::steady_clock::now();
  const double elapsed = seconds_since(start_);
  const double rate = elapsed > 0 ? static_cast<double>(bytes_) / elapsed : 0;
  const int percent =
      total_ > 0 ? static_cast<int>(std::min<int64_t>(100, 100 * elements_ / total_)) : -1;
  if (total_ > 0) tenth_reported_ = static_cast<int>(10 * elements_ / total_);
  const std::string share =
      percent >= 0 ? fmt::format("{}% of {} parameters, ", percent, total_) : "";
  const std::string body =
      fmt::format("{}{} in {} tensors on the device, {:.1f} s, {}/s", share,
                  human_bytes(static_cast<double>(bytes_)), tensors_, elapsed, human_bytes(rate));
  if (bar_ && !last) {
    constexpr int kWidth = 30;
    const int filled = percent >= 0 ? percent * kWidth / 100 : 0;
    const std::string bar =
        percent >= 0 ? "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] "
                     : "";
    std::fprintf(stderr, "\rloading %s%s\033[K", bar.c_str(), body.c_str());
    std::fflush(stderr);
    return;
  }
  if (bar_) std::fprintf(stderr, "\r\033[K");  // the bar gives way to the final line
  log::info("{} {}: {}", last ? "loaded" : "loading", what_, body);
}

}  // namespace strata
