#!/usr/bin/env python3
"""Reference renderings of the chat templates strata's golden test checks
(tests/chat_template_refs_test.cpp), made with transformers' apply_chat_template.

Inputs (all in the repository, nothing downloaded):
  - tests/data/chat_templates/*.jinja: templates vendored from llama.cpp's models/templates/
    (tests/data/chat_templates/README.md says which commit);
  - the chat templates of the tokenizer fixtures (tokenizer_config.json inside
    tests/data/tokenizers.tar.xz: qwen3, llama3, deepseek_v3);
  - tests/data/chat_templates/conversations.json: the conversations (with and without tools),
    the tools, each template's special tokens, and `now`: the clock strftime_now() reads (both
    engines here and strata's test fix it, so that templates printing today's date render the
    same on any day).
Output: one JSON file, {"engine", "templates": {name: {"cases": [{"name", "text"} |
{"name", "error"}]}}}.

Run (on a machine with transformers; the GPU machine has it):
  python3 tools/make_template_refs.py --out tests/data/chat_templates/references.json

`--engine jinja2` renders with jinja2 in transformers' environment replicated (trim_blocks,
lstrip_blocks, loopcontrols, its tojson, raise_exception, strftime_now) for machines without
transformers; its output says so ("engine": "jinja2"), and the transformers one replaces it.
"""
import argparse
import datetime
import io
import json
import os
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "chat_templates")
FIXTURES = ["qwen3", "llama3", "deepseek_v3"]


def templates():
    out = {}
    for name in sorted(os.listdir(DATA)):
        if name.endswith(".jinja"):
            with open(os.path.join(DATA, name), encoding="utf-8", newline="") as f:
                out[name] = f.read()
    with tarfile.open(os.path.join(ROOT, "tests", "data", "tokenizers.tar.xz")) as tar:
        for fixture in FIXTURES:
            member = tar.extractfile(f"{fixture}/tokenizer_config.json")
            config = json.load(io.TextIOWrapper(member, encoding="utf-8"))
            template = config.get("chat_template")
            if isinstance(template, list):
                template = next(t["template"] for t in template if t.get("name") == "default")
            if template is None:
                member = tar.extractfile(f"{fixture}/chat_template.jinja")
                template = member.read().decode("utf-8")
            out[fixture] = template
    return out


def transformers_renderer(fixed):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    from transformers.utils import chat_template_utils

    # transformers' strftime_now() calls `datetime.now()` of its module: give it the fixed clock.
    base = chat_template_utils.datetime
    if not (isinstance(base, type) and issubclass(base, datetime.datetime)):
        sys.exit("transformers.utils.chat_template_utils.datetime is not datetime.datetime: "
                 "update how this script fixes strftime_now's clock")

    class FixedClock(base):
        @classmethod
        def now(cls, tz=None):
            return fixed

    chat_template_utils.datetime = FixedClock

    def render(source, specials, messages, tools, add_generation_prompt, kwargs):
        tok = PreTrainedTokenizerFast(
            tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
            **specials)
        return tok.apply_chat_template(messages, tools=tools, chat_template=source, tokenize=False,
                                       add_generation_prompt=add_generation_prompt, **kwargs)
    import transformers
    return render, f"transformers {transformers.__version__}"


def jinja2_renderer(now):
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return now.strftime(fmt)

    class GenerationTag(jinja2.ext.Extension):
        """transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body
        (it marks the assistant's tokens only when apply_chat_template is asked for that mask)."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now

    def render(source, specials, messages, tools, add_generation_prompt, kwargs):
        return env.from_string(source).render(messages=messages, tools=tools, documents=None,
                                              add_generation_prompt=add_generation_prompt,
                                              **specials, **kwargs)
    return render, f"jinja2 {jinja2.__version__} (transformers' environment replicated)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(DATA, "references.json"))
    parser.add_argument("--engine", choices=["transformers", "jinja2"], default="transformers")
    args = parser.parse_args()
    with open(os.path.join(DATA, "conversations.json"), encoding="utf-8") as f:
        spec = json.load(f)
    now = datetime.datetime.fromisoformat(spec["now"])
    make = transformers_renderer if args.engine == "transformers" else jinja2_renderer
    render, engine = make(now)
    result = {"engine": engine, "templates": {}}
    for name, source in templates().items():
        cases = []
        for case in spec["cases"]:
            tools = spec["tools"] if case.get("with_tools") else None
            try:
                text = render(source, spec["special_tokens"].get(name, {}), case["messages"], tools,
                              case["add_generation_prompt"], case.get("kwargs", {}))
                cases.append({"name": case["name"], "text": text})
            except Exception as e:  # the template refuses the conversation: strata must too
                cases.append({"name": case["name"], "error": f"{type(e).__name__}: {e}"})
        result["templates"][name] = {"cases": cases}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n = sum(len(t["cases"]) for t in result["templates"].values())
    print(f"{args.out}: {len(result['templates'])} templates, {n} renderings ({engine})")


if __name__ == "__main__":
    sys.exit(main())
