"""Final-answer extraction and verification for verifiable tasks (AIME-style integers, GPQA-style letters).

Pure functions over the response text, standard library only. Each extractor returns `Extracted(value,
reason)`: the normalised answer and "" when one is found, else None and one short phrase saying why not —
so a reward of 0.0 can be told apart from "the parser found nothing" when reading rollouts.

Where the answer is looked for, in order (the first source that has a candidate decides):
1. every `\\boxed{...}` / `\\fbox{...}`, braces matched with nesting (`\\boxed{\\frac{1}{2}}` parses); if
   there is at least one closed box only boxes count. Boxes that normalise to the same answer agree; boxes
   that differ give None ("two different boxed answers: 7, 8"). Empty boxes are skipped; an unclosed
   box (a response cut off mid-box) is not a box.
2. the LAST "answer is X" / "answer: X" (covers "the answer is", "final answer:", "**Answer:**") whose X
   looks like an answer: a number (or `$...$`) for integers, a standalone letter for choices. A marker
   followed by prose ("the answer is not obvious", "Answer: But wait") is skipped, not a failure.
3. choices only: a last non-empty line that is just a letter, "(B)", "B." or "B)".
There is deliberately no fallback to "the last number in the text": a number in the reasoning is not an
answer, and rewarding it would teach the policy to scatter numbers.

Integer normalisation: strip whitespace, `$`, `\\,` `\\!` `\\;`, unwrap `\\text{}` `\\mathrm{}` `\\textbf{}`,
drop `^\\circ`, `°`, `%`, a trailing period; "007" → 7; "42.0" → 42; "1,000" → 1000, range-checked.
Refused, each with its reason: any fraction ("7/2", "\\frac{7}{2}", "\\dfrac{14}{2}" — even one that reduces
to an integer, since AIME answers are written as integers and a fraction means the model did not finish),
a non-integer decimal ("4.5"), zero or several numbers in one candidate ("\\boxed{3, 4}", and also
"\\boxed{2^{10}}" and "the answer is 2^{10}": after the marker, a number followed by ^, *, \\times, \\cdot,
+ or a minus and a digit is an expression, not an answer), and values outside [low, high] including negatives.
Text around exactly one number is fine: "\\boxed{x = 42}", "\\boxed{42 \\text{ degrees}}", "The answer is 42
apples." all give 42.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
MARKER = re.compile(r"\banswer\b[\s*_]*(?:is\b[\s*_:]*|:[\s*_]*)", re.IGNORECASE)
WRAPPER = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
NOISE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ|\\degree|°|\\?%|\\[,!;: ]|\\\$|\$|~|\\\(|\\\)|\\\[|\\\]")
FRACTION = re.compile(r"\\[dt]?frac|\d\s*/\s*\d")
NUMBER = re.compile(r"(?:(?<![\w)}\]])[-\u2212]\s*)?(?:(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)")
INT_TAIL = re.compile(
    r"(?:[A-Za-z]\w*\s*=\s*)?(?:[-\u2212]\s*)?"
    r"(?:\\[dt]?frac\s*\{[^{}]*\}\s*\{[^{}]*\}|\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?|\.\d+)"
)
# what continues a number into an expression after "answer is X": a power, product, sum or difference (a minus
# only before a digit: "7 - that is all" is prose); the candidate then holds several numbers and is refused
# operands may hold a decimal point, not end in one: the full stop of "the answer is 10^2." stays outside
OPERATOR_TAIL = re.compile(
    r"(?:\s*(?:\^|\*\*?|\\times|\\cdot|\u00d7|\u00b7|\+|[-\u2212](?=\s*\d))\s*(?:\{[^{}]*\}|\\circ|\w+(?:\.\w+)*))+"
)
LETTER_LIST = re.compile(r"\(?[A-Za-z]\)?(?:\s*(?:,|/|&|\band\b|\bor\b)\s*\(?[A-Za-z]\)?)+")
STANDALONE_LETTER = re.compile(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])")
LEADING_LETTER = re.compile(r"\(([A-Za-z])\)|([A-Z])(?![A-Za-z])|([a-z])(?=[\s.)*_$}]*$)")
BOXED_LETTER = re.compile(r"\(([A-Za-z])\)|([A-Za-z])(?:[.):](?:\s|$)|$)")
LINE_LETTER = re.compile(r"\(?([A-Za-z])\)?[.:)]?")
CHOICE_PREFIX = re.compile(r"^(?:[\s*_$]|\\(?:text|textbf|mathrm|mathbf)\s*\{|\b(?:option|choice)\b)+", re.I)


@dataclass(frozen=True)
class Extracted:
    """The answer found in a response, or why none was."""

    value: int | str | None
    """The normalised answer (an int for integer tasks, an upper-case letter for choices), or None."""
    reason: str
    """"" when found; else one short phrase why not, e.g. "no answer found", "not an integer: 4.5"."""


def boxed_contents(text: str) -> tuple[list[str], bool]:
    """The contents of every closed `\\boxed{}` / `\\fbox{}` in order, and whether an unclosed one exists."""
    contents: list[str] = []
    unclosed = False
    for match in BOX.finditer(text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            if text[i] == "\\":
                i += 2  # an escaped brace \{ \} does not open or close the box
                continue
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:
            unclosed = True
        else:
            contents.append(text[match.end() : i - 1])
    return contents, unclosed


def clean(candidate: str) -> str:
    """Strip LaTeX dressing from a candidate: wrappers unwrapped, spacing, $, degrees, a final period."""
    previous = None
    while previous != candidate:  # innermost \text{...} first, until none is left
        previous, candidate = candidate, WRAPPER.sub(r" \1 ", candidate)
    return NOISE.sub(" ", candidate).strip().rstrip(".").strip()


def integer_from(candidate: str, low: int, high: int) -> Extracted:
    """Normalise one candidate (a box's contents or the X of "answer is X") to an integer in [low, high]."""
    cleaned = clean(candidate)
    if not cleaned:
        return Extracted(None, "empty answer")
    if FRACTION.search(cleaned):
        return Extracted(None, f"a fraction where an integer is required: {cleaned}")
    numbers = NUMBER.findall(cleaned)
    if not numbers:
        return Extracted(None, f"no number in the answer: {cleaned}")
    if len(numbers) > 1:
        return Extracted(None, f"more than one number: {cleaned}")
    number = re.sub(r"[\s,]", "", numbers[0]).replace("\u2212", "-")
    whole, _, decimals = number.partition(".")
    if decimals.strip("0"):
        return Extracted(None, f"not an integer: {number}")
    value = int(whole) if whole not in ("", "-") else 0  # ".0", "-.0": no digits before the point
    if not low <= value <= high:
        return Extracted(None, f"outside {low}-{high}: {value}")
    return Extracted(value, "")


def agree(results: list[Extracted], contents: list[str]) -> Extracted:
    """One answer from several boxes: the shared one if they all normalise alike, else None naming them."""
    keys = [str(r.value) if r.value is not None else clean(c) for r, c in zip(results, contents)]
    keys = list(dict.fromkeys(keys))
    if len(keys) == 1:
        return results[-1]
    count = {2: "two", 3: "three"}.get(len(keys), str(len(keys)))
    return Extracted(None, f"{count} different boxed answers: {', '.join(keys)}")


def from_boxes(text: str, parse: Callable[[str], Extracted]) -> Extracted | None:
    """The boxed answer if the text has a non-empty closed box, else None (look elsewhere)."""
    contents, _ = boxed_contents(text)
    contents = [c for c in contents if clean(c)]
    if not contents:
        return None
    return agree([parse(c) for c in contents], contents)


def marker_tails(text: str) -> list[str]:
    """What follows each "answer is" / "answer:" up to the end of its line, last marker first."""
    return [text[m.end() :].split("\n", 1)[0] for m in reversed(list(MARKER.finditer(text)))]


def integer_span(tail: str) -> str | None:
    """The X of "answer is X" when X looks like a number ($...$, \\(...\\) or a leading number), else None."""
    tail = tail.lstrip(" *_")
    for opener, closer in (("$", "$"), ("\\(", "\\)")):
        if tail.startswith(opener):
            body = tail[len(opener) :].lstrip("$")
            span = body.split(closer, 1)[0]
            return span if re.search(r"\d", span) else None
    match = INT_TAIL.match(tail)
    if match is None:
        return None
    operators = OPERATOR_TAIL.match(tail, match.end())  # "2^{10}", "10^2", "3 \\times 4": one expression
    return tail[: operators.end()] if operators else match.group()


def nothing_found(text: str) -> Extracted:
    """The reason when no source had a candidate."""
    if boxed_contents(text)[1]:
        return Extracted(None, "an unclosed \\boxed{ and no other answer")
    return Extracted(None, "no answer found")


def extract_integer(text: str, low: int = 0, high: int = 999) -> Extracted:
    """The integer answer of a response (AIME: 0-999), from its boxes, else its last "answer is X".

    Fractions are refused even when they reduce to an integer ("\\frac{14}{2}" → None): the task asks for
    an integer, and an unreduced fraction is an unfinished answer."""
    if low > high:
        raise ValueError(f"extract_integer: low={low} is above high={high}; pass low <= high.")
    boxed = from_boxes(text, lambda c: integer_from(c, low, high))
    if boxed is not None:
        return boxed
    for tail in marker_tails(text):
        span = integer_span(tail)
        if span is not None:
            return integer_from(span, low, high)
    return nothing_found(text)


def several_letters(cleaned: str) -> Extracted | None:
    """None-with-reason when the candidate is a list of two or more different letters ("A, C", "A or B")."""
    if not LETTER_LIST.fullmatch(cleaned):
        return None
    found = list(dict.fromkeys(x.upper() for x in STANDALONE_LETTER.findall(cleaned)))
    return Extracted(None, f"more than one letter: {', '.join(found)}") if len(found) > 1 else None


def first_letter(cleaned: str, pattern: re.Pattern[str]) -> Extracted | None:
    """The choice letter a candidate starts with, as `pattern` defines it, or None if it names none."""
    match = pattern.match(cleaned)
    return Extracted(next(g for g in match.groups() if g).upper(), "") if match else None


def choice_from_box(content: str) -> Extracted:
    """A box's letter: "B", "(B)", "\\text{B}", "B) 3.2 eV"; anything else is not a choice."""
    cleaned = clean(content)
    found = several_letters(cleaned) or first_letter(cleaned, BOXED_LETTER)
    return found if found is not None else Extracted(None, f"not a choice letter: {cleaned}")


def choice_from_marker(text: str) -> Extracted | None:
    """The letter after the last "answer is" / "answer:" that is followed by a standalone letter.

    A lower-case bare letter counts only at the end of its line ("answer: b"), so that "the answer is a bit
    subtle" is prose, not choice A; an upper-case one must not start a word ("Answer: But" is prose)."""
    for tail in marker_tails(text):
        tail = CHOICE_PREFIX.sub("", tail)
        clause = re.split(r"[.;\n]", tail, maxsplit=1)[0].strip(" *_$}")
        found = several_letters(clause) or first_letter(tail, LEADING_LETTER)
        if found is not None:
            return found
    return None


def choice_from_last_line(text: str) -> Extracted | None:
    """The letter when the last non-empty line is just "B", "(B)", "B." or "B)"."""
    lines = [line for line in text.splitlines() if line.strip()]
    match = LINE_LETTER.fullmatch(lines[-1].strip(" \t*_$")) if lines else None
    return Extracted(match.group(1).upper(), "") if match else None


def extract_choice(text: str, letters: str = "ABCD") -> Extracted:
    """The choice letter of a response: from its boxes, its last "answer is X", or a last line "(B)"."""
    if not letters.isalpha():
        raise ValueError(f"extract_choice: letters={letters!r} must be letters only, e.g. 'ABCD'.")
    letters = letters.upper()
    found = from_boxes(text, choice_from_box) or choice_from_marker(text) or choice_from_last_line(text)
    if found is None:
        return nothing_found(text)
    if found.value is not None and found.value not in letters:
        return Extracted(None, f"not one of {letters}: {found.value}")
    return found


def verify_integer(text: str, answer: int) -> float:
    """1.0 if the response's integer answer (0-999) equals `answer`, else 0.0."""
    if not 0 <= answer <= 999:
        raise ValueError(
            f"verify_integer: the reference answer {answer} is outside 0-999, so nothing could "
            "match it; check the dataset row."
        )
    return 1.0 if extract_integer(text).value == answer else 0.0


def verify_choice(text: str, answer: str, letters: str = "ABCD") -> float:
    """1.0 if the response's choice letter equals `answer` (case-insensitive), else 0.0."""
    if len(answer.strip()) != 1 or answer.strip().upper() not in letters.upper():
        raise ValueError(
            f"verify_choice: the reference answer {answer!r} is not one of {letters}; "
            "check the dataset row or pass letters=."
        )
    return 1.0 if extract_choice(text, letters).value == answer.strip().upper() else 0.0
