"""Turns the JSON lines of bench/cuda_device_run.sh into the tables of docs/benchmarks-cuda.md.

    python3 bench/cuda_report.py RESULTS_DIR CONFIG_DIR
"""
import json
import sys
from pathlib import Path


def lines(path):
    p = Path(path)
    return [json.loads(l) for l in p.read_text().splitlines() if l.startswith("{")] if p.exists() else []


def main():
    out, config_dir = Path(sys.argv[1]), Path(sys.argv[2])
    c = json.loads((config_dir / "config.json").read_text())
    h, inter, layers, vocab = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    hd = h // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * hd
    per_layer = h * (h + 2 * kv) + h * h + 2 * h * inter + inter * h
    # Read per decode step: every layer's matrices and the LM head; the embedding table is
    # only gathered (one row per token), norms are noise.
    weight_bytes = 2 * (layers * per_layer + vocab * h)
    attn = lines(out / "attention.jsonl")
    copy = attn[0]["copy_GBps"] * 1e9
    floor_ms = weight_bytes / copy * 1e3
    print(f"weights read per decode step: {weight_bytes / 1e9:.2f} GB; copy bandwidth {copy / 1e12:.2f} TB/s; "
          f"floor {floor_ms:.2f} ms/step\n")
    hf = {r["batch_size"]: r for r in lines(out / "hf.jsonl")}
    print("| batch | ms / step (median) | decode tok/s | floor / step time | transformers ms / step | transformers tok/s | tok/s ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in lines(out / "strata_decode.jsonl"):
        b, ms = r["batch_size"], r["decode_median_latency_ms"]
        peer = hf.get(b)
        peer_cols = (f"{peer['decode_median_latency_ms']:.1f} | {peer['decode_throughput_tok_s']:.0f} | "
                     f"{r['decode_throughput_tok_s'] / peer['decode_throughput_tok_s']:.2f}x") if peer else "- | - | -"
        print(f"| {b} | {ms:.2f} | {r['decode_throughput_tok_s']:.0f} | {floor_ms / ms:.0%} | {peer_cols} |")
    for r in lines(out / "strata_nograph.jsonl"):
        print(f"\nwithout CUDA graphs, batch {r['batch_size']}: {r['decode_median_latency_ms']:.2f} ms / step "
              f"({floor_ms / r['decode_median_latency_ms']:.0%} of the floor)")
    print("\n| prefill | latency s | tok/s | transformers tok/s |")
    print("| --- | --- | --- | --- |")
    for r in lines(out / "strata_decode.jsonl") + lines(out / "strata_prefill.jsonl"):
        peer = hf.get(r["batch_size"]) if r["input_len"] == 1024 else None
        peer_col = f"{peer['prefill_throughput_tok_s']:.0f}" if peer else "-"
        print(f"| {r['batch_size']} x {r['input_len']} | {r['prefill_latency_s']:.3f} | "
              f"{r['prefill_throughput_tok_s']:.0f} | {peer_col} |")
    print("\n| decode attention 64 x 4096 | blocks/SM | unroll | splits | ms | GB/s | of copy |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in attn:
        tag = "shipped" if r["shipped"] else "sweep"
        print(f"| {tag} | {r['blocks_per_sm'] or 'default'} | {r['unroll'] or 'default'} | {r['splits']} | "
              f"{r['median_ms']:.3f} | {r['achieved_GBps']:.0f} | {r['fraction_of_copy']:.0%} |")


if __name__ == "__main__":
    main()
