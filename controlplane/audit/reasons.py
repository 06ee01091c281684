"""Reasons are words: the one validator every reason goes through (requests, approvals,
rejections, break-glass, host-key acceptance).

A reason is what an auditor reads later, so it must hold text a person can see. Whitespace,
format characters (zero-width spaces and joiners, bidi controls), control characters, lone
combining marks and the handful of letters that render as nothing (Hangul fillers, the braille
blank) do not count.
"""

from __future__ import annotations

import unicodedata

from django.core.exceptions import ValidationError

MAX_LENGTH = 2000
# Categories that draw nothing on their own: separators, controls, format, surrogates,
# private use, unassigned, and combining marks.
_INVISIBLE_CATEGORIES = {"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me"}
# Letters and symbols that are assigned visible categories yet render blank.
_BLANK_CHARACTERS = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800", "\u180e", "\u17b4", "\u17b5"}


def visible_characters(text: str) -> str:
    """The characters of `text` a reader can see."""
    return "".join(
        c
        for c in unicodedata.normalize("NFC", text)
        if unicodedata.category(c) not in _INVISIBLE_CATEGORIES and c not in _BLANK_CHARACTERS
    )


def validate_reason(value: object, *, what: str = "a reason", minimum: int = 1) -> str:
    """The reason with outer whitespace removed, or ValidationError saying what is missing.

    It needs at least `minimum` visible characters, one of them a letter or a digit.
    """
    text = value.strip() if isinstance(value, str) else ""
    visible = visible_characters(text)
    has_word = any(unicodedata.category(c)[0] in "LN" for c in visible)
    if len(visible) < minimum or not has_word:
        need = f"at least {minimum} visible characters" if minimum > 1 else "visible text"
        raise ValidationError(
            f"The reason for {what} needs {need}, including a letter or a digit "
            f"(it has {len(visible)}).",
            code="reason",
        )
    if len(text) > MAX_LENGTH:
        raise ValidationError(
            f"The reason for {what} is longer than {MAX_LENGTH} characters.", code="reason"
        )
    return text
