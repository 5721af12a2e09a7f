"""Serving a hybrid (attention + Mamba2) model with prefix caching of its recurrent state:
`strata serve` twice on the same model and device, once with --mamba-radix-cache-strategy
extra_buffer and once with --disable-radix-cache; the same shared-prefix workload (a shared
system prompt, then a two-turn conversation) sent to both, one request at a time, greedy.
Prints one JSON line: cache hits from /metrics and whether every answer is identical.

    python3 bench/hybrid_serve_check.py STRATA_BINARY MODEL_DIR [--device cuda] [--port 30200]
"""
import argparse
import json
import random
import subprocess
import sys
import time
import urllib.request


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/generate", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.split()[-1])
    return None


def serve(binary, model, device, port, extra):
    proc = subprocess.Popen([binary, "serve", "--model", model, "--device", device, "--port",
                             str(port), "--page-size", "16", "--mamba-track-interval", "64"] + extra,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return proc
        except Exception:
            if proc.poll() is not None:
                sys.exit("strata serve exited: " + proc.stderr.read().decode()[-2000:])
            time.sleep(0.5)
    sys.exit("strata serve did not come up")


def workload(port, vocab):
    rng = random.Random(7)
    system = [rng.randrange(vocab) for _ in range(200)]
    answers = []
    greedy = {"max_new_tokens": 16, "temperature": 0}
    for q in range(4):  # four questions after one shared system prompt
        ids = system + [rng.randrange(vocab) for _ in range(20 + q)]
        answers.append(post(port, {"input_ids": ids, "sampling_params": greedy})["output_ids"])
    turn = [rng.randrange(vocab) for _ in range(150)]
    first = post(port, {"input_ids": turn, "sampling_params": greedy})["output_ids"]
    turn2 = turn + first + [rng.randrange(vocab) for _ in range(30)]
    answers += [first, post(port, {"input_ids": turn2, "sampling_params": greedy})["output_ids"]]
    return answers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("model")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--port", type=int, default=30200)
    a = ap.parse_args()
    vocab = json.load(open(a.model + "/config.json"))["vocab_size"]
    results = {}
    for name, extra in [("extra_buffer", ["--mamba-radix-cache-strategy", "extra_buffer"]),
                        ("no_cache", ["--disable-radix-cache"])]:
        proc = serve(a.binary, a.model, a.device, a.port, extra)
        try:
            answers = workload(a.port, vocab)
            results[name] = {"answers": answers,
                             "cached_tokens": metric(a.port, "strata:cached_tokens_total"),
                             "prompt_tokens": metric(a.port, "strata:prompt_tokens_total")}
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    same = results["extra_buffer"]["answers"] == results["no_cache"]["answers"]
    print(json.dumps({"model": a.model, "device": a.device, "requests": len(results["no_cache"]["answers"]),
                      "cached_tokens_extra_buffer": results["extra_buffer"]["cached_tokens"],
                      "prompt_tokens": results["extra_buffer"]["prompt_tokens"],
                      "cached_tokens_no_cache": results["no_cache"]["cached_tokens"],
                      "answers_identical": same}))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
