#!/usr/bin/env bash
# One command on the H200: build with CUDA, run the GPU tests, then the benchmarks of
# docs/benchmarks-cuda.md. Logs and JSON results go to $OUT (default ./cuda-out).
#   bench/cuda_device_run.sh [tests|bench|all] [output_len]
# When the machine lacks the C++ build dependencies, binaries carried in prebuilt/ (built on
# the developer machine, with their shared libraries; prebuilt.tar.xz) are used instead.
set -u
OUT=${OUT:-$PWD/cuda-out}
mkdir -p "$OUT"
what=${1:-all}
output_len=${2:-256}
config=bench/configs/llama-3.1-8b-instruct
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem,driver_version --format=csv

bin=build
if cmake -S . -B build -G Ninja -DSTRATA_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
     -DCMAKE_BUILD_TYPE=Release >/tmp/strata-cmake.log 2>&1; then
  if ! ninja -C build -j16 >"$OUT/build.log" 2>&1; then
    grep -A20 FAILED "$OUT/build.log" | head -60
    exit 1
  fi
else
  echo "native configure failed (see cmake.log): using prebuilt/"
  tail -5 /tmp/strata-cmake.log
  bin=prebuilt
  tar -xJf prebuilt.tar.xz || exit 1
  export LD_LIBRARY_PATH=$PWD/prebuilt/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  # The prebuilt test binary has its fixture path compiled in.
  mkdir -p "$(dirname "$(cat prebuilt/test_data_path)")"
  ln -sfn "$PWD/tests/data" "$(cat prebuilt/test_data_path)"
fi
tests_bin=$bin/tests/strata_tests
[ "$bin" = prebuilt ] && tests_bin=prebuilt/strata_tests

if [ "$what" = tests ] || [ "$what" = all ]; then
  timeout 300 "$tests_bin" --gtest_filter='CudaKernels*:Shapes/CudaBackendVsCpu*:DeviceKVPool*:Fixtures/DenseGoldenCuda*' \
    >"$OUT/tests.log" 2>&1
  echo "gpu tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[ cuda|Failure|error:|Expected|Which is|actual" "$OUT/tests.log" | head -60
fi

if [ "$what" = bench ] || [ "$what" = all ]; then
  "$bin/strata_attention_bench" 64 4096 32 8 128 | tee "$OUT/attention.jsonl"
  for b in 1 8 64 256; do
    timeout 240 "$bin/strata" bench-one-batch --model $config --load-format dummy --device cuda \
      --batch-size $b --input-len 1024 --output-len "$output_len" --json | tee -a "$OUT/strata_decode.jsonl"
  done
  # The same batch-1 decode launched kernel by kernel: what the CUDA graphs are worth.
  timeout 120 "$bin/strata" bench-one-batch --model $config --load-format dummy --device cuda --disable-cuda-graph \
    --batch-size 1 --input-len 1024 --output-len "$output_len" --json | tee -a "$OUT/strata_nograph.jsonl"
  for shape in "1 8192" "8 1024"; do
    set -- $shape
    timeout 120 "$bin/strata" bench-one-batch --model $config --load-format dummy --device cuda \
      --batch-size $1 --input-len $2 --output-len 1 --json | tee -a "$OUT/strata_prefill.jsonl"
  done
  PYTHONUNBUFFERED=1 timeout 240 python3 bench/hf_transformers_bench.py $config --batch-size 1 64 \
    --input-len 1024 --output-len "$output_len" 2>/tmp/hf.err | tee "$OUT/hf.jsonl"
  tail -3 /tmp/hf.err
fi
