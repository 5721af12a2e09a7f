#pragma once
// The server's log: lines on stderr, "[time] LEVEL message", below --log-level dropped, written
// through spdlog (one logger, a thread-safe stderr sink: lines interleave whole across
// threads). Levels as SGLang's --log-level spells them.
#include <fmt/format.h>

#include <string>
#include <string_view>

namespace strata::log {

enum class Level { debug = 0, info = 1, warning = 2, error = 3 };

// "debug" | "info" | "warning" | "error" (also "critical" = error, "warn" = warning); false
// for anything else, leaving the level as it was.
bool set_level(std::string_view name);
Level level();
inline bool enabled(Level l) {
  return l >= level();
}
void write(Level l, std::string_view message);

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::debug)) write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::info)) write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warning(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::warning)) write(Level::warning, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace strata::log
