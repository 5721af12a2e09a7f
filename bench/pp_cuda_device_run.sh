#!/usr/bin/env bash
# One command on a 2-GPU H200 machine (the device tool's nvidia-h200-x2): the GPU pipeline
# tests, then bench/pp_cuda.sh. That machine has CUDA but neither the C++ build dependencies
# nor OpenMPI, so everything comes prebuilt in PAYLOAD (default .devtree-nccl) from the
# developer machine (Debian 12, nvcc 13.0, sm_90): payload.tar.xz with bin/ (strata,
# strata_tests), lib/ (their shared libraries that are not CUDA's), fallback/ (libz, libudev for
# hwloc, used only where the machine lacks them) and ompi/ (the Debian 12 OpenMPI packages
# openmpi-bin, openmpi-common, libopenmpi3, libpmix2, libevent, libhwloc, libmunge unpacked with
# dpkg -x, without the components for InfiniBand/UCX/OFI fabrics), plus bench/pp_cuda.sh.
# OpenMPI runs from that private prefix through its install-dir variables (OPAL_*, PMIX_*);
# nothing is installed into /. Logs go to $OUT.
#   bench/pp_cuda_device_run.sh [PAYLOAD]
# PP_CUDA_BENCH=0 skips the PP benchmark; TOKENIZER_BENCH=1 also runs bench/tokenizer_vs_hf.sh
# with the carried strata against the machine's Python `tokenizers`.
set -u
payload=$(cd "${1:-.devtree-nccl}" && pwd)
OUT=${OUT:-$PWD/pp-cuda-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar -C "$payload" -xJf "$payload/payload.tar.xz" || exit 1
{
  nvidia-smi --query-gpu=index,name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv
  nvidia-smi topo -m
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# NCCL (218 MB) is not carried: the CUDA toolkit's, else the nvidia-nccl wheel's, else torch's.
nccl_dir=
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
  "$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib"))' 2>/dev/null)" \
  "$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)"; do
  if [ -n "$d" ] && [ -e "$d/libnccl.so.2" ]; then nccl_dir=$d; break; fi
done
echo "libnccl.so.2 from: ${nccl_dir:-nowhere}" | tee -a "$OUT/env.txt"

P=$payload/ompi
L=$P/usr/lib/x86_64-linux-gnu
export OPAL_PREFIX=$P/usr OPAL_EXEC_PREFIX=$P/usr OPAL_BINDIR=$P/usr/bin OPAL_SBINDIR=$P/usr/sbin
export OPAL_LIBDIR=$L/openmpi/lib OPAL_PKGLIBDIR=$L/openmpi/lib/openmpi3 OPAL_LIBEXECDIR=$P/usr/libexec
export OPAL_DATAROOTDIR=$P/usr/share OPAL_DATADIR=$P/usr/share OPAL_PKGDATADIR=$P/usr/share/openmpi
export OPAL_SYSCONFDIR=$P/etc/openmpi
export PMIX_INSTALL_PREFIX=$L/pmix2 PMIX_PREFIX=$L/pmix2 PMIX_LIBDIR=$L/pmix2/lib \
  PMIX_PKGLIBDIR=$L/pmix2/lib/pmix PMIX_DATADIR=$L/pmix2/share PMIX_PKGDATADIR=$L/pmix2/share/pmix \
  PMIX_SYSCONFDIR=$P/etc
export PATH=$P/usr/bin:$PATH
export STRATA_MPIRUN=$P/usr/bin/mpirun.openmpi
# The machine's own libraries where it has them (LD_LIBRARY_PATH would win over its default
# paths, so carried copies of libraries it has are dropped); the carried ones fill the gaps.
for f in "$payload"/lib/* "$payload"/fallback/*; do
  if ldconfig -p | awk '{print $1}' | grep -qxF "$(basename "$f")"; then rm -f "$f"; else echo "carried: $(basename "$f")"; fi
done | tee -a "$OUT/env.txt"
export LD_LIBRARY_PATH=$L:$L/openmpi/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${nccl_dir}:$payload/lib:$payload/fallback:${LD_LIBRARY_PATH:-}
bin=$payload/bin
ldd "$bin/strata" | grep -E "not found|nccl|cublas|cudart|mpi|fmt|openblas" | tee -a "$OUT/env.txt"

# The test binary has the developer machine's paths compiled in (test data, the strata binary,
# the model fixtures its build unpacked from tests/data/models.tar.xz: unpacked here to the
# same path, again whenever the archive's hash changes, as tests/CMakeLists.txt does).
tests_src=$(strings "$bin/strata_tests" | grep -m1 -E '^/.*/tests/data$')
strata_path=$(strings "$bin/strata_tests" | grep -m1 -E '^/.*/build/strata$')
model_data=$(strings "$bin/strata_tests" | grep -m1 -E '^/.*/tests/models$')
[ -n "$model_data" ] || { echo "error: strata_tests has no STRATA_MODEL_DATA path (a payload built before tests/data/models.tar.xz)" >&2; exit 1; }
mkdir -p "$(dirname "$tests_src")" "$(dirname "$strata_path")"
[ -e "$tests_src" ] || ln -sfn "$PWD/tests/data" "$tests_src"
[ -e "$strata_path" ] || ln -sfn "$bin/strata" "$strata_path"
stamp=$(sha256sum tests/data/models.tar.xz | cut -c1-64).stamp
if [ ! -e "$model_data/$stamp" ]; then
  rm -rf "$model_data" && mkdir -p "$model_data" &&
    tar -C "$model_data" -xJf tests/data/models.tar.xz && touch "$model_data/$stamp"
fi

echo "== smoke: PP=2 on two GPUs, tiny llama"
timeout 120 "$bin/strata" generate --model "$model_data/llama" --device cuda --input-ids 1,2,3 \
  --max-new-tokens 4 --pp-size 2 --pp-timeout 60 --json --timing >"$OUT/smoke.log" 2>&1
echo "smoke rc=$?"; tail -5 "$OUT/smoke.log"
if ! grep -q output_ids "$OUT/smoke.log"; then
  NCCL_DEBUG=INFO timeout 120 "$bin/strata" generate --model "$model_data/llama" --device cuda \
    --input-ids 1,2,3 --max-new-tokens 4 --pp-size 2 --pp-timeout 30 --json >"$OUT/smoke_debug.log" 2>&1
  tail -30 "$OUT/smoke_debug.log"
fi

echo "== GPU tests"
timeout 240 "$bin/strata_tests" --gtest_filter='*PipelineCuda*:GpuAssignment*:PipelineFailures.GpuFlags*:CudaKernels*:Shapes/CudaBackendVsCpu*:DeviceKVPool*:*/GoldenCuda*:-PipelineCudaFailures*' \
  >"$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[ pp cuda|Failure|Expected|Which is|actual|error:" "$OUT/gpu_tests.txt" | head -60

if [ "${PP_CUDA_BENCH:-1}" = 1 ]; then
  echo "== benchmark"
  mkdir -p "$OUT/bench_logs"
  PP_CUDA_LOGS=$OUT/bench_logs timeout 220 bash "$payload/pp_cuda.sh" "$bin/strata" 1024 256 | tee "$OUT/pp_cuda.jsonl"
  tar -C "$OUT" -czf "$OUT/bench_logs.tgz" bench_logs && rm -rf "$OUT/bench_logs"
fi

echo "== failing stages"
timeout 150 "$bin/strata_tests" --gtest_filter='PipelineCudaFailures*' >"$OUT/gpu_failure_tests.txt" 2>&1
echo "failure tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[ pp cuda|Failure|Expected|Which is|actual|error:" "$OUT/gpu_failure_tests.txt" | head -40

if [ "${TOKENIZER_BENCH:-0}" = 1 ]; then
  echo "== tokenizers"
  timeout 240 bash bench/tokenizer_vs_hf.sh "$bin/strata" 3 2>&1 | tee "$OUT/tokenizer_vs_hf.txt"
fi
