#!/usr/bin/env python3
"""Writes the mixed text that `strata tokenize --bench` measures: the reference strings of all
tokenizer fixtures (English, code, CJK, emoji, many scripts, random mixes), shuffled with a
fixed seed and joined by newlines until the file holds at least --mb megabytes.

  python3 bench/tokenizer_bench_text.py DATA_DIR OUT [--mb 4]

DATA_DIR holds <name>/reference.json (build/tests/tokenizers after configuring)."""
import argparse
import json
import pathlib
import random

parser = argparse.ArgumentParser()
parser.add_argument("data_dir")
parser.add_argument("out")
parser.add_argument("--mb", type=float, default=4.0)
args = parser.parse_args()

texts = []
for ref in sorted(pathlib.Path(args.data_dir).glob("*/reference.json")):
    texts += [c["text"] for c in json.loads(ref.read_text())["cases"] if c["text"]]
rng = random.Random(0)
parts, size = [], 0
while size < args.mb * 1e6:
    t = rng.choice(texts)
    parts.append(t)
    size += len(t.encode()) + 1
pathlib.Path(args.out).write_text("\n".join(parts), encoding="utf-8")
print(f"{args.out}: {size} bytes from {len(texts)} strings")
