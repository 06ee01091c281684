"""A tiny Llama built at test time, nothing downloaded: random weights, a tokenizer trained here.

Runs inside the real-engine venv (it has torch, transformers and tokenizers), never the
project's: ``<env>/bin/python tests/real_engine/tiny_model.py OUT_DIR [--seed N]`` writes a
directory that ``vllm serve OUT_DIR`` loads offline (HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1).
It prints one JSON line describing what it built.

The tokenizer is byte-level BPE, so every string can be encoded, and a token may end inside a
multi-byte UTF-8 character (the corpus has accented words and a few symbols): that is how a
real server comes to stream chunks whose text is empty.

Standard library at import time; torch and friends only inside ``build``, so the project's
test code may import the constants (``SERVED_NAME``, ``corpus``) without them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

SERVED_NAME = "tiny/llama-test"
BOS, EOS, PAD = "<s>", "</s>", "<pad>"
# Reasoning markers as single tokens: vLLM's think-tag reasoning parsers (deepseek_r1, and
# deepseek_v3 when a request asks for thinking) look them up in the vocabulary.
THINK, END_THINK = "<think>", "</think>"
SPECIAL_TOKENS = [BOS, EOS, PAD, THINK, END_THINK]
VOCAB_SIZE = 2048
MAX_POSITIONS = 2048
# vLLM's CPU attention supports head sizes 32, 64, 80, ... (CPUAttentionBackend.
# get_supported_head_sizes); 16 loads but fails the first request, so 128 / 4 heads = 32.
ARCHITECTURE = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
# A plain chat template: one line per message, then the assistant's turn, which opens with
# <think> when the request asks for thinking (chat_template_kwargs {"enable_thinking": true}),
# as DeepSeek's and Qwen's templates do.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant:"
    "{% if enable_thinking is defined and enable_thinking %}<think>{% endif %}"
    "{% endif %}"
)

CORPUS = """\
The control plane looks at the current state of a host before it acts, and keeps a record.
A probe opens one connection, runs a fixed set of read-only commands and parses what they print.
The capital of France is Paris. The capital of Italy is Rome. The capital of Japan is Tokyo.
Two plus two is four. Three plus four is seven. Ten minus three is seven.
The quick brown fox jumps over the lazy dog while the engine streams tokens to the client.
An inference server loads a model into memory, warms up, and then answers completions.
Health checks answer while the server is up; a server that is loading refuses connections.
Qu'est-ce que c'est? Un café crème, s'il vous plaît. Voilà: déjà vu, naïve façade, résumé.
Größe, Straße, Übung, schön. ¿Dónde está la estación? Mañana será otro día, señor.
Temperatures near 25 °C, power near 83.85 W, memory 97199 MiB of 97887 MiB. Price: 5 € or £4.
Arrows → and ← point the way; a check ✓ marks the passing test, a cross ✗ the failing one.
Models are served under a name; the client asks /v1/models which names the server knows.
user: What is the capital of France?
assistant: The capital of France is Paris.
user: What is two plus two?
assistant: Two plus two is four.
system: You are a helpful assistant that answers briefly.
Once upon a time a small model learned a few short answers and repeated them faithfully.
Every reason must have visible characters; every change names the snapshot it was decided on.
"""


def corpus() -> str:
    """The prose above, and generated lines (numbers, hosts, timings) so BPE has enough to merge
    into a vocabulary of VOCAB_SIZE."""
    units = ["ms", "tokens", "MiB", "W", "requests", "seconds"]
    words = ["probe", "swap", "restart", "rollback", "approve", "stream", "serve", "verify"]
    lines = [
        f"Host gpu-node-{i % 97:02d} {words[i % len(words)]}s request {i * 37 % 10007} in "
        f"{i * 13 % 997} {units[i % len(units)]}, {i * 7 % 101} of {i % 64 + 1} on GPU {i % 8}."
        for i in range(600)
    ]
    return CORPUS + "\n".join(lines) + "\n"


def train_tokenizer(text: str, vocab_size: int = VOCAB_SIZE):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # A few passes over the corpus so merges have counts to rank on.
    tokenizer.train_from_iterator(text.splitlines() * 4, trainer=trainer)
    # Like Llama's tokenizers: a prompt starts with BOS (the chat template writes its own, and
    # vLLM's chat path tokenizes without special tokens).
    tokenizer.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{BOS} $A",
                pair=f"{BOS} $A {BOS} $B",
                special_tokens=[(BOS, tokenizer.token_to_id(BOS))],
            ),
        ]
    )
    return tokenizer


def build(out: Path, seed: int = 0) -> dict[str, object]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    raw = train_tokenizer(corpus())
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        model_max_length=MAX_POSITIONS,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)

    vocab = len(tokenizer)
    config = LlamaConfig(
        vocab_size=vocab,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.convert_tokens_to_ids(BOS),
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
        tie_word_embeddings=False,
        torch_dtype="float32",
        **ARCHITECTURE,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config.max_length = MAX_POSITIONS
    model.save_pretrained(out)
    parameters = sum(p.numel() for p in model.parameters())
    return {
        "path": str(out),
        "vocab_size": vocab,
        "parameters": parameters,
        "seed": seed,
        "seconds": round(time.monotonic() - started, 2),
        "files": sorted(p.name for p in out.iterdir()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(json.dumps(build(args.out, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
