"""Near-duplicates of an anchor: TSRL §4.3's low-diversity pool, built offline by small deterministic edits.

TSRL §4.3 trains "on two anchor pools — high-diversity (varied styles, from differently-prompted Gemini-2.5-Pro)
vs. low-diversity (near-duplicate responses)". The text does not say how its near-duplicates were made. Ours
(`reward.select=near_duplicate`, tsrl.rewards.ladder): one anchor of the prompt's ladder and k − 1 copies of it,
each copy rewritten by word swaps that keep its meaning — a synonym or a spelled-out contraction (`SWAPS`) at
every (k − 1)-th swappable word, copy j starting at the j-th — so the copies differ from the anchor and from
each other in a few words and agree in everything else (length, form, content). A copy no swap reached (a short
joke has few swappable words) ends its last sentence with "!" instead of "." or "?". No model is asked: the pool is
the same on every machine and needs no endpoint. Markup (`<…>`) and the insides of <style> and <script> are
never edited, so a web page stays the same page. A text with neither swappable words nor a final "." or "?"
outside markup yields exact copies (the judge's cache then answers their pairs once).
"""

from __future__ import annotations

import re

SWAPS = {
    "big": "large",
    "large": "big",
    "small": "little",
    "little": "small",
    "begin": "start",
    "start": "begin",
    "began": "started",
    "started": "began",
    "maybe": "perhaps",
    "perhaps": "maybe",
    "almost": "nearly",
    "nearly": "almost",
    "quickly": "rapidly",
    "rapidly": "quickly",
    "happy": "glad",
    "glad": "happy",
    "whole": "entire",
    "entire": "whole",
    "difficult": "hard",
    "important": "crucial",
    "crucial": "important",
    "because": "since",
    "think": "believe",
    "thought": "believed",
    "answer": "reply",
    "very": "really",
    "really": "truly",
    "often": "frequently",
    "frequently": "often",
    "try": "attempt",
    "every": "each",
    "sure": "certain",
    "about": "regarding",
    "only": "just",
    "just": "only",
    "asked": "inquired",
    "probably": "likely",
    "likely": "probably",
    "always": "constantly",
    "though": "although",
    "although": "though",
    "until": "till",
    "okay": "fine",
    "someone": "somebody",
    "somebody": "someone",
    "everyone": "everybody",
    "everybody": "everyone",
    "anyone": "anybody",
    "anybody": "anyone",
    "nobody": "no one",
    "don't": "do not",
    "can't": "cannot",
    "won't": "will not",
    "isn't": "is not",
    "didn't": "did not",
    "doesn't": "does not",
    "it's": "it is",
    "i'm": "I am",
    "you're": "you are",
    "that's": "that is",
    "there's": "there is",
    "i've": "I have",
    "we're": "we are",
    "he's": "he is",
    "she's": "she is",
    "they're": "they are",
    "wasn't": "was not",
    "aren't": "are not",
    "couldn't": "could not",
    "wouldn't": "would not",
    "shouldn't": "should not",
    "haven't": "have not",
    "hasn't": "has not",
    "let's": "let us",
    "i'll": "I will",
    "you'll": "you will",
    "we've": "we have",
    "you've": "you have",
    "they've": "they have",
}
"""Swappable word (lower case) → its replacement: meaning-keeping synonyms and spelled-out contractions."""

MARKUP = re.compile(r"(<[^>]*>)")
WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
RAW = re.compile(r"<(style|script)\b", re.IGNORECASE)


def editable_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every stretch of text outside markup and outside <style>/<script> elements."""
    spans, offset, raw = [], 0, False
    for part in MARKUP.split(text):
        if part.startswith("<") and part.endswith(">"):
            raw = bool(RAW.match(part)) or (raw and not re.match(r"</(style|script)\b", part, re.IGNORECASE))
        elif not raw and part:
            spans.append((offset, offset + len(part)))
        offset += len(part)
    return spans


def swappable(text: str) -> list[re.Match[str]]:
    """The words of `text` that SWAPS can replace, in order, markup and raw elements left out."""
    return [
        m for start, end in editable_spans(text) for m in WORD.finditer(text, start, end) if m.group().lower() in SWAPS
    ]


def swapped(word: str) -> str:
    """The word's replacement, capitalised as the word was (a spelled-out "I" stays upper case)."""
    new = SWAPS[word.lower()]
    return new[0].upper() + new[1:] if word[0].isupper() else new


def near_duplicates(text: str, copies: int) -> list[str]:
    """`copies` near-duplicates of `text`: copy j (0-based) swaps the swappable words j, j + copies, j + 2·copies…
    (module docstring). Deterministic: the same text gives the same copies."""
    words = swappable(text)
    out = []
    for j in range(copies):
        edited, last = [], 0
        for m in words[j::copies]:
            edited += [text[last : m.start()], swapped(m.group())]
            last = m.end()
        copy = "".join(edited) + text[last:]
        out.append(copy if copy != text else exclaimed(text))
    return out


def exclaimed(text: str) -> str:
    """`text` with the last "." or "?" outside markup (and <style>/<script>) made "!"; unchanged without one."""
    marks = [i for start, end in editable_spans(text) for i in range(start, end) if text[i] in ".?"]
    return text if not marks else text[: marks[-1]] + "!" + text[marks[-1] + 1 :]
