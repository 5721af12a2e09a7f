#!/usr/bin/env bash
# The Release build in build/: one configure line for setup.sh and test.sh (so the second call
# is a no-op), extra CMake arguments appended (e.g. a compiler launcher). Wherever nvcc is
# installed the build includes the CUDA backend: the CUDA code must compile everywhere, and one
# build then serves both the CPU suite and the CUDA compile check (CI has nvcc but no GPU; the
# GPU tests skip there with a visible message). STRATA_CUDA=OFF builds the CPU engine alone.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda=(-DSTRATA_CUDA=OFF)
if [ "${STRATA_CUDA:-auto}" != OFF ] && [ -x "$NVCC" ]; then
  cuda=(-DSTRATA_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC")
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" -DSTRATA_STATIC_OPENBLAS=OFF "$@"
cmake --build build
