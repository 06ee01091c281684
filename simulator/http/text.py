"""What the simulated model says, and how the simulator counts tokens.

Token counting (one rule everywhere: usage, metrics, the engine's batch, the five-token fault):
a token is a word of letters, digits and apostrophes with the whitespace before it, or one
punctuation mark; a symbol of more than one UTF-8 byte (the degree sign, an emoji) is one token
per byte, as in byte-level BPE vocabularies that have no token for it. Streamed, such a token
that ends inside the character carries no text (vLLM holds the bytes back and sends ""), and
the one that completes it carries the character. "The capital of France is" is five tokens,
and usage's prompt_tokens says five: the engine processes exactly what the prompt is, with no
BOS token in front, as with the tiktoken-style tokenizers of the catalog's models, where each
of those five common words is one token too. (Tokenizers that prepend a BOS, Llama's or
DeepSeek's, would report six: which is why the product records usage and calls a five-token
check inconclusive when it was not five.) A prompt of N plain words is N tokens here, and
/tokenize (`token_ids`) counts the same tokens.

A few well-known prompts get their well-known answers, a question about a fact stated earlier in
the prompt ("... the passphrase is amber-falcon. ... What is the passphrase?") gets that fact
back (long-context recall), anything else a generic paragraph. The `incoherent` fault (or
`--load-format dummy`, or a five-token prompt on an engine with the `five_token_corruption`
patch) makes the model babble syllables instead. With `ignore_eos` a generation runs to
max_tokens, continuing past where the answer would have stopped.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import zlib

_ANSWERS: tuple[tuple[str, str], ...] = (
    (
        "capital of france",
        " Paris. It is the largest city in France and has been the country's political, "
        "economic and cultural centre for centuries, home to the Louvre and the Eiffel Tower.",
    ),
    (
        "capital of germany",
        " Berlin, a city of about 3.7 million people on the river Spree, which became the "
        "capital of reunified Germany in 1990.",
    ),
    (
        "capital of japan",
        " Tokyo, the seat of the Emperor and the national government and one of the most "
        "populous metropolitan areas in the world.",
    ),
    (
        "capital of italy",
        " Rome, which was the centre of the Roman Empire and is home to Vatican City.",
    ),
    ("2 + 2", " 4. Adding two and two gives four, one of the first sums children learn."),
    ("2+2", " 4."),
    (
        "the sky is",
        " blue on a clear day because air molecules scatter the shorter blue wavelengths of "
        "sunlight more strongly than the red ones.",
    ),
    ("hello", " Hello! How can I help you today?"),
    (
        "degree sign",
        " ° is the degree sign: water boils at 100 °C (212 °F) at sea level.",
    ),
)
_GENERIC = (
    " a question that comes up often, and the short answer is that it depends on the context. "
    "In most cases the best approach is to start from the basics, check the assumptions, and "
    "then look at the details one step at a time."
)
_SYLLABLES = ("blor", "quint", "zeph", "mork", "trab", "fenu", "glox", "vrim", "snet", "wex", "olt")
_TOKEN = re.compile(r"\s*[\w']+|\s*[^\w\s]")
# "the passphrase is amber-falcon." stated somewhere, and "What is the passphrase?" at the end.
_FACT = re.compile(r"\bthe ([a-z][a-z ]{0,40}?) is ([\w-]+)[.!]", re.IGNORECASE)
_QUESTION = re.compile(r"\bwhat is the ([a-z][a-z ]{0,40}?)\?\s*$", re.IGNORECASE)
CORRUPTED_PROMPT_TOKENS = 5  # what the five_token_corruption patch trips on


def _byte_symbol(piece: str) -> bytes | None:
    """The UTF-8 bytes of a multi-byte symbol token, each a token of its own (None: one token)."""
    symbol = piece.lstrip()
    data = symbol.encode()
    return data if len(symbol) == 1 and not symbol.isalnum() and len(data) > 1 else None


def tokens(text: str) -> list[str]:
    """The text split into the simulator's tokens (each keeps its leading whitespace), each as
    its detokenized text: "" for the leading bytes of a multi-byte symbol."""
    out: list[str] = []
    for piece in _TOKEN.findall(text):
        data = _byte_symbol(piece)
        if data is not None:
            out += [""] * (len(data) - 1)
        out.append(piece)
    return out


def count_tokens(text: str) -> int:
    return len(tokens(text))


def token_ids(text: str) -> list[int]:
    """Ids for /tokenize, one per token of `tokens` (ids 3..258 are bytes; the rest of the
    vocabulary is a hash of the token's text: the same text, the same id)."""
    ids: list[int] = []
    for piece in _TOKEN.findall(text):
        data = _byte_symbol(piece)
        if data is not None:
            ids += [3 + byte for byte in data]
        else:
            ident = 259 + zlib.crc32(piece.encode()) % 150_000
            if len(_SEEN) < _SEEN_MAX:
                _SEEN.setdefault(ident, piece)
            ids.append(ident)
    return ids


# The vocabulary's words, as far as /tokenize has given out their ids (for /detokenize).
_SEEN: dict[int, str] = {}
_SEEN_MAX = 200_000


def detokenize(ids: list[int]) -> str | int:
    """The text of token ids (bytes 3..258, and ids `token_ids` gave out); else the first
    id it does not know."""
    out = bytearray()
    for ident in ids:
        if 3 <= ident <= 258:
            out.append(ident - 3)
        elif ident in _SEEN:
            out += _SEEN[ident].encode()
        else:
            return ident
    return out.decode("utf-8", "replace")


def prompt_usage_tokens(prompt: str) -> int:
    """usage.prompt_tokens: the prompt's tokens (no BOS, see the module's docstring)."""
    return count_tokens(prompt)


def _babble(prompt: str) -> list[str]:
    seed = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "big")
    words = []
    for k in range(40):
        a = _SYLLABLES[(seed >> (k % 50)) % len(_SYLLABLES)]
        b = _SYLLABLES[(seed // (k + 3)) % len(_SYLLABLES)]
        words.append(" " + a + ("-" if k % 4 == 1 else "") + b)
        seed = (seed * 6364136223846793005 + 1442695040888963407) % 2**64
    return [p for w in words for p in tokens(w)]


def _recalled(prompt: str) -> str | None:
    """The fact a closing question asks for, when the prompt stated it earlier."""
    question = _QUESTION.search(prompt)
    if question is None:
        return None
    subject = " ".join(question.group(1).lower().split())
    for fact in _FACT.finditer(prompt[: question.start()]):
        if " ".join(fact.group(1).lower().split()) == subject:
            return f" The {subject} is {fact.group(2)}."
    return None


def answer(prompt: str) -> str:
    recalled = _recalled(prompt)
    if recalled is not None:
        return recalled
    norm = " ".join(prompt.lower().split())
    for key, text in _ANSWERS:
        if key in norm:
            return text
    return _GENERIC


def continuation(
    prompt: str, max_tokens: int, *, incoherent: bool, ignore_eos: bool
) -> tuple[list[str], str]:
    """The tokens the model generates and why it stopped ("stop" or "length")."""
    pieces = _babble(prompt) if incoherent else tokens(answer(prompt))
    if ignore_eos and len(pieces) < max_tokens:
        # Past the end of its answer the model goes on; the same words again is enough here.
        more = _babble(prompt[::-1]) if incoherent else tokens(_GENERIC)
        pieces = list(itertools.islice(itertools.chain(pieces, itertools.cycle(more)), max_tokens))
    if len(pieces) > max_tokens or (ignore_eos and len(pieces) == max_tokens):
        return pieces[:max_tokens], "length"
    return pieces, "stop"
