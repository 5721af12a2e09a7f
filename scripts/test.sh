#!/usr/bin/env bash
# The test suite: the Release build's tests, then the same suite under AddressSanitizer +
# UndefinedBehaviorSanitizer. Heavy tests run only with STRATA_HEAVY_TESTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
ctest --test-dir build -j"$JOBS" --output-on-failure

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=ON -DCMAKE_CXX_FLAGS=-O1
cmake --build build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j"$JOBS" --output-on-failure
