#!/usr/bin/env bash
# The test suite: the Release build's tests, then the same suite under AddressSanitizer +
# UndefinedBehaviorSanitizer. Heavy tests run only with STRATA_HEAVY_TESTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)

# Release (with the CUDA backend wherever nvcc is installed: its GPU tests skip without a GPU,
# and run on a machine that has one; the pipeline ones need two GPUs and mpirun).
./scripts/build.sh
ctest --test-dir build -j"$JOBS" --output-on-failure

# Line tables (-g1) are all a sanitizer report's stack needs (file:line); full debug info would
# cost a fifth of this build's time on CI's two cores.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=ON -DSTRATA_CUDA=OFF \
  -DCMAKE_CXX_FLAGS=-O1 -DCMAKE_CXX_FLAGS_DEBUG=-g1
cmake --build build-asan
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The goldens with bf16 and int8 weights are left to the Release run: they repeat the f32
# goldens' model code with other weight kernels, which the op cases (OpsBf16Weights, OpsInt8Weights,
# CpuLinearBf16/Int8) and the tiny model's int8 tests run here under the sanitizers.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp \
  ctest --test-dir build-asan -j"$JOBS" --output-on-failure \
  -E 'Pipeline|TensorParallel|GoldenCpuBf16|GoldenCpuInt8'
# Pipeline and tensor-parallel tests run processes under mpirun: OpenMPI's dlopen'd components leave
# allocations that LeakSanitizer sees from unloaded ("unknown") modules and no suppression can
# name, so these run with every ASan/UBSan check but the leak check.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
  ctest --test-dir build-asan -j"$JOBS" --output-on-failure -R 'Pipeline|TensorParallel'


# Fuzzing (fuzz/README.md): the parsers' libFuzzer targets, built with clang under ASan + UBSan,
# each from its seed corpus for a bounded time; a crash, sanitizer report or hang fails here.
# 10 s per target in CI; STRATA_HEAVY_TESTS=1 runs each for 5 minutes; FUZZ_SECONDS=0 skips.
if [ "${FUZZ_SECONDS:-10}" = 0 ]; then
  echo "fuzzing skipped: FUZZ_SECONDS=0"
elif command -v clang++ >/dev/null; then
  ./fuzz/run.sh "$([ -n "${STRATA_HEAVY_TESTS:-}" ] && echo 300 || echo "${FUZZ_SECONDS:-10}")"
else
  echo "fuzzing skipped: clang++ is not installed (apt-get install clang)"
fi
