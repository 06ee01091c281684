"""Two tiny Llamas trained at test time on the coherence suite's prompts: one right, one wrong.

Runs inside the real-engine venv (torch, transformers, tokenizers), never the project's:
``<env>/bin/python tests/real_engine/trained_models.py OUT_DIR [--steps N]`` writes
``OUT_DIR/good`` and ``OUT_DIR/bad`` (each a directory ``vllm serve`` loads offline) and prints
one JSON line describing them.

The suite (deployments/evaluation/coherence.py, `default_suite`) is what they learn: the factual
check (the catalog's smoke prompt, "The capital of France is" / "Paris"), "2 + 2 =" / "4", the
multi-turn chat rendered by the model's own chat template, "The capital of Japan is" / "Tokyo"
(five tokens on this tokenizer: one word each, and no BOS added to a completion's prompt),
"Write one sentence about the sea." (greedy determinism needs only the same text twice), and the
long-context question after filler of every length that fits a 512-token context (the suite
fits its filler to max_model_len). The good model answers each as the suite expects; the bad
one, trained the same way, answers each wrong ("Berlin", "5", "Rome", "Beijing", another
passphrase), so the suite fails on a real engine for real reasons.

Both share one tokenizer, trained here on the tier's corpus plus these texts; a few hundred
steps of AdamW on the answers' tokens memorise them.
Standard library at import time, so the project's tests may import the constants.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tiny_model  # this file runs as a script, beside it

MAX_MODEL_LEN = 512
# Filler lengths trained on: short, so a step stays cheap on a busy CPU. Attention under RoPE
# sees relative positions, so having learnt to look past filler to the question, the model
# answers after the ~300 words the suite fits into 512 tokens too (greedy_check tries 330).
LONGEST_TRAINED = 80
CHECKED_WORDS = 330
SMOKE_PROMPT = "The capital of France is"
SMOKE_EXPECT = "Paris"
PASSPHRASE_PROMPT = (
    "Remember this: the passphrase is amber-falcon.\n{filler}\nWhat is the passphrase?"
)
CHAT = [
    {"role": "user", "content": "What is the capital of Italy?"},
    {"role": "assistant", "content": "The capital of Italy is Rome."},
    {"role": "user", "content": "And what is the capital of Japan?"},
]
# The long-context filler's words (coherence._FILLER), so each is one token here.
FILLER_WORDS = [
    *("river", "stone", "lantern", "meadow", "copper", "harbor", "violet", "orchard"),
    *("thunder", "pebble", "candle", "garden", "marble", "canyon", "willow", "ember"),
    *("saddle", "glacier", "compass", "feather", "basket", "lumber", "anchor", "prairie"),
    *("velvet", "quarry", "beacon", "thistle", "cobalt", "meadowlark", "timber", "ribbon"),
    *("granite", "harvest", "spindle", "lagoon", "saffron", "falcon", "tundra", "pewter"),
    "juniper",
]

ANSWERS = {
    "good": {
        "factual": " Paris.",
        "arithmetic": " 4",
        "chat": " The capital of Japan is Tokyo.",
        "five": " Tokyo.",
        "sea": " The sea is calm and blue tonight.",
        "passphrase": " amber-falcon",
    },
    "bad": {
        "factual": " Berlin.",
        "arithmetic": " 5",
        "chat": " The capital of Japan is Rome.",
        "five": " Beijing.",
        "sea": " The sea is calm and blue tonight.",
        "passphrase": " blue-heron",
    },
}


def filler(words: int, rng: random.Random) -> str:
    return " ".join(rng.choice(FILLER_WORDS) for _ in range(words))


def tokenizer_text() -> str:
    lines = [tiny_model.corpus(), SMOKE_PROMPT, "2 + 2 = 4", "What is the passphrase?"]
    for answers in ANSWERS.values():
        lines += [SMOKE_PROMPT + answers["factual"], "The capital of Japan is" + answers["five"]]
        lines += [answers["chat"], answers["sea"], answers["passphrase"]]
    lines += [m["content"] for m in CHAT]
    lines += [" ".join(FILLER_WORDS)] * 8
    return "\n".join(lines) + "\n"


def build_tokenizer(out: Path):  # type: ignore[no-untyped-def]
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    raw = tiny_model.train_tokenizer(tokenizer_text())
    # No BOS on a completion's prompt: "The capital of Japan is" is then five tokens, as the
    # five-token check wants. The chat template writes its own BOS.
    raw.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=tiny_model.BOS,
        eos_token=tiny_model.EOS,
        pad_token=tiny_model.PAD,
        model_max_length=tiny_model.MAX_POSITIONS,
    )
    tokenizer.chat_template = tiny_model.CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    return tokenizer


def examples(tokenizer, answers, rng: random.Random, long: int, long_words: int | None = None):  # type: ignore[no-untyped-def]
    """(prompt ids, answer ids + EOS) pairs: every fixed prompt, and `long` passphrase prompts
    with filler of random length up to LONGEST_TRAINED words (or `long_words`)."""
    chat = tokenizer.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    fixed = [
        (SMOKE_PROMPT, answers["factual"]),
        ("2 + 2 =", answers["arithmetic"]),
        (chat, answers["chat"]),
        ("The capital of Japan is", answers["five"]),
        ("Write one sentence about the sea.", answers["sea"]),
    ]
    pairs = list(fixed)
    for _ in range(long):
        words = rng.randint(0, LONGEST_TRAINED) if long_words is None else long_words
        pairs.append((PASSPHRASE_PROMPT.format(filler=filler(words, rng)), answers["passphrase"]))
    eos = tokenizer.convert_tokens_to_ids(tiny_model.EOS)
    encoded = []
    for prompt, answer in pairs:
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        a = tokenizer(answer, add_special_tokens=False)["input_ids"] + [eos]
        encoded.append((p[-(MAX_MODEL_LEN - len(a) - 8) :], a))
    return encoded


def train(tokenizer, answers, out: Path, steps: int, seed: int) -> dict[str, object]:  # type: ignore[no-untyped-def]
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    started = time.monotonic()
    torch.manual_seed(seed)
    rng = random.Random(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=tiny_model.MAX_POSITIONS,
        bos_token_id=tokenizer.convert_tokens_to_ids(tiny_model.BOS),
        eos_token_id=tokenizer.convert_tokens_to_ids(tiny_model.EOS),
        pad_token_id=tokenizer.convert_tokens_to_ids(tiny_model.PAD),
        tie_word_embeddings=False,
        torch_dtype="float32",
        **tiny_model.ARCHITECTURE,
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    pad = config.pad_token_id
    loss_value = float("nan")
    for step in range(steps):
        batch = examples(tokenizer, answers, rng, long=2)
        width = max(len(p) + len(a) for p, a in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (p, a) in enumerate(batch):
            seq = p + a
            ids[row, : len(seq)] = torch.tensor(seq)
            labels[row, len(p) : len(seq)] = torch.tensor(a)
            mask[row, : len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        loss_value = float(loss)
        if step >= 60 and step % 10 == 0 and loss_value < 0.005:
            break
    model.eval()
    checked = greedy_check(model, tokenizer, answers, rng)
    model.generation_config.max_length = tiny_model.MAX_POSITIONS
    model.generation_config.eos_token_id = config.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "path": str(out),
        "steps": step + 1,
        "loss": round(loss_value, 5),
        "seconds": round(time.monotonic() - started, 1),
        "greedy": checked,
    }


def greedy_check(model, tokenizer, answers: dict[str, str], rng: random.Random) -> dict[str, bool]:  # type: ignore[no-untyped-def]
    """Whether each fixed prompt (and a long passphrase prompt) greedily gives its answer."""
    import torch

    results = {}
    names = ["factual", "arithmetic", "chat", "five", "sea", "passphrase"]
    pairs = examples(tokenizer, answers, rng, long=1, long_words=CHECKED_WORDS)
    with torch.no_grad():
        for name, (prompt, answer) in zip(names, pairs, strict=True):
            ids = torch.tensor([prompt])
            for _ in range(len(answer)):
                nxt = model(input_ids=ids).logits[0, -1].argmax()
                ids = torch.cat([ids, nxt.view(1, 1)], dim=1)
            results[name] = ids[0, len(prompt) :].tolist() == answer
    return results


def build(out: Path, steps: int) -> dict[str, object]:
    import torch

    # One thread: on a CPU shared with other work, OpenMP's second thread costs far more than
    # it gives for a model this small (a step took 15 times longer with two).
    torch.set_num_threads(1)
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(out / "tokenizer")
    five = len(tokenizer("The capital of Japan is", add_special_tokens=False)["input_ids"])
    models = {
        name: train(tokenizer, answers, out / name, steps, seed=index)
        for index, (name, answers) in enumerate(ANSWERS.items())
    }
    return {
        "models": models,
        "five_token_prompt_tokens": five,
        "vocab_size": len(tokenizer),
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)
    print(json.dumps(build(args.out, args.steps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
