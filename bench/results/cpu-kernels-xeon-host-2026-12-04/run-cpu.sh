#!/usr/bin/env bash
# CPU kernels on the H200 machine's host CPU (Intel Xeon): AVX-512 / AMX tests and the kernel bench.
set -u
OUT=${OUT:-$PWD/cuda-out}; mkdir -p "$OUT"
lscpu | grep -E "Model name|^CPU\(s\)|L3|NUMA node0" | tee "$OUT/cpu.txt"
grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E "avx512|amx" | tr '\n' ' ' | tee -a "$OUT/cpu.txt"; echo
tar -C .devtree -xJf .devtree/cpu.tar.xz
tar -C .devtree/gpu -xJf .devtree/gpu/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.devtree/gpu/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
data_path=$(cat .devtree/gpu/bundle/test_data_path); mkdir -p "$(dirname "$data_path")"; [ -e "$data_path" ] || ln -sfn "$PWD/tests/data" "$data_path"
bin=.devtree/gpu/bundle/bin
export OMP_WAIT_POLICY=passive
timeout 200 $bin/strata_tests --gtest_filter='CpuLinear*:CpuGemm*:Int8*:OpsInt8*:GoldenCpuInt8*:GoldenCpuBf16*:TinyModel.Perplexity*' >"$OUT/cpu_tests.log" 2>&1
echo "cpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is" "$OUT/cpu_tests.log" | head -30
unset OMP_WAIT_POLICY
for t in 2,3 0-15; do taskset -c $t .devtree/cpu/strata_membw; done | tee "$OUT/membw.jsonl"
for b in base new base new; do
  echo "== $b"; taskset -c 2,3 timeout 150 .devtree/cpu/gemm-bench-$b 2 8 > "$OUT/gemm_$b.jsonl.tmp"; cat "$OUT/gemm_$b.jsonl.tmp" >> "$OUT/gemm_$b.jsonl"
done
python3 - "$OUT" <<'PY'
import json,sys,collections
out=sys.argv[1]
rows=collections.defaultdict(list)
for b in ("base","new"):
  for l in open(f"{out}/gemm_{b}.jsonl"):
    d=json.loads(l); rows[(d["dtype"],d["simd"],d["product"],d["m"],b)].append(d["best_ms"])
keys=sorted({k[:4] for k in rows})
for k in keys:
  b=min(rows.get(k+("base",),[float('nan')])); n=min(rows.get(k+("new",),[float('nan')]))
  print(*k, f"base {b:.3f} ms new {n:.3f} ms  x{b/n:.2f}")
PY
for q in "--dtype bfloat16" "--quantization int8" "--dtype float32"; do
  taskset -c 2,3 timeout 150 $bin/strata bench-one-batch --model bench/configs/llama-2048x16 --load-format dummy --batch-size 1 --input-len 128 --output-len 32 --threads 2 --json $q 2>/dev/null | tail -1 | tee -a "$OUT/one_batch.jsonl"
done
