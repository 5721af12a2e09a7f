#!/usr/bin/env bash
# Builds the GPU bundle on the developer machine (Debian 12 + nvcc): the CUDA build of strata
# (sm_90) and the shared libraries it needs that the H200 machine lacks (fmt, OpenBLAS, PCRE2,
# OpenMPI's libmpi, ...: everything ldd lists outside the C runtime and CUDA itself), packed
# into .devtree/gpu/bundle.tar.xz (.devtree/ is git-ignored; a device run carries it with the
# tracked tree, together under the 64 MiB a run may carry). bench/cuda_device_run.sh unpacks and uses it there.
#   scripts/gpu_bundle.sh            # build/ (scripts/build.sh, with CUDA) -> .devtree/gpu/bundle.tar.xz
#   BUNDLE_KERNEL_BENCH=1 scripts/gpu_bundle.sh   # ... with strata_attention_bench
#   BUNDLE_SLIM=1 ...   # without the strata binary and OpenMPI (~2 MiB less): when the tracked
#                       # tree plus the whole bundle pass the 64 MiB a run carries (they did on
#                       # 2026-12-06: 52.9 + 10.5 MiB; since the fixture models were packed,
#                       # 42.5 + 10.5 MiB fit); only the test binary's and kernel bench's
#                       # work runs, so filter out the CLI, pipeline and tensor-parallel tests:
#                       # TESTS_FILTER='Shapes/Cuda*:CudaMla*:DeviceKVPool*:*OpsDevice*:Fixtures/GoldenCuda*:Hybrids/GoldenCuda*:Fixtures/CudaInvariance*:Hybrids/CudaInvariance*:Fixtures/WindowSpaceModelCuda*:CudaCapabilities*:StructuredOutput.Cuda*'
slim=${BUNDLE_SLIM:-0}
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "error: the GPU bundle needs nvcc (CUDACXX or /usr/local/cuda/bin/nvcc)" >&2; exit 1; }
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# The same build as the test suite's (scripts/build.sh): one CUDA-enabled Release tree.
# OpenBLAS linked from its archive: only what strata calls travels (CMakeLists.txt).
STRATA_CUDA=ON ./scripts/build.sh "${LAUNCHER[@]}" -DSTRATA_STATIC_OPENBLAS=ON >/dev/null

out=${BUNDLE_OUT:-.devtree/gpu}
rm -rf "$out/bundle"
mkdir -p "$out/bundle/bin" "$out/bundle/lib"
cp build/tests/strata_tests "$out/bundle/bin/"
[ "$slim" = 1 ] || cp build/strata "$out/bundle/bin/"
# The kernel bench (bench/cuda_device_run.sh deepseek|hybrid) only when asked: without it the
# bundle and the tracked tree stay under the 64 MiB a device run carries.
[ "${BUNDLE_KERNEL_BENCH:-0}" = 1 ] && cp build/strata_attention_bench "$out/bundle/bin/"
# The fixture path the test binary has compiled in: the run script links the carried
# tests/data there.
echo "$PWD/tests/data" >"$out/bundle/test_data_path"
# ... and the strata binary's, which CLI tests run; the run script unpacks the tokenizer and
# model fixtures beside it (build/tests/tokenizers, build/tests/models), where the test binary
# looks for them (STRATA_TOKENIZER_DATA, STRATA_MODEL_DATA).
echo "$PWD/build/strata" >"$out/bundle/strata_binary_path"
# Libraries the GPU machine lacks: every resolved dependency except the C runtime, the
# compiler's runtime and CUDA's own (the machine has its driver and toolkit).
skip='^(libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|ld-linux|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libnccl|libnvidia)'
for bin in "$out"/bundle/bin/*; do
  ldd "$bin" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]]; then cp -L "$path" "$out/bundle/lib/$name"; fi
done
# OpenMPI's runtime, relocatable: the GPU machine has no OpenMPI, and `strata generate --tp-size N`
# (or --pp-size N) re-runs itself under mpirun (src/dist/launch.cpp). The bundle carries mpirun
# (orterun) and orted, the MCA components they and libmpi load at run time, and the help texts,
# in the tree OpenMPI was installed with under bundle/ompi; bench/cuda_device_run.sh points
# OPAL_PREFIX at it (OpenMPI derives its component and data directories from it), and
# STRATA_MPIRUN at its mpirun. Commands run as root there: the launcher passes
# --allow-run-as-root, and the run script sets OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) for an mpirun
# started by hand. The same runtime starts a job over several GPUs of one host (issue #22): the
# run script's setup, then `strata generate --device cuda --tp-size 2` (or --pp-size 2) as here,
# or $STRATA_MPIRUN -np 2 ... for a job started by hand.
# Components for fabrics the machine lacks (InfiniBand, UCX, OFI, PSM) and OpenSHMEM are left
# out: their libraries would not load there, and one machine needs only shared memory and TCP.
# So are those of MPI features strata never calls (MPI-IO, topologies, checkpointing,
# monitoring, message logging): the bundle and the tracked tree share the 64 MiB a run carries.
if [ "$slim" != 1 ]; then
ompi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
ompi_prefix=$(ompi_path prefix)
ompi_pkglib=$(ompi_path pkglibdir)
ompi_pkgdata=$(ompi_path pkgdatadir)
ompi_bin=$(ompi_path bindir)
ompi=$out/bundle/ompi
for d in "$ompi_pkglib" "$ompi_pkgdata" "$ompi_bin"; do mkdir -p "$ompi/${d#"$ompi_prefix"/}"; done
cp -L "$ompi_bin/orterun" "$ompi_bin/orted" "$ompi/${ompi_bin#"$ompi_prefix"/}/"
ln -sf orterun "$ompi/${ompi_bin#"$ompi_prefix"/}/mpirun"
cp -L "$ompi_pkgdata"/help-*.txt "$ompi/${ompi_pkgdata#"$ompi_prefix"/}/"
fabric='(ucx|ucp|ucs|uct|ofi|fabric|openib|ibverbs|psm|oshmem|numa|nl-)'
for c in "$ompi_pkglib"/mca_*.so; do
  name=$(basename "$c")
  [[ $name =~ ^mca_(io|fbtl|fcoll|fs|sharedfp|topo|vprotocol|crs|compress|atomic|memheap|scoll|spml|sshmem)_ ||
    $name =~ monitoring ]] && continue
  # (ldd's whole output first: grep -q would stop reading early, and under pipefail the cut-off
  # ldd would make the match look like a failure.)
  deps=$(ldd "$c")
  [[ $deps =~ lib$fabric ]] && continue
  cp -L "$c" "$ompi/${ompi_pkglib#"$ompi_prefix"/}/"
done
# PMIx (mpirun's process runtime) travels as its library only (libpmix, below): Debian's PMIx
# has an absolute component directory that no variable relocates, and its few components
# (compression, resource managers) are optional: the run script turns PMIx's component loading
# off, so that a PMIx of another version on the machine is not loaded into this one.
# Their libraries travel with strata's: every dependency outside the C runtime.
for bin in "$ompi"/*/orterun "$ompi"/*/orted "$ompi/${ompi_pkglib#"$ompi_prefix"/}"/*.so; do
  [ -e "$bin" ] && ldd "$bin" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]] && [ ! -e "$out/bundle/lib/$name" ]; then cp -L "$path" "$out/bundle/lib/$name"; fi
done
# Where OpenMPI was installed, relative to the bundle: the run script sets OPAL_PREFIX from it.
echo "ompi" >"$out/bundle/ompi_prefix"
fi
# Symbols are not needed to run; the strongest xz keeps the bundle plus the tracked tree under
# the 64 MiB a device run carries.
strip --strip-unneeded "$out"/bundle/bin/* "$out"/bundle/lib/* 2>/dev/null || true
find "$out/bundle/ompi" -type f \( -name '*.so' -o -perm -u+x \) \
  -exec strip --strip-unneeded {} + 2>/dev/null || true
XZ_OPT=-9e tar -C "$out" -cJf "$out/bundle.tar.xz" bundle
rm -rf "$out/bundle"
du -h "$out/bundle.tar.xz"
