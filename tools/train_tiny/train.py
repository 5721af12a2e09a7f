#!/usr/bin/env python3
"""Trains the vendored tiny English model (tiny-en in tests/data/models.tar.xz) on one GPU.

Input: tools/train_tiny/data/corpus.json.xz from prepare_data.py. Steps:
  1. a byte-level BPE tokenizer (4096 tokens, 3 special: <|endoftext|> = EOS and document
     separator, <|user|>, <|assistant|>) trained on the training split;
  2. several LlamaForCausalLM shapes, each in its own process (the GPU has room for all of them
     at once), trained for the same wall-time budget; each keeps the weights of its best
     validation loss;
  3. the shape with the best validation loss is saved with save_pretrained in bf16 along with
     tokenizer.json, tokenizer_config.json (chat template, EOS) and generation_config.json;
  4. the saved bf16 weights are loaded back in f32 and scored on the test split and on the
     tests' held-out text (tests/data/heldout_en.txt) with strata's windowing (see
     window_spans), on the CPU in f32; a unigram baseline too. All of it goes to
     results.json, which the C++ tests compare `strata perplexity` against.

  python3 tools/train_tiny/train.py --out OUTDIR [--budget-s 300]
"""
import argparse
import json
import lzma
import math
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
EOS, USER, ASSISTANT = "<|endoftext|>", "<|user|>", "<|assistant|>"
CHAT_TEMPLATE = ("{% for message in messages %}<|{{ message['role'] }}|>\n"
                 "{{ message['content'] }}<|endoftext|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
SEQ_LEN = 512

# name: (hidden, layers, heads, intermediate, epochs, dropout). All about 3.0-3.5M parameters
# with tied embeddings, so the bf16 safetensors stay under 7 MB.
SHAPES = {
    "d256-l3": (256, 3, 4, 704, 30, 0.1),
    "d224-l4": (224, 4, 7, 608, 30, 0.1),
    "d192-l6": (192, 6, 3, 512, 30, 0.1),
    "d192-l6-e12": (192, 6, 3, 512, 12, 0.1),
    "d128-l14": (128, 14, 4, 352, 30, 0.1),
}


def chat_text(user, assistant):
    return f"{USER}\n{user}{EOS}\n{ASSISTANT}\n{assistant}{EOS}"


def window_spans(n, ctx, stride):
    """strata perplexity's windows over n tokens: [begin, end) is fed from an empty cache and
    targets t in [first, end) are scored (by the logits at t - 1). Windows start every `stride`
    tokens; each scores only the tokens no earlier window scored, so all tokens but the first
    are scored exactly once, each with at least ctx - stride tokens before it in its window
    (all of them in the first window)."""
    spans, begin, prev_end = [], 0, 0
    while True:
        end = min(begin + ctx, n)
        first = max(prev_end, begin + 1)
        if first < end:
            spans.append((begin, end, first))
        prev_end = end
        if end == n:
            return spans
        begin += stride


def score(model, ids, ctx, stride, device):
    import torch
    total, count = 0.0, 0
    with torch.no_grad():
        for begin, end, first in window_spans(len(ids), ctx, stride):
            x = torch.tensor([ids[begin:end]], device=device)
            logp = torch.log_softmax(model(input_ids=x).logits[0].float(), dim=-1)
            tgt = torch.tensor(ids[first:end], device=device)
            rows = torch.arange(first - 1 - begin, end - 1 - begin, device=device)
            total += -logp[rows, tgt].double().sum().item()
            count += end - first
    return {"context_length": ctx, "stride": stride, "tokens_scored": count,
            "mean_nll": total / count, "perplexity": math.exp(total / count)}


def train_tokenizer(corpus, path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=4096, min_frequency=2, show_progress=False,
                                  special_tokens=[EOS, USER, ASSISTANT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus["train"] + [chat_text(a, b) for a, b in corpus["chat"]],
                            trainer)
    tok.save(path)
    return tok


def encode_stream(tok, texts):
    ids = []
    for enc in tok.encode_batch(texts):
        ids.append(0)  # EOS before every document: a document starts after <|endoftext|>
        ids.extend(enc.ids)
    return ids


def make_model(shape, vocab):
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
    d, layers, heads, ff, _, _ = shape
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=d, intermediate_size=ff,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=heads, head_dim=d // heads,
                      max_position_embeddings=SEQ_LEN, rms_norm_eps=1e-5,
                      tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = LlamaForCausalLM(cfg)
    model.generation_config = GenerationConfig(bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return model.to(torch.float32)


def worker(args):
    """One shape: train for the budget, keep the best validation weights."""
    import torch
    import torch.nn.functional as F
    shape = SHAPES[args.worker]
    torch.manual_seed(args.seed)
    data = torch.load(os.path.join(args.work, "ids.pt"))
    dev = "cuda"
    train = data["train"].to(dev)
    valid = data["valid"].to(dev)
    model = make_model(shape, data["vocab"]).to(dev)
    p_drop = shape[5]
    drop = lambda m, i, o: F.dropout(o, p_drop, m.training)
    model.model.embed_tokens.register_forward_hook(drop)
    for layer in model.model.layers:  # residual-branch dropout (Llama has none of its own)
        layer.self_attn.o_proj.register_forward_hook(drop)
        layer.mlp.register_forward_hook(drop)
    n_params = sum(p.numel() for p in model.parameters())
    batch = 128
    steps_per_epoch = len(train) // (batch * SEQ_LEN)
    total = args.steps or shape[4] * steps_per_epoch
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)
    warmup = 100
    lr_at = lambda s: 3e-3 * min(1.0, (s + 1) / warmup) * (
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / total))))
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    offs = torch.arange(SEQ_LEN + 1, device=dev)
    vwin = valid[: (len(valid) - 1) // SEQ_LEN * SEQ_LEN + 1]

    def valid_loss():
        model.eval()
        x = vwin[:-1].view(-1, SEQ_LEN)
        y = vwin[1:].view(-1, SEQ_LEN)
        tot = 0.0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            for i in range(0, len(x), 64):
                lg = model(input_ids=x[i:i + 64]).logits.float()
                tot += F.cross_entropy(lg.view(-1, lg.shape[-1]), y[i:i + 64].reshape(-1),
                                       reduction="sum").item()
        model.train()
        return tot / y.numel()

    best, best_state, best_step, hist = float("inf"), None, -1, []
    t0 = time.time()
    eval_every = max(steps_per_epoch // 2, 1)
    step = 0
    model.train()
    while step < total and time.time() - t0 < args.budget_s:
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        idx = torch.randint(0, len(train) - SEQ_LEN - 1, (batch,), device=dev, generator=gen)
        seq = train[idx[:, None] + offs]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            lg = model(input_ids=seq[:, :-1]).logits
        loss = F.cross_entropy(lg.float().view(-1, lg.shape[-1]), seq[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % eval_every == 0 or step == total:
            vl = valid_loss()
            hist.append((step, round(time.time() - t0, 1), round(loss.item(), 4), round(vl, 4)))
            print(args.worker, hist[-1], flush=True)
            if vl < best:
                best, best_step = vl, step
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if best_state is None:  # stopped before the first evaluation
        best, best_step = valid_loss(), step
        best_state = model.state_dict()
    torch.save(best_state, os.path.join(args.work, args.worker + ".pt"))
    res = {"shape": args.worker, "hidden": shape[0], "layers": shape[1], "heads": shape[2],
           "intermediate": shape[3], "epochs_planned": shape[4], "dropout": p_drop,
           "params": n_params, "batch": batch, "seq_len": SEQ_LEN, "steps_planned": total,
           "steps_run": step, "steps_per_epoch": steps_per_epoch,
           "wall_s": round(time.time() - t0, 1), "best_valid_loss": best,
           "best_step": best_step, "history": hist}
    with open(os.path.join(args.work, args.worker + ".json"), "w") as f:
        json.dump(res, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/tiny_work")
    ap.add_argument("--budget-s", type=float, default=300)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (0: epochs)")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--worker", default="")
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    import torch
    t_start = time.time()
    os.makedirs(args.work, exist_ok=True)
    random.seed(args.seed)
    with lzma.open(os.path.join(HERE, "data", "corpus.json.xz"), "rt", encoding="utf-8") as f:
        corpus = json.load(f)
    tok_path = os.path.join(args.work, "tokenizer.json")
    tok = train_tokenizer(corpus, tok_path)
    # Training stream: documents and chat pairs in a seeded random order.
    items = corpus["train"] + [chat_text(a, b) for a, b in corpus["chat"]]
    random.Random(args.seed).shuffle(items)
    ids = {"train": torch.tensor(encode_stream(tok, items)),
           "valid": torch.tensor(encode_stream(tok, corpus["valid"])),
           "vocab": tok.get_vocab_size()}
    torch.save(ids, os.path.join(args.work, "ids.pt"))
    print(f"tokenizer + encoding: {time.time() - t_start:.1f}s; train tokens "
          f"{len(ids['train'])}, valid {len(ids['valid'])}", flush=True)

    shapes = args.shapes.split(",")
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", s, "--work", args.work,
                               "--budget-s", str(args.budget_s), "--seed", str(args.seed),
                               "--steps", str(args.steps), "--out", args.out])
             for s in shapes]
    for p in procs:
        p.wait()
    runs = []
    for s in shapes:
        try:
            with open(os.path.join(args.work, s + ".json")) as f:
                runs.append(json.load(f))
        except OSError:
            print("shape", s, "failed", flush=True)
    best = min(runs, key=lambda r: r["best_valid_loss"])
    train_wall = time.time() - t_start
    print("best:", best["shape"], best["best_valid_loss"], flush=True)

    # Save: bf16 weights, tokenizer files, generation config.
    model_dir = os.path.join(args.out, "tiny-en")
    os.makedirs(model_dir, exist_ok=True)
    model = make_model(SHAPES[best["shape"]], ids["vocab"])
    model.load_state_dict(torch.load(os.path.join(args.work, best["shape"] + ".pt")))
    model.to(torch.bfloat16).save_pretrained(model_dir)
    tok.save(os.path.join(model_dir, "tokenizer.json"))
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None,
                   "eos_token": EOS, "pad_token": EOS, "unk_token": None,
                   "add_bos_token": False, "clean_up_tokenization_spaces": False,
                   "model_max_length": SEQ_LEN, "chat_template": CHAT_TEMPLATE}, f, indent=2)
    print("saved:", sorted(os.listdir(model_dir)), flush=True)

    # Score the saved bf16 weights in f32 on the CPU (what strata's CPU path computes).
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(8)
    ev = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager")
    ev = ev.float().eval()
    tok2 = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    with open(os.path.join(REPO, "tests", "data", "heldout_en.txt"), encoding="utf-8") as f:
        held_text = f.read()
    held_ids = tok2.encode(held_text).ids
    results = {"model": best, "all_runs": runs, "vocab": ids["vocab"],
               "train_tokens": len(ids["train"]), "valid_tokens": len(ids["valid"]),
               "train_wall_s_incl_tokenizer": round(train_wall, 1),
               "torch": torch.__version__, "heldout_en_ids": held_ids,
               "heldout_en_bytes": len(held_text.encode("utf-8")), "heldout_en": []}

    def dump():  # after every stage, so that a failure late in the run loses nothing before it
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)

    dump()
    for ctx, stride in ((256, 128), (512, 512), (64, 32)):
        r = score(ev, held_ids, ctx, stride, "cpu")
        print("heldout_en.txt", r, flush=True)
        results["heldout_en"].append(r)
    # The whole test split: one token stream as for training (EOS before each document), on
    # the GPU in f32 (no tf32), context 512 stride 256.
    test_ids = encode_stream(tok2, corpus["test"])
    test_bytes = sum(len(t.encode("utf-8")) for t in corpus["test"])
    r = score(ev.to("cuda"), test_ids, 512, 256, "cuda")
    r["bits_per_byte"] = r["mean_nll"] * r["tokens_scored"] / math.log(2) / test_bytes
    results["test_split"] = r
    print("test split", r, flush=True)
    dump()
    # The same weights in bf16 on the GPU, to size what a bf16 engine may differ by.
    try:
        evb = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
        results["heldout_en_bf16_cuda"] = score(evb.to("cuda").eval(), held_ids, 256, 128,
                                                "cuda")
        print("heldout_en.txt bf16 cuda", results["heldout_en_bf16_cuda"], flush=True)
    except Exception as e:
        print("bf16 scoring failed:", e, flush=True)
    try:
        from transformers import AutoTokenizer
        hf = AutoTokenizer.from_pretrained(model_dir)
        msgs = [{"role": "user", "content": "Hi!"}]
        results["chat_render"] = hf.apply_chat_template(msgs, tokenize=False,
                                                        add_generation_prompt=True)
        rid = hf.apply_chat_template(msgs, add_generation_prompt=True)
        rid = rid["input_ids"] if not isinstance(rid, list) else rid
        results["chat_render_ids"] = [int(i) for i in rid]
        print("chat template:", repr(results["chat_render"]), flush=True)
    except Exception as e:  # informative only; the files are written either way
        print("AutoTokenizer check failed:", e, flush=True)
    # Unigram baseline: training-token frequencies (add-one), scored on the same targets.
    counts = torch.bincount(ids["train"], minlength=ids["vocab"]).double() + 1
    logp = torch.log(counts / counts.sum())
    u = -logp[torch.tensor(test_ids[1:])].mean().item()
    results["unigram_test_split"] = {"mean_nll": u, "perplexity": math.exp(u)}
    uh = -logp[torch.tensor(held_ids[1:])].mean().item()
    results["unigram_heldout_en"] = {"mean_nll": uh, "perplexity": math.exp(uh)}
    print("unigram", results["unigram_test_split"], results["unigram_heldout_en"], flush=True)

    # Greedy samples with transformers, to set beside strata's output.
    ev = ev.to("cpu")
    samples = {}
    for name, prompt in (("text", "And God said"), ("text2", "The jury said"),
                         ("chat", f"{USER}\nIn the beginning God created the heaven and the earth."
                          f"{EOS}\n{ASSISTANT}\n")):
        x = torch.tensor([tok2.encode(prompt).ids])
        out = ev.generate(x, max_new_tokens=40, do_sample=False, eos_token_id=0, pad_token_id=0)
        new = out[0, x.shape[1]:].tolist()
        samples[name] = {"prompt": prompt, "ids": new, "text": tok2.decode(new)}
        print(name, repr(prompt), "->", repr(samples[name]["text"]), flush=True)
    results["greedy_samples"] = samples
    results["total_wall_s"] = round(time.time() - t_start, 1)
    dump()
    print("done in", results["total_wall_s"], "s", flush=True)


if __name__ == "__main__":
    main()
