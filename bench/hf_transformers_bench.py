"""Hugging Face transformers (torch, bf16, sdpa) on the same GPU, as the peer for
`strata bench-one-batch`: one prefill of batch x input_len random tokens, then
output_len - 1 greedy decode steps with the KV cache; random weights from config.json.

    python3 bench/hf_transformers_bench.py CONFIG_DIR --batch-size 64 --input-len 1024 --output-len 256

Prints one JSON object per batch size (same keys as strata's --json output)."""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def bench(model, vocab, batch, input_len, output_len, warmup):
    ids = torch.randint(0, vocab, (batch, input_len), device="cuda")
    rounds = 2 if warmup else 1
    for r in range(rounds):
        timed = r == rounds - 1
        steps = output_len if timed else min(output_len, 3)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize()
            prefill_s = time.perf_counter() - t0
            past = out.past_key_values
            step_s = []
            for _ in range(steps - 1):
                t1 = time.perf_counter()
                out = model(input_ids=nxt, past_key_values=past, use_cache=True)
                past = out.past_key_values
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                torch.cuda.synchronize()
                step_s.append(time.perf_counter() - t1)
        del past, out
        torch.cuda.empty_cache()
    return {
        "engine": "transformers " + __import__("transformers").__version__ + ", torch " + torch.__version__,
        "batch_size": batch, "input_len": input_len, "output_len": output_len,
        "prefill_latency_s": prefill_s, "prefill_throughput_tok_s": batch * input_len / prefill_s,
        "decode_median_latency_ms": statistics.median(step_s) * 1e3 if step_s else 0.0,
        "decode_throughput_tok_s": batch * len(step_s) / sum(step_s) if step_s else 0.0,
        "decode_steps": len(step_s),
        "attention": getattr(model.config, "_attn_implementation", "?"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config_dir")
    ap.add_argument("--batch-size", type=int, nargs="+", default=[1, 64])
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=256)
    args = ap.parse_args()
    config = AutoConfig.from_pretrained(args.config_dir)
    # Random bf16 weights, as strata's dummy format: a published quantization (gpt-oss's MXFP4)
    # would need its checkpoint and kernels.
    if getattr(config, "quantization_config", None) is not None:
        del config.quantization_config
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    # sdpa where transformers has it for the family; eager otherwise (gpt-oss's sinks).
    with torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
        except (ValueError, NotImplementedError) as e:
            print(f"sdpa unavailable ({e}); eager attention", file=__import__("sys").stderr)
            model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model = model.to(torch.bfloat16).eval()
    for b in args.batch_size:
        print(json.dumps(bench(model, config.vocab_size, b, args.input_len, args.output_len, True)), flush=True)


if __name__ == "__main__":
    main()
