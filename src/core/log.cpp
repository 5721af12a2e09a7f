#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>

namespace strata::log {

namespace {

std::atomic<Level> g_level{Level::info};

// One logger, stderr, lines whole across threads (the _mt sink locks per line), in SGLang's
// shape: "[2026-01-02 10:11:12] INFO message".
spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    auto l = std::make_shared<spdlog::logger>("strata",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("[%Y-%m-%d %H:%M:%S] %v");
    l->set_level(spdlog::level::trace);  // the gate is enabled(), before anything is formatted
    l->flush_on(spdlog::level::trace);   // lines appear as they happen (a log is read live)
    return l;
  }();
  return *instance;
}

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
  static constexpr spdlog::level::level_enum kLevels[] = {spdlog::level::debug, spdlog::level::info,
                                                          spdlog::level::warn, spdlog::level::err};
  const int i = static_cast<int>(l);
  logger().log(kLevels[i], "{} {}", kNames[i], message);
}

}  // namespace strata::log
