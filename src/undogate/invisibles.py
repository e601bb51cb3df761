"""The characters a reviewer cannot see, and the one way every surface shows them.

A value that reaches a reviewer (the web UI, the reviewer CLI) must look like the
characters it holds. Some code points draw nothing, or reorder or disguise what is
around them, yet ``str.isprintable()`` is true for several of them: the Hangul fillers
(U+3164 looks like a space and is a letter), U+2800 BRAILLE PATTERN BLANK, the
combining grapheme joiner U+034F, the variation selectors (U+FE0F). ``visible`` shows
each such code point as ``⟨U+XXXX⟩``, so a reviewer sees the exact characters and none
can hide, fake or reorder text on the page.

Marked: every character that is not printable (controls, format characters such as
bidi overrides and zero-width marks, line and paragraph separators, whitespace other
than the ASCII space, surrogates, private use, unassigned), every
``Default_Ignorable_Code_Point``, and the blank-looking symbols below. Kept: the ASCII
space, tab and (where the surface lays out lines) newline. Pure: no I/O.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

# Default_Ignorable_Code_Point, exactly as DerivedCoreProperties.txt of Unicode 16.0.0
# lists it (27 ranges, 4174 code points; https://www.unicode.org/Public/16.0.0/ucd/
# DerivedCoreProperties.txt, unchanged since Unicode 14.0). Python's unicodedata does
# not expose the property, so the table lives here; tests/test_invisibles.py pins its
# size, and checks that each code point is marked.
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # Cf SOFT HYPHEN
    (0x034F, 0x034F),  # Mn COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # Cf ARABIC LETTER MARK
    (0x115F, 0x1160),  # Lo HANGUL CHOSEONG FILLER..HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # Mn KHMER VOWEL INHERENT AQ..KHMER VOWEL INHERENT AA
    (0x180B, 0x180D),  # Mn MONGOLIAN FREE VARIATION SELECTOR ONE..THREE
    (0x180E, 0x180E),  # Cf MONGOLIAN VOWEL SEPARATOR
    (0x180F, 0x180F),  # Mn MONGOLIAN FREE VARIATION SELECTOR FOUR
    (0x200B, 0x200F),  # Cf ZERO WIDTH SPACE..RIGHT-TO-LEFT MARK
    (0x202A, 0x202E),  # Cf LEFT-TO-RIGHT EMBEDDING..RIGHT-TO-LEFT OVERRIDE
    (0x2060, 0x2064),  # Cf WORD JOINER..INVISIBLE PLUS
    (0x2065, 0x2065),  # Cn <reserved-2065>
    (0x2066, 0x206F),  # Cf LEFT-TO-RIGHT ISOLATE..NOMINAL DIGIT SHAPES
    (0x3164, 0x3164),  # Lo HANGUL FILLER
    (0xFE00, 0xFE0F),  # Mn VARIATION SELECTOR-1..VARIATION SELECTOR-16
    (0xFEFF, 0xFEFF),  # Cf ZERO WIDTH NO-BREAK SPACE
    (0xFFA0, 0xFFA0),  # Lo HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # Cn <reserved-FFF0>..<reserved-FFF8>
    (0x1BCA0, 0x1BCA3),  # Cf SHORTHAND FORMAT LETTER OVERLAP..SHORTHAND FORMAT UP STEP
    (0x1D173, 0x1D17A),  # Cf MUSICAL SYMBOL BEGIN BEAM..MUSICAL SYMBOL END PHRASE
    (0xE0000, 0xE0000),  # Cn <reserved-E0000>
    (0xE0001, 0xE0001),  # Cf LANGUAGE TAG
    (0xE0002, 0xE001F),  # Cn <reserved-E0002>..<reserved-E001F>
    (0xE0020, 0xE007F),  # Cf TAG SPACE..CANCEL TAG
    (0xE0080, 0xE00FF),  # Cn <reserved-E0080>..<reserved-E00FF>
    (0xE0100, 0xE01EF),  # Mn VARIATION SELECTOR-17..VARIATION SELECTOR-256
    (0xE01F0, 0xE0FFF),  # Cn <reserved-E01F0>..<reserved-E0FFF>
)

# Printable, not default-ignorable, and drawn as nothing by common fonts: a value made
# of them looks empty or like spaces.
BLANK_LOOKING: tuple[tuple[int, int], ...] = (
    (0x2800, 0x2800),  # So BRAILLE PATTERN BLANK
    (0x1D159, 0x1D159),  # So MUSICAL SYMBOL NULL NOTEHEAD
)

_RANGES = tuple(sorted(DEFAULT_IGNORABLE + BLANK_LOOKING))
_STARTS = tuple(first for first, _ in _RANGES)
# Plain ASCII needs no look at each character: the common case stays fast.
_NOT_PLAIN_ASCII = re.compile(r"[^\t\n\x20-\x7e]")


def is_marked(ch: str) -> bool:
    """Whether ``visible`` shows the character ``ch`` as ``⟨U+XXXX⟩`` (tab and newline
    aside: the surface decides those)."""
    if ch == " ":
        return False
    if not ch.isprintable():
        return True
    cp = ord(ch)
    i = bisect.bisect_right(_STARTS, cp) - 1
    return i >= 0 and cp <= _RANGES[i][1]


def mark(ch: str) -> str:
    """The marker of one marked character as text: ``⟨U+XXXX⟩``."""
    return f"⟨U+{ord(ch):04X}⟩"


def visible(text: str, *, keep_newlines: bool = True, marker: Callable[[str], str] = mark) -> str:
    """``text`` with every marked character shown as ``marker`` makes it (``⟨U+XXXX⟩``).

    Tabs stay; newlines stay where the surface lays out lines (``keep_newlines``), and
    are marked where one line must stay one line (a terminal table cell). A surface that
    can style its markers passes its own ``marker``, so that text an agent typed (the
    characters ``⟨U+200B⟩``) never looks like a marker (docs/security.md).
    """
    if not _NOT_PLAIN_ASCII.search(text) and (keep_newlines or "\n" not in text):
        return text
    layout = "\t\n" if keep_newlines else "\t"
    return "".join(ch if ch in layout or not is_marked(ch) else marker(ch) for ch in text)


def runs(text: str, *, keep_newlines: bool = True) -> list[tuple[str, bool]]:
    """``visible(text)`` as runs of ``(text, is_marker)``: a surface that styles its
    markers (the terminal's reverse video) styles exactly the runs that are markers."""
    out: list[tuple[str, bool]] = []
    plain: list[str] = []
    layout = "\t\n" if keep_newlines else "\t"
    for ch in text:
        if ch in layout or not is_marked(ch):
            plain.append(ch)
            continue
        if plain:
            out.append(("".join(plain), False))
            plain = []
        out.append((mark(ch), True))
    if plain:
        out.append(("".join(plain), False))
    return out


__all__ = ["BLANK_LOOKING", "DEFAULT_IGNORABLE", "is_marked", "mark", "runs", "visible"]
