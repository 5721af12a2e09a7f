#pragma once
// One error type for everything the user can cause: bad flags, broken model directories,
// malformed checkpoints, requests that do not fit. The message names the problem and the fix;
// the CLI prints it and exits non-zero, the server turns it into an HTTP 4xx.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace strata {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Raised for a request that cannot be served (bad ids, too long): the engine keeps running.
class RequestError : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// An internal invariant; violating it is a bug in strata, not in the input.
#define STRATA_CHECK(cond, ...)                                                                 \
  do {                                                                                          \
    if (!(cond))                                                                                \
      throw ::strata::Error(fmt::format("internal error at {}:{}: {} ({})", __FILE__, __LINE__, \
                                        #cond, fmt::format(__VA_ARGS__)));                      \
  } while (0)

}  // namespace strata
