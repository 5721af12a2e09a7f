#!/usr/bin/env python3
"""The routing margins of a DeepSeek-style MoE fixture, written beside it for the tests.

For every prompt of the fixture's reference, transformers (CPU, f32, the stored weights) runs
the prompt once; a hook on every MoE router records, per token, the gap between the score of
the last expert chosen and that of the first one left out (softmax scores for `greedy` top-k,
sigmoid + correction bias for `noaux_tc`). The smallest gap of each prompt goes to
`routing_margins.json` in the fixture directory. A gap below the bf16 noise of the router's
input (about 1e-3 on these scores) flips with any change of summation order upstream, so the
bf16 invariance tests (chunked = whole on the GPU) skip such prompts
(tests/test_util.h: routing_stable_prompt). tools/bf16_sensitivity.py prints a cruder margin
(raw router logits, no scoring or groups) beside its bf16 run; this one is what the tests read.
  python3 tools/routing_margins.py tests/data/models/deepseek_v2_lite [OUT_DIR]
(after scripts/pack_fixtures.sh unpack; pack again to vendor the new routing_margins.json).
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
    bias = getattr(router, "e_score_correction_bias", None)
    if bias is None:  # DeepSeek-V2's greedy top-k over softmax scores
        gaps.append(top_k_gap(logits.softmax(-1), top_k))
        return
    # DeepSeek-V3's noaux_tc: sigmoid scores + the correction bias; with groups, the best
    # topk_group groups by the sum of their two best scores first, then top-k inside them. The
    # choice is as close to flipping as the nearer of the two boundaries.
    scores = logits.sigmoid() + bias.float()
    groups, keep = getattr(cfg, "n_group", 1) or 1, getattr(cfg, "topk_group", 1) or 1
    if groups == 1:
        gaps.append(top_k_gap(scores, top_k))
        return
    by_group = scores.view(scores.shape[0], groups, -1)
    group_scores = by_group.topk(2, dim=-1).values.sum(-1)
    chosen = group_scores.topk(keep, dim=-1).indices
    mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, chosen, True)
    inside = by_group.masked_fill(~mask.unsqueeze(-1), float("-inf")).flatten(1)
    gaps.append(torch.minimum(top_k_gap(group_scores, keep), top_k_gap(inside, top_k)))


def top_k_gap(scores, k):
    """Per row, the k-th best score less the (k+1)-th (infinite where nothing is left out)."""
    if k >= scores.shape[-1]:
        return torch.full(scores.shape[:-1], float("inf"))
    ranked = scores.sort(-1, descending=True).values
    return ranked[:, k - 1] - ranked[:, k]


scoring = "greedy"
for name, module in model.named_modules():
    if name.endswith("mlp.gate") and hasattr(module, "weight"):
        module.register_forward_pre_hook(record)
        if getattr(module, "e_score_correction_bias", None) is not None:
            scoring = "noaux_tc"
result = {"tool": "tools/routing_margins.py", "top_k": top_k, "scoring": scoring, "prompts": []}
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
