#!/usr/bin/env bash
# One command on the H200: the GPU tests, then the benchmarks of
# docs/benchmarks-cuda.md. Logs and JSON results go to $OUT (default ./cuda-out).
#   bench/cuda_device_run.sh [tests|bench|serving|deepseek|hybrid|families|peer|profile|attention|all] [output_len]
# attention: the tensor-core attention kernels alone (extend on an 8192 causal square; the
# decode kernel's sweep at 64 x 4096, 8 x 32768, 64/256/1 x 1100), then strata's decode at
# batch 1/8/64/256 (1024 in) and prefill 1 x 8192 / 8 x 1024 with the compiled torch peer at
# the same shapes, in this one command (needs BUNDLE_KERNEL_BENCH=1).
# families: gpt-oss-20b (and FAMILY_CONFIGS) decode at batch 1/8/64, 1024 in, dummy weights, and
# transformers on the same GPU.
# schema: serving decode with and without a JSON schema (structured output's masks on the GPU),
# masks overlapped with the forward or not, and jump-forward on a schema with long keys;
# Llama-3.1-8B shape with the vendored llama3 tokenizer.
# hybrid: Nemotron-3-Nano-30B-A3B's shape (NemotronH: Mamba2 + MoE + 6 attention layers), dummy
# weights: decode at batch 1/8/64 (1024 in), prefill 8 x 4096, the Mamba2 kernels alone, and
# Hugging Face transformers' NemotronHForCausalLM on the same GPU as the peer.
# deepseek: DeepSeek-V2-Lite's shape (MLA, 576-wide latent cache; MoE), dummy weights: decode at
# batch 1/8/64 (1024 in), prefill 1 x 4096, and the attention kernels alone on its latent.
# profile: per-kernel GPU times of batch-64 decode steps under Nsight Compute.
# tests runs TESTS_FILTER (default below; tensor parallelism on the GPU is *Cuda* too).
# Build the bundle here first (scripts/gpu_bundle.sh) and carry .devtree/gpu.
set -u
OUT=${OUT:-$PWD/cuda-out}
mkdir -p "$OUT"
what=${1:-all}
output_len=${2:-256}
config=bench/configs/llama-3.1-8b-instruct
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem,driver_version --format=csv

# The machine lacks the C++ build dependencies: the binaries come from the bundle that
# scripts/gpu_bundle.sh built on the developer machine (carried as .devtree/gpu).
# STRATA_BUNDLE names another bundle directory (one built with BUNDLE_OUT=... gpu_bundle.sh).
bundle_dir=${STRATA_BUNDLE:-.devtree/gpu}
bundle=$PWD/$bundle_dir/bundle
bin=$bundle_dir/bundle/bin
tar -C "$bundle_dir" -xJf "$bundle_dir/bundle.tar.xz" || exit 1
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# OpenMPI from the bundle (the machine has none): mpirun for --tp-size / --pp-size, which the
# launcher finds through STRATA_MPIRUN; OPAL_PREFIX relocates its components and help texts.
# PMIx's optional components do not travel (gpu_bundle.sh), and the machine has a PMIx of
# another version at the path the carried libpmix searches (seen 2026-12-04: its zlib
# component failed to load; its other two gave no error, so they may have loaded): PMIx loads
# no component files (its frameworks are built into libpmix) and says nothing of the missing
# compression.
# Commands run as root here.
if [ -f "$bundle/ompi_prefix" ]; then
  export OPAL_PREFIX=$bundle/$(cat "$bundle/ompi_prefix")
  export PMIX_MCA_mca_base_component_disable_dlopen=1 PMIX_MCA_pcompress_base_silence_warning=1
  export STRATA_MPIRUN=$OPAL_PREFIX/bin/mpirun PATH=$OPAL_PREFIX/bin:$PATH
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  "$STRATA_MPIRUN" --version | head -1
fi
# libnccl: the bundle leaves it out (over 200 MB); the machine has it from CUDA or from
# torch's nvidia-nccl wheel.
if ! ldconfig -p | grep -q 'libnccl\.so\.2' && [ ! -e /usr/local/cuda/lib64/libnccl.so.2 ]; then
  nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
  [ -e "$nccl_lib/libnccl.so.2" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$nccl_lib
fi
ldd "$bin/strata" | grep -E 'libnccl|libmpi\.' || true
# The test binary has its fixture path compiled in.
data_path=$(cat "$bundle/test_data_path")
mkdir -p "$(dirname "$data_path")"
[ -e "$data_path" ] || ln -sfn "$PWD/tests/data" "$data_path"
binary_path=$(cat "$bundle/strata_binary_path")
mkdir -p "$(dirname "$binary_path")"
[ -e "$binary_path" ] || ln -sfn "$PWD/$bin/strata" "$binary_path"
tests_bin=$bin/strata_tests
# ... and the tokenizer and model fixtures the build unpacks beside it (tests/CMakeLists.txt:
# again whenever the archive's hash changes, which the stamp file records).
unpack_fixtures() {  # ARCHIVE DIR
  local stamp
  stamp=$(sha256sum "$1" | cut -c1-64).stamp
  [ -e "$2/$stamp" ] && return
  rm -rf "$2" && mkdir -p "$2" && tar -C "$2" -xJf "$1" && touch "$2/$stamp"
}
unpack_fixtures tests/data/tokenizers.tar.xz "$(dirname "$binary_path")/tests/tokenizers"
model_data=$(dirname "$binary_path")/tests/models
unpack_fixtures tests/data/models.tar.xz "$model_data"
# The kernel bench (bounded to 120 s a run) travels only in a bundle built with
# BUNDLE_KERNEL_BENCH=1 (gpu_bundle.sh).
kernel_bench() {
  [ -x "$bin/strata_attention_bench" ] ||
    { echo "error: no strata_attention_bench in the bundle; build it with BUNDLE_KERNEL_BENCH=1 scripts/gpu_bundle.sh" >&2; return 1; }
  timeout 120 "$bin/strata_attention_bench" "$@"
}

if [ "$what" = tests ] || [ "$what" = all ]; then
  timeout "${TESTS_TIMEOUT:-300}" "$tests_bin" --gtest_filter="${TESTS_FILTER:-Shapes/CudaBackendVsCpu*:DeviceKVPool*:*Cuda*:*OpsDevice*}" \
    >"$OUT/tests.log" 2>&1
  echo "gpu tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[ +((tp|pp) )?cuda|Failure|error:|Expected|Which is|actual" "$OUT/tests.log" | head -120
fi

if [ "$what" = bench ] || [ "$what" = all ]; then
  for b in 1 8 64 256; do
    timeout 240 "$bin/strata" bench-one-batch --model $config --load-format dummy --device cuda \
      --batch-size $b --input-len 1024 --output-len "$output_len" --json | tee -a "$OUT/strata_decode.jsonl"
  done
  for shape in "1 8192" "64 1024"; do
    set -- $shape
    timeout 120 "$bin/strata" bench-one-batch --model $config --load-format dummy --device cuda \
      --batch-size $1 --input-len $2 --output-len 1 --json | tee -a "$OUT/strata_prefill.jsonl"
  done
fi

if [ "$what" = bench ] || [ "$what" = serving ] || [ "$what" = all ]; then
  # Serving: 256 random prompts, 1024 in / 256 out, 64 at a time (the offline batch-64 figure
  # above is what it is measured against): greedy; then sampled with penalties (logit edits on
  # the device); then the same with 5 top logprobs per token.
  "$bin/strata" serve --model $config --load-format dummy --device cuda --port 30123 \
    --max-running-requests 64 >"$OUT/serve.log" 2>&1 &
  serve_pid=$!
  for i in $(seq 1 120); do curl -sf localhost:30123/health >/dev/null && break; sleep 1; done
  controls='"sampling_params": {"temperature": 0.8, "top_p": 0.95, "top_k": 50, "frequency_penalty": 0.5, "presence_penalty": 0.2, "repetition_penalty": 1.1}'
  for body in '{}' "{$controls}" "{$controls, \"return_logprob\": true, \"top_logprobs_num\": 5}"; do
    timeout 200 "$bin/strata" bench-serving --port 30123 --num-prompts 256 --random-input-len 1024 \
      --random-output-len 256 --random-range-ratio 1 --max-concurrency 64 \
      --extra-request-body "$body" --json | tee -a "$OUT/serving.jsonl"
  done
  kill $serve_pid; wait $serve_pid
  tail -3 "$OUT/serve.log"
fi

if [ "$what" = schema ]; then
  # The same serving shape as above (1024 in, 256 out, 64 at a time): unconstrained, then under
  # a JSON schema (an array of integers: long outputs, a mask every token) with the masks
  # computed while the forward runs (the default), and the same with them computed before each
  # pass (--disable-overlap-grammar-masks); then an object schema with long fixed keys without
  # and with --enable-jump-forward. One JSON line per run in serving_schema.jsonl, each after a
  # "# label" line.
  rm -f "$OUT/serving_schema.jsonl"
  tok=$PWD/.devtree/tok && mkdir -p "$tok" && tar -C "$tok" -xJf tests/data/tokenizers.tar.xz llama3
  json_text() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }
  array=$(json_text '{"type": "array", "items": {"type": "integer"}}')
  keys=$(json_text '{"type": "object", "properties": {"customer_identification_number": {"type": "integer"}, "preferred_method_of_communication": {"enum": ["electronic_mail", "telephone_call", "postal_letter"]}, "has_subscribed_to_the_weekly_newsletter": {"type": "boolean"}}, "required": ["customer_identification_number", "preferred_method_of_communication", "has_subscribed_to_the_weekly_newsletter"], "additionalProperties": false}')
  # serve_and_bench FLAGS LABEL BODY [LABEL BODY ...]: one server with FLAGS, one run per body.
  serve_and_bench() {
    local flags=$1; shift
    "$bin/strata" serve --model $config --load-format dummy --device cuda --port 30124 \
      --max-running-requests 64 --tokenizer-path "$tok/llama3" $flags >>"$OUT/serve_schema.log" 2>&1 &
    local serve_pid=$!
    for i in $(seq 1 120); do curl -sf localhost:30124/health >/dev/null && break; sleep 1; done
    # A warm-up over the same prompts (one token each) fills the prefix cache, so that every
    # measured run, the first on its server too, decodes after the same cached prefill.
    timeout 150 "$bin/strata" bench-serving --port 30124 --num-prompts 128 --random-input-len 1024 \
      --random-output-len 256 --random-range-ratio 1 --max-concurrency 64 \
      --extra-request-body '{"sampling_params": {"max_new_tokens": 1}}' --json >/dev/null
    while [ $# -gt 0 ]; do
      echo "# $1 ($flags)" | tee -a "$OUT/serving_schema.jsonl"
      timeout 150 "$bin/strata" bench-serving --port 30124 --num-prompts 128 --random-input-len 1024 \
        --random-output-len 256 --random-range-ratio 1 --max-concurrency 64 \
        --extra-request-body "$2" --json | tee -a "$OUT/serving_schema.jsonl"
      shift 2
    done
    kill $serve_pid; wait $serve_pid
  }
  serve_and_bench "" unconstrained '{}' "array schema, overlapped masks" \
    "{\"sampling_params\": {\"json_schema\": $array}}" "keys schema" \
    "{\"sampling_params\": {\"json_schema\": $keys}}"
  serve_and_bench --disable-overlap-grammar-masks "array schema, sequential masks" \
    "{\"sampling_params\": {\"json_schema\": $array}}"
  serve_and_bench --enable-jump-forward "keys schema, jump-forward" \
    "{\"sampling_params\": {\"json_schema\": $keys}}"
  tail -3 "$OUT/serve_schema.log"
fi

if [ "$what" = attention ]; then
  for shape in "64 4096" "8 32768" "64 1100" "256 1100" "1 1100"; do
    kernel_bench $shape >>"$OUT/decode_kernel.jsonl"
  done
  kernel_bench extend 8192 | tee "$OUT/extend_kernel.jsonl"
  for b in 1 8 64 256; do
    timeout 120 "$bin/strata" bench-one-batch --model $config --load-format dummy --device cuda \
      --batch-size $b --input-len 1024 --output-len "$output_len" --json | tee -a "$OUT/strata_decode.jsonl"
  done
  for shape in "1 8192" "8 1024"; do
    set -- $shape
    timeout 120 "$bin/strata" bench-one-batch --model $config --load-format dummy --device cuda \
      --batch-size $1 --input-len $2 --output-len 1 --json | tee -a "$OUT/strata_prefill.jsonl"
  done
  PYTHONUNBUFFERED=1 timeout 330 python3 bench/torch_decode_peer.py $config --batch-size 1 8 64 256 \
    --input-len 1024 --output-len "$output_len" 2>"$OUT/peer.err" | tee "$OUT/peer.jsonl"
  for shape in "1 8192" "8 1024"; do
    set -- $shape
    PYTHONUNBUFFERED=1 timeout 100 python3 bench/torch_decode_peer.py $config --batch-size $1 \
      --input-len $2 --output-len 4 2>>"$OUT/peer.err" | tee -a "$OUT/peer_prefill.jsonl"
  done
fi

if [ "$what" = profile ]; then
  # Per-kernel GPU time of batch-64 (PROFILE_BATCH) decode steps (Nsight Compute, clocks left alone, graphs off
  # so that every kernel is its own launch): kernels past the prefill and the reserve passes.
  which ncu || exit 1
  timeout "${PROFILE_TIMEOUT:-400}" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    --launch-skip "${PROFILE_SKIP:-4000}" --launch-count "${PROFILE_COUNT:-700}" \
    "$bin/strata" bench-one-batch --model $config --load-format dummy --device cuda \
    --batch-size "${PROFILE_BATCH:-64}" --input-len 1024 --output-len "${PROFILE_OUTPUT_LEN:-12}" --disable-cuda-graph >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
  echo "ncu rc=$?"; tail -3 "$OUT/ncu.err"
  python3 bench/ncu_summary.py "$OUT/ncu.csv" | tee "$OUT/ncu_summary.txt"
fi

if [ "$what" = deepseek ] || [ "$what" = all ]; then
  ds_config=bench/configs/deepseek-v2-lite-chat
  for b in 1 8 64; do
    timeout 300 "$bin/strata" bench-one-batch --model $ds_config --load-format dummy --device cuda \
      --batch-size $b --input-len 1024 --output-len "$output_len" --json |
      tee -a "$OUT/deepseek_decode.jsonl"
  done
  timeout 240 "$bin/strata" bench-one-batch --model $ds_config --load-format dummy --device cuda \
    --batch-size 1 --input-len 4096 --output-len 1 --json | tee -a "$OUT/deepseek_prefill.jsonl"
  # The decode kernel on the latent (16 heads over one 576-wide row, value inside it) at the
  # runs' shapes, and one 4096-token extend.
  for shape in "1 1280" "64 1280" "64 4096"; do
    kernel_bench mla $shape | tee -a "$OUT/deepseek_attention.jsonl"
  done
fi

if [ "$what" = hybrid ] || [ "$what" = all ]; then
  hy_config=bench/configs/nemotron-3-nano-30b-a3b
  for b in 1 8 64; do
    timeout 300 "$bin/strata" bench-one-batch --model $hy_config --load-format dummy --device cuda \
      --batch-size $b --input-len 1024 --output-len "$output_len" --json |
      tee -a "$OUT/hybrid_decode.jsonl"
  done
  timeout 300 "$bin/strata" bench-one-batch --model $hy_config --load-format dummy --device cuda \
    --batch-size 8 --input-len 4096 --output-len 1 --json | tee -a "$OUT/hybrid_prefill.jsonl"
  kernel_bench mamba 64 8 4096 | tee -a "$OUT/hybrid_kernels.jsonl"
  # Served with prefix caching of the recurrent state (extra_buffer) against no cache.
  timeout 300 python3 bench/hybrid_serve_check.py "$bin/strata" "$model_data/nemotron_h" \
    --device cuda | tee -a "$OUT/hybrid_serve.jsonl"
  # The peer: transformers' own NemotronH on the same GPU; which Mamba kernels it had.
  python3 -c "import importlib.util as u; print({m: u.find_spec(m) is not None for m in ['mamba_ssm', 'causal_conv1d']})" \
    | tee "$OUT/hybrid_peer_kernels.txt"
  PYTHONUNBUFFERED=1 timeout "${HYBRID_PEER_TIMEOUT:-400}" python3 bench/hf_transformers_bench.py $hy_config \
    --batch-size 1 8 64 --input-len 1024 --output-len "${HYBRID_PEER_OUTPUT_LEN:-32}" \
    2>"$OUT/hybrid_peer.err" | tee "$OUT/hybrid_peer.jsonl"
  tail -3 "$OUT/hybrid_peer.err"
fi

if [ "$what" = families ] || [ "$what" = all ]; then
  # The families of the "Gemma 3, gpt-oss, LFM2, Qwen3-Next" issue at published shapes, dummy
  # weights (FAMILY_CONFIGS: bench/configs names), then transformers on the same GPU.
  for name in ${FAMILY_CONFIGS:-gpt-oss-20b}; do
    for b in 1 8 64; do
      timeout 300 "$bin/strata" bench-one-batch --model bench/configs/$name --load-format dummy \
        --device cuda --batch-size $b --input-len 1024 --output-len "$output_len" --json |
        tee -a "$OUT/${name}_decode.jsonl"
    done
    PYTHONUNBUFFERED=1 timeout "${FAMILY_PEER_TIMEOUT:-300}" python3 bench/hf_transformers_bench.py \
      bench/configs/$name --batch-size 1 8 64 --input-len 1024 \
      --output-len "${FAMILY_PEER_OUTPUT_LEN:-32}" 2>"$OUT/${name}_peer.err" |
      tee "$OUT/${name}_peer.jsonl"
    tail -3 "$OUT/${name}_peer.err"
  done
fi

if [ "$what" = peer ] || [ "$what" = all ]; then
  # The peer, in the same command: torch.compile + one CUDA graph per decode step.
  PYTHONUNBUFFERED=1 timeout 420 python3 bench/torch_decode_peer.py $config --batch-size 1 64 \
    --input-len 1024 --output-len "$output_len" 2>"$OUT/peer.err" | tee "$OUT/peer.jsonl"
  tail -3 "$OUT/peer.err"
fi
