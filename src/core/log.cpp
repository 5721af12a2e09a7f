#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace strata::log {

namespace {
std::atomic<Level> g_level{Level::info};
std::mutex g_mu;
}  // namespace

bool set_level(std::string_view name) {
  Level l;
  if (name == "debug")
    l = Level::debug;
  else if (name == "info")
    l = Level::info;
  else if (name == "warning" || name == "warn")
    l = Level::warning;
  else if (name == "error" || name == "critical")
    l = Level::error;
  else
    return false;
  g_level = l;
  return true;
}

Level level() {
  return g_level.load(std::memory_order_relaxed);
}

void write(Level l, std::string_view message) {
  static constexpr const char* kNames[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "[%s] %s %.*s\n", stamp, kNames[static_cast<int>(l)],
               static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
}

}  // namespace strata::log
