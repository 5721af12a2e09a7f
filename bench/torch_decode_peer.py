"""The strongest peer we can run beside strata on the H200: a plain Llama in torch (bf16
weights, random like --load-format dummy), a static KV cache, torch.compile and the whole
decode step replayed as one CUDA graph (mode="reduce-overhead"), gpt-fast style. It reads the
same config.json as `strata bench-one-batch` and prints one JSON line per batch size with the
same fields (prefill throughput, decode median ms/step, decode tok/s).

  python3 bench/torch_decode_peer.py bench/configs/llama-3.1-8b-instruct \
      --batch-size 1 64 --input-len 1024 --output-len 256
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F


def rope_tables(cfg, max_len, device):
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    theta = cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    ang = torch.outer(torch.arange(max_len, device=device).float(), inv)
    return torch.cos(ang), torch.sin(ang)  # [max_len, head_dim / 2] f32


def apply_rope(x, cos, sin):  # x [B, H, T, D]; cos/sin [T, D/2] (NeoX halves)
    x1, x2 = x.float().chunk(2, dim=-1)
    c, s = cos[None, None], sin[None, None]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


class Llama(torch.nn.Module):
    def __init__(self, cfg, batch, max_len, device):
        super().__init__()
        h, self.nh = cfg["hidden_size"], cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads", self.nh)
        self.hd = cfg.get("head_dim") or h // self.nh
        inter, vocab, self.n = cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
        self.eps = cfg.get("rms_norm_eps", 1e-5)
        g = torch.Generator(device=device).manual_seed(0)
        bf = dict(device=device, dtype=torch.bfloat16)

        def w(*shape):
            return (torch.rand(*shape, generator=g, **bf) * 2 - 1) * 0.02 * 3**0.5

        self.embed = w(vocab, h)
        self.lm_head = w(vocab, h)
        qkv = (self.nh + 2 * self.nkv) * self.hd
        self.layers = [dict(wqkv=w(qkv, h), wo=w(h, self.nh * self.hd), w13=w(2 * inter, h),
                            w2=w(h, inter), n1=torch.ones(h, **bf), n2=torch.ones(h, **bf))
                       for _ in range(self.n)]
        self.norm = torch.ones(h, **bf)
        shape = (batch, self.nkv, max_len, self.hd)
        self.k = [torch.zeros(shape, **bf) for _ in range(self.n)]
        self.v = [torch.zeros(shape, **bf) for _ in range(self.n)]
        self.cos, self.sin = rope_tables(cfg, max_len, device)
        self.max_len = max_len

    def rms(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * w

    def forward(self, tokens, pos, causal):
        # tokens [B, T]; pos [T] positions; the cache is written at pos.
        b, t = tokens.shape
        x = self.embed[tokens]
        cos, sin = self.cos[pos], self.sin[pos]
        for i, L in enumerate(self.layers):
            q, k, v = (self.rms(x, L["n1"]) @ L["wqkv"].T).split(
                [self.nh * self.hd, self.nkv * self.hd, self.nkv * self.hd], dim=-1)
            q = apply_rope(q.view(b, t, self.nh, self.hd).transpose(1, 2), cos, sin)
            k = apply_rope(k.view(b, t, self.nkv, self.hd).transpose(1, 2), cos, sin)
            v = v.view(b, t, self.nkv, self.hd).transpose(1, 2)
            self.k[i].index_copy_(2, pos, k)
            self.v[i].index_copy_(2, pos, v)
            if causal:  # prefill from position 0: flash attention over the new tokens
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:  # decode: the static cache, masked beyond pos
                mask = torch.arange(self.max_len, device=x.device)[None, None, None] <= pos[-1]
                o = F.scaled_dot_product_attention(q, self.k[i], self.v[i], attn_mask=mask,
                                                   enable_gqa=True)
            x = x + o.transpose(1, 2).reshape(b, t, -1) @ L["wo"].T
            gu = self.rms(x, L["n2"]) @ L["w13"].T
            gate, up = gu.chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ L["w2"].T
        return self.rms(x[:, -1], self.norm) @ self.lm_head.T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch-size", type=int, nargs="+", default=[1])
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=256)
    # Under `ncu --profile-from-start off`: the profiler runs for this many decode steps after
    # the warm-up (per-kernel GPU times of the captured step, beside strata's).
    ap.add_argument("--profile-steps", type=int, default=0)
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    dev = "cuda"
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    for batch in a.batch_size:
        model = Llama(cfg, batch, a.input_len + a.output_len, dev)
        decode = torch.compile(lambda tok, pos: model(tok, pos, False), mode="reduce-overhead",
                               fullgraph=True)
        tokens = torch.randint(0, cfg["vocab_size"], (batch, a.input_len), device=dev)
        with torch.inference_mode():
            model(tokens, torch.arange(a.input_len, device=dev), True)  # warm-up (cuBLAS, sdpa)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            logits = model(tokens, torch.arange(a.input_len, device=dev), True)
            torch.cuda.synchronize()
            prefill_s = time.perf_counter() - t0
            nxt = logits.argmax(-1, keepdim=True)
            for warm in range(3):  # compile + capture, at positions later overwritten
                decode(nxt, torch.tensor([a.input_len + warm], device=dev))
            if a.profile_steps:
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
                for s in range(a.profile_steps):
                    decode(nxt, torch.tensor([a.input_len + s], device=dev))
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()
            steps = []
            for s in range(a.output_len - 1):
                pos = torch.tensor([a.input_len + s], device=dev)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                nxt = decode(nxt, pos).argmax(-1, keepdim=True)
                torch.cuda.synchronize()
                steps.append(time.perf_counter() - t0)
        med = statistics.median(steps)
        print(json.dumps({"engine": "torch.compile+cudagraph", "batch_size": batch,
                          "input_len": a.input_len, "output_len": a.output_len,
                          "prefill_throughput_tok_s": batch * a.input_len / prefill_s,
                          "decode_median_latency_ms": med * 1e3,
                          "decode_throughput_tok_s": batch / med}), flush=True)
        del model, decode
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
