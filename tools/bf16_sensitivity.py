#!/usr/bin/env python3
"""How far a fixture's logits move when transformers itself runs it in bf16 on the GPU.

For MoE fixtures a bf16 forward can flip a near-tied expert choice, moving one position's
logits far beyond the usual bf16 noise; this tells such a flip (transformers' bf16 run moves
too) from an engine bug (only strata's moves). Prints, per prompt, the max |logit error| of
transformers in bf16 against the f32 reference, and the smallest router margin (gap between
the k-th and (k+1)-th router logit over tokens and layers) in an f32 run, and the error at each
of the reference's greedy steps (teacher-forced).
  python3 tools/bf16_sensitivity.py build/tests/models/gpt_oss
(the fixtures the build unpacked from tests/data/models.tar.xz, or scripts/pack_fixtures.sh unpack's
tests/data/models/gpt_oss).
"""
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

d = sys.argv[1]
ref = load_file(f"{d}/reference.safetensors")
margins = []


def hook(mod, inp, out):
    x = inp[0].reshape(-1, inp[0].shape[-1]).float()
    bias = getattr(mod, "bias", None)  # Qwen3-Next's router has none
    logits = torch.nn.functional.linear(x, mod.weight.float(),
                                        None if bias is None else bias.float())
    k = getattr(mod, "top_k", None) or top_k
    top = torch.topk(logits, k + 1, dim=-1).values
    margins.append((top[:, k - 1] - top[:, k]).min().item())


top_k = 2
for dtype in (torch.float32, torch.bfloat16):
    model = AutoModelForCausalLM.from_pretrained(d, dtype=dtype, attn_implementation="eager").cuda()
    top_k = getattr(model.config, "num_experts_per_tok", None) or top_k
    if dtype == torch.float32:
        for name, m in model.named_modules():
            # gpt-oss: mlp.router; Qwen-style MoE: mlp.gate (the shared expert's gate is
            # shared_expert_gate, one output: not a router).
            if name.endswith("mlp.router") or name.endswith("mlp.gate"):
                m.register_forward_hook(hook)
    for i in range(4):
        ids = ref[f"p{i}.input_ids"].cuda()[None]
        margins.clear()
        with torch.no_grad():
            logits = model(ids).logits[0].float().cpu()
        err = (logits - ref[f"p{i}.logits"]).abs().max().item()
        extra = f", min router margin {min(margins):.2e}" if margins else ""
        # The greedy steps, teacher-forced: the prompt and the reference's greedy ids in one
        # forward; the logits after each prefix against the reference's greedy logits.
        greedy = ref[f"p{i}.greedy_ids"].cuda()
        full = torch.cat([ids[0], greedy[:-1]])[None]
        with torch.no_grad():
            steps = model(full).logits[0, ids.shape[1] - 1:].float().cpu()
        step_err = (steps - ref[f"p{i}.greedy_logits"]).abs().amax(dim=-1)
        print(f"{d} {str(dtype):14} prompt {i} ({ids.shape[1]} tokens): max |logit error| {err:.4f}{extra}; "
              f"greedy steps {' '.join(f'{e:.3f}' for e in step_err.tolist())}")
