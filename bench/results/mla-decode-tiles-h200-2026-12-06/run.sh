#!/usr/bin/env bash
# MLA latent decode kernel: GPU tests, then the kernel bench at 16 and 128 heads.
set -o pipefail
STRATA_BUNDLE=.devtree/mla OUT=$OUT TESTS_TIMEOUT=${TESTS_TIMEOUT:-240} \
  TESTS_FILTER='Shapes/CudaBackendVsCpu*:DeviceKVPool*:*Cuda*:*OpsDevice*' \
  bash bench/cuda_device_run.sh tests 2>&1 | tee "$OUT/tests_summary.txt"
grep -E "tests ran|PASSED|FAILED|SKIPPED \]" "$OUT/tests.log" | tail -40 >"$OUT/tests_tail.txt"
grep -E "CudaMlaDecodeVsCpu|CudaBackendVsCpu.*(d576|d80)" "$OUT/tests.log" | grep -E "OK|FAILED" >"$OUT/tests_mla.txt"
b=.devtree/mla/bundle/bin/strata_attention_bench
export LD_LIBRARY_PATH=$PWD/.devtree/mla/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for h in ${HEADS:-16 128}; do
  for shape in "64 4096" "8 32768" "1 4096"; do
    timeout 100 "$b" mla $shape $h 2>&1 | tee -a "$OUT/mla_bench.jsonl"
  done
done
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -n "${SANITIZE:-}" ] && [ -x "$cs" ]; then
  timeout 150 "$cs" --tool memcheck .devtree/mla/bundle/bin/strata_tests \
    --gtest_filter="$SANITIZE" 2>&1 | tail -15 | tee "$OUT/memcheck.txt"
fi
