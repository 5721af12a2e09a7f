#!/usr/bin/env python3
"""The routing margins of a DeepSeek-style MoE fixture, written beside it for the tests.

For every prompt of the fixture's reference, transformers (CPU, f32, the stored weights) runs
the prompt once; a hook on every MoE router records, per token, the gap between the score of
the last expert chosen and that of the first one left out (softmax scores for `greedy` top-k,
sigmoid + correction bias for `noaux_tc`). The smallest gap of each prompt goes to
`routing_margins.json` in the fixture directory. A gap below the bf16 noise of the router's
input (about 1e-3 on these scores) flips with any change of summation order upstream, so the
bf16 invariance tests (chunked = whole on the GPU) skip such prompts
(tests/test_util.h: routing_stable_prompt).
  python3 tools/routing_margins.py tests/data/models/deepseek_v2_lite [OUT_DIR]
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

fixture = sys.argv[1].rstrip("/")
out_dir = sys.argv[2] if len(sys.argv) > 2 else fixture
ref = load_file(f"{fixture}/reference.safetensors")
prompts = []
while f"p{len(prompts)}.input_ids" in ref:
    prompts.append(ref[f"p{len(prompts)}.input_ids"].long().tolist())
model = AutoModelForCausalLM.from_pretrained(fixture, dtype=torch.float32).eval()
cfg = model.config
top_k = cfg.num_experts_per_tok
gaps = []  # per router call: [tokens]


def record(router, args):
    h = args[0].reshape(-1, args[0].shape[-1]).float()
    logits = h @ router.weight.float().t()
    if getattr(cfg, "topk_method", "") == "noaux_tc":
        scores = logits.sigmoid() + router.e_score_correction_bias.float()
    else:
        scores = logits.softmax(-1)
    ranked = scores.sort(-1, descending=True).values
    gaps.append(ranked[:, top_k - 1] - ranked[:, top_k])


for name, module in model.named_modules():
    if name.endswith("mlp.gate") and hasattr(module, "weight"):
        module.register_forward_pre_hook(record)
result = {"tool": "tools/routing_margins.py", "top_k": top_k,
          "scoring": getattr(cfg, "topk_method", "greedy"), "prompts": []}
for i, ids in enumerate(prompts):
    gaps.clear()
    with torch.no_grad():
        model(torch.tensor([ids]))
    per_layer = torch.stack(gaps)  # [moe layers, tokens]
    flat = int(per_layer.argmin())
    layer, token = divmod(flat, per_layer.shape[1])
    result["prompts"].append({"tokens": len(ids), "min_gap": float(per_layer.min()),
                              "moe_layer": layer, "token": token})
    print(f"{fixture} prompt {i} ({len(ids)} tokens): smallest routing gap "
          f"{per_layer.min():.3g} (MoE layer {layer}, token {token})")
with open(os.path.join(out_dir, "routing_margins.json"), "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")
