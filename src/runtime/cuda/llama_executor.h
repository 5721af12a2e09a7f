#pragma once
// The Llama family (Llama, Qwen2, Qwen3, Mistral) on one GPU: bf16 weights, f32 residual
// stream, cuBLAS GEMMs, the CUDA attention backend over a device KV pool.
#include <memory>

#include "model/config.h"
#include "models/llama.h"
#include "runtime/device_executor.h"
#include "runtime/model_runner.h"

namespace strata {

std::unique_ptr<DeviceExecutor> make_cuda_llama_executor(const ModelConfig& config,
                                                         const RunnerOptions& options,
                                                         const LlamaVariant& variant);

}  // namespace strata
