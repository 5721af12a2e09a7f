#!/usr/bin/env bash
# Issue #23, 2026-12-07 (fifth session): main's figures on the machine lent, and where the
# compiled torch peer's decode step spends its time beside strata's. One device call per part,
# on the bundle of `BUNDLE_KERNEL_BENCH=1 scripts/gpu_bundle.sh` carried as .devtree/gpu (copy
# this script to .devtree/run.sh and carry both):
#   bash .devtree/run.sh e2e       # decode at batch 1 / 8 / 64 / 256 (1024 in, 256 out): strata
#                                  # and the compiled torch peer
#   bash .devtree/run.sh prefill   # prefill 1 x 8192 and 8 x 1024: strata and the peer (eager
#                                  # torch, flash SDPA); then serving: strata serve + bench-serving
#                                  # (256 prompts, 1024 / 256, 64 at a time)
#   bash .devtree/run.sh profile   # Nsight Compute per-kernel GPU times of two decode steps at
#                                  # batch 64 and 256: strata (graphs off, every kernel its own
#                                  # launch) and the peer (its captured step, --profile-steps 2)
#   bash .devtree/run.sh tests     # the whole GPU suite
#   bash .devtree/run.sh amx       # the host CPU's AMX-BF16 prefill against vdpbf16ps
#   bash .devtree/run.sh kernels   # the decode kernel's Nsight Compute counters at 64 x 1100; the
#                                  # extend kernel's SASS and registers at both row tilings
set -o pipefail
part=${1:-e2e}
config=bench/configs/llama-3.1-8b-instruct
run() { bash bench/cuda_device_run.sh "$@"; }
bin=.devtree/gpu/bundle/bin
env_setup() { export LD_LIBRARY_PATH=$PWD/.devtree/gpu/bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}; }
case $part in
  e2e)
    run none >/dev/null 2>&1; env_setup
    for b in ${BATCHES:-1 8 64 256}; do
      timeout 100 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
        --batch-size $b --input-len 1024 --output-len ${OUTPUT_LEN:-256} --json |
        tee -a "$OUT/strata_decode.jsonl" | cut -c1-300
    done
    PYTHONUNBUFFERED=1 timeout 300 python3 bench/torch_decode_peer.py $config --batch-size ${BATCHES:-1 8 64 256} \
      --input-len 1024 --output-len ${OUTPUT_LEN:-256} 2>"$OUT/peer.err" | tee "$OUT/peer.jsonl"
    ;;
  prefill)
    run none >/dev/null 2>&1; env_setup
    for shape in "1 8192" "8 1024"; do
      set -- $shape
      timeout 100 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
        --batch-size $1 --input-len $2 --output-len 1 --json | tee -a "$OUT/strata_prefill.jsonl" | cut -c1-300
      PYTHONUNBUFFERED=1 timeout 100 python3 bench/torch_decode_peer.py $config --batch-size $1 \
        --input-len $2 --output-len 4 2>>"$OUT/peer.err" | tee -a "$OUT/peer_prefill.jsonl"
    done
    timeout 100 $bin/strata bench-one-batch --model $config --load-format dummy --device cuda \
      --batch-size 64 --input-len 1024 --output-len 256 --json | tee -a "$OUT/strata_decode64.jsonl" | cut -c1-300
    $bin/strata serve --model $config --load-format dummy --device cuda --port 30123 \
      --max-running-requests 64 >"$OUT/serve.log" 2>&1 &
    serve_pid=$!
    for i in $(seq 1 120); do curl -sf localhost:30123/health >/dev/null && break; sleep 1; done
    timeout 200 $bin/strata bench-serving --port 30123 --num-prompts 256 --random-input-len 1024 \
      --random-output-len 256 --random-range-ratio 1 --max-concurrency 64 --json |
      tee -a "$OUT/serving.jsonl"
    kill $serve_pid; wait $serve_pid
    ;;
  profile)
    run none >/dev/null 2>&1; env_setup
    for b in ${PROFILE_BATCHES:-64 256}; do
      mkdir -p "$OUT/b$b"
      OUT=$OUT/b$b PROFILE_BATCH=$b PROFILE_SKIP=16000 PROFILE_COUNT=720 PROFILE_TIMEOUT=150 \
        PROFILE_OUTPUT_LEN=64 run profile 2>&1 | tail -22
      timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv --profile-from-start off \
        python3 bench/torch_decode_peer.py $config --batch-size $b --input-len 1024 --output-len 8 \
        --profile-steps 2 >"$OUT/b$b/peer_ncu.csv" 2>"$OUT/b$b/peer_ncu.err"
      echo "peer ncu rc=$?"; tail -3 "$OUT/b$b/peer_ncu.err"
      python3 bench/ncu_summary.py "$OUT/b$b/peer_ncu.csv" | tee "$OUT/b$b/peer_ncu_summary.txt" | head -30
    done
    ;;
  amx)  # the host CPU's AMX-BF16 prefill: the CPU bf16 tests there, the products alone (AMX
        # against vdpbf16ps, 2 threads on 2 pinned cores), and bench-one-batch's bf16 prefill of
        # this build and of c33a523's (the vdpbf16ps prefill), alternated; carry
        # .devtree/base/strata_c33a523.xz and .devtree/extra (strata_cpu_gemm_bench.xz) too
    run none >/dev/null 2>&1; env_setup
    grep -m1 "model name" /proc/cpuinfo; grep -o -w 'amx_[a-z0-9]*\|avx512_bf16' /proc/cpuinfo | sort | uniq -c
    xz -dc .devtree/base/strata_c33a523.xz >/tmp/strata_c33a523 && chmod +x /tmp/strata_c33a523
    xz -dc .devtree/extra/strata_cpu_gemm_bench.xz >/tmp/strata_cpu_gemm_bench && chmod +x /tmp/strata_cpu_gemm_bench
    OMP_WAIT_POLICY=passive timeout 300 $bin/strata_tests --gtest_filter='CpuLinear*:CpuGemm*:*CpuBf16*:*OpsBf16*:TinyModel.*Bf16*' \
      >"$OUT/cpu_tests.log" 2>&1; echo "cpu tests rc=$?"
    grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|Failure" "$OUT/cpu_tests.log" | head -20
    taskset -c 2,3 timeout 200 /tmp/strata_cpu_gemm_bench 2 8 | grep '"m":128' | grep bf16 | tee "$OUT/gemm_bench.jsonl"
    for round in 1 2; do
      for s in $bin/strata /tmp/strata_c33a523; do
        taskset -c 2,3 timeout 120 $s bench-one-batch --model bench/configs/llama-2048x16 --load-format dummy \
          --batch-size 1 --input-len 128 --output-len 8 --dtype bfloat16 --threads 2 --json 2>/dev/null |
          sed "s|^{|{\"binary\": \"$s\", |" | tee -a "$OUT/prefill.jsonl" | cut -c1-200
      done
    done
    ;;
  tests)  # the whole GPU suite (the run of the final tree: TESTS_TIMEOUT=420)
    TESTS_TIMEOUT=${TESTS_TIMEOUT:-420} run tests 2>&1 | tail -8
    grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" "$OUT/tests.log" | tail -12
    ;;
  kernels)  # the decode kernel's counters at 64 x 1100 (one launch, the detailed set), and the
            # extend kernel's SASS and resource usage at both row tilings
    run none >/dev/null 2>&1; env_setup
    timeout 200 ncu --clock-control none --set detailed -k regex:decode_tiles --launch-skip 3 --launch-count 1 \
      $bin/strata_attention_bench 64 1100 32 8 128 >"$OUT/decode_64x1100_ncu.txt" 2>&1
    echo "ncu rc=$?"; grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Shared Memory Configuration Size|Dynamic Shared" "$OUT/decode_64x1100_ncu.txt" | head -30
    cuobjdump -res-usage $bin/strata_attention_bench 2>&1 | grep -A1 -E "extend_tiles|decode_tiles" >"$OUT/res_usage.txt"; head -c 3000 "$OUT/res_usage.txt"
    cuobjdump -sass $bin/strata_attention_bench 2>/dev/null |
      awk '/Function : /{keep = ($0 ~ /extend_tiles_kernel/)} keep' | xz >"$OUT/extend_sass.txt.xz"
    ls -la "$OUT"
    ;;
esac
