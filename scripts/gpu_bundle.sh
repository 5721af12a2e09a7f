#!/usr/bin/env bash
# Builds the GPU bundle on the developer machine (Debian 12 + nvcc): the CUDA build of strata
# (sm_90) and the shared libraries it needs that the H200 machine lacks (fmt, OpenBLAS, PCRE2,
# OpenMPI's libmpi, ...: everything ldd lists outside the C runtime and CUDA itself), packed
# into .devtree/gpu/bundle.tar.xz (.devtree/ is git-ignored; a device run carries it with the
# tracked tree, together under the 64 MiB a run may carry). bench/cuda_device_run.sh unpacks and uses it there.
#   scripts/gpu_bundle.sh            # build/ (scripts/build.sh, with CUDA) -> .devtree/gpu/bundle.tar.xz
#   BUNDLE_KERNEL_BENCH=1 scripts/gpu_bundle.sh   # ... with strata_attention_bench
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "error: the GPU bundle needs nvcc (CUDACXX or /usr/local/cuda/bin/nvcc)" >&2; exit 1; }
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# The same build as the test suite's (scripts/build.sh): one CUDA-enabled Release tree.
# OpenBLAS linked from its archive: only what strata calls travels (CMakeLists.txt).
STRATA_CUDA=ON ./scripts/build.sh "${LAUNCHER[@]}" -DSTRATA_STATIC_OPENBLAS=ON >/dev/null

out=.devtree/gpu
rm -rf "$out/bundle"
mkdir -p "$out/bundle/bin" "$out/bundle/lib"
cp build/strata build/tests/strata_tests "$out/bundle/bin/"
# The kernel bench (bench/cuda_device_run.sh deepseek|hybrid) only when asked: without it the
# bundle and the tracked tree stay under the 64 MiB a device run carries.
[ "${BUNDLE_KERNEL_BENCH:-0}" = 1 ] && cp build/strata_attention_bench "$out/bundle/bin/"
# The fixture path the test binary has compiled in: the run script links the carried
# tests/data there.
echo "$PWD/tests/data" >"$out/bundle/test_data_path"
# ... and the strata binary's, which CLI tests run.
echo "$PWD/build/strata" >"$out/bundle/strata_binary_path"
# Libraries the GPU machine lacks: every resolved dependency except the C runtime, the
# compiler's runtime and CUDA's own (the machine has its driver and toolkit).
skip='^(libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|ld-linux|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libnccl|libnvidia)'
for bin in "$out"/bundle/bin/*; do
  ldd "$bin" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]]; then cp -L "$path" "$out/bundle/lib/$name"; fi
done
# Symbols are not needed to run; the strongest xz keeps the bundle plus the tracked tree under
# the 64 MiB a device run carries.
strip --strip-unneeded "$out"/bundle/bin/* "$out"/bundle/lib/* 2>/dev/null || true
XZ_OPT=-9e tar -C "$out" -cJf "$out/bundle.tar.xz" bundle
rm -rf "$out/bundle"
du -h "$out/bundle.tar.xz"
