"""Every quotation on the papers' pages stands verbatim in the papers' texts and names the section it comes from.

docs/protocols.md and docs/differences.md put each setting beside the papers' words. A quotation there is a run
between double quotes ("…" or “…”) outside code spans, read per table row or per paragraph. It must be a
substring of one passage of tests/data/paper_passages.md, where whitespace runs count as one space and nothing
else is normalised ("≈94.6%" and "≈ 94.6 %" differ); "..." or "…" inside a quotation elides text between parts
that must appear in that order in the same passage. Its row or paragraph must name that passage's section
(§4.5, Table 4, Abstract, …), or, for a title, the paper. The passages are verbatim copies of the texts, so this
test reads no paper at run time. The Reasoning Arena text is in Chinese and has no passage but its title line:
the pages paraphrase it, marked "(our translation)", and never put it in quotation marks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PASSAGES = ROOT / "tests" / "data" / "paper_passages.md"
PAGES = ("docs/protocols.md", "docs/differences.md")

CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
QUOTE = re.compile(r"“([^”]*)”|\"([^\"]*)\"")
ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…)\s*")
HEADER = re.compile(r"^## (.+?) \| (.+?)\s*$")


@dataclass(frozen=True)
class Passage:
    """One verbatim passage of a paper's text."""

    paper: str
    """The paper as the pages name it: TSRL, Reasoning Arena, ArenaRL, cai-tournament."""
    section: str
    """The section as the pages cite it (§4.5, Table 1, Abstract), or "title"."""
    text: str
    """The passage, whitespace runs made one space."""


def spaced(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def read_passages(path: Path = PASSAGES) -> list[Passage]:
    """The passages under `## <paper> | <section>` headers; the text before the first header is a preamble."""
    passages: list[Passage] = []
    header: tuple[str, str] | None = None
    lines: list[str] = []
    for line in [*path.read_text(encoding="utf-8").splitlines(), "## end | end"]:
        match = HEADER.match(line)
        if not match:
            lines.append(line)
            continue
        if header is not None:
            passages.append(Passage(*header, spaced(" ".join(lines))))
        header, lines = (match.group(1), match.group(2)), []
    return passages


def units(text: str) -> list[str]:
    """Each table row on its own, each paragraph's or list item's lines joined: a quotation may wrap inside one."""
    found: list[str] = []
    paragraph: list[str] = []
    for line in [*text.splitlines(), ""]:
        if re.match(r"\s*(?:[-*] |\d+\. )", line) and paragraph:
            found.append(" ".join(paragraph))
            paragraph = []
        if line.lstrip().startswith("|") or not line.strip():
            if paragraph:
                found.append(" ".join(paragraph))
                paragraph = []
            if line.strip():
                found.append(line)
        else:
            paragraph.append(line.strip())
    return found


def quotations(unit: str) -> list[str]:
    return [a or b for a, b in QUOTE.findall(CODE_SPAN.sub("", unit))]


def holds(quote: str, passage: Passage) -> bool:
    """The quotation's parts appear in the passage in order ("..." elides what lies between)."""
    at = 0
    for part in (p for p in ELLIPSIS.split(spaced(quote)) if p):
        at = passage.text.find(part, at)
        if at < 0:
            return False
        at += len(part)
    return True


def names(unit: str, passage: Passage) -> bool:
    """The row or paragraph cites the passage: its section (§4.1 is not §4.10), or its paper for a title."""
    if passage.section == "title":
        return passage.paper in unit
    return re.search(re.escape(passage.section) + r"(?![\d.]*\d)", unit) is not None


def unverified(text: str, passages: list[Passage]) -> list[str]:
    """Each quotation of `text` that is in no passage, or whose row or paragraph names no passage holding it."""
    problems: list[str] = []
    for unit in units(text):
        for quote in quotations(unit):
            sources = [p for p in passages if holds(quote, p)]
            if not sources:
                problems.append(f"not verbatim in the texts: {quote!r}")
            elif not any(names(unit, p) for p in sources):
                cited = ", ".join(f"{p.paper} {p.section}" for p in sources)
                problems.append(f"{quote!r} stands in {cited}, which its row or paragraph does not name")
    return problems


def test_passages_name_a_paper_and_a_section() -> None:
    passages = read_passages()
    assert {p.paper for p in passages} == {"TSRL", "Reasoning Arena", "ArenaRL", "cai-tournament"}
    assert [p.section for p in passages if p.paper == "Reasoning Arena"] == ["title"]
    assert all(p.text for p in passages)
    assert len({(p.paper, p.section) for p in passages}) == len(passages)


def test_the_check_catches_a_cut_quotation_and_a_missing_section() -> None:
    """The cut quotation of §4.4 (its text ends "(−4.2 pts on average)" and has no space in "≈94.6%")."""
    passages = read_passages()
    cut = '| metric | retained | quoted, §4.4: "retains ≈ 94.6 % of its performance (−4.2 pts)" |'
    assert unverified(cut, passages) == [
        f"not verbatim in the texts: {'retains ≈ 94.6 % of its performance (−4.2 pts)'!r}"
    ]
    exact = '| metric | retained | quoted, §4.4: "TSRL retains ≈94.6% of its performance (−4.2 pts on average)" |'
    assert unverified(exact, passages) == []
    unnamed = '| metric | retained | quoted, §4.10: "TSRL retains ≈94.6% of its performance" |'
    assert len(unverified(unnamed, passages)) == 1
    elided = (
        'ArenaRL (Abstract): "the built seeded single-elimination scheme ... while operating with only O(N) complexity"'
    )
    assert unverified(elided, passages) == []
    wrong_order = 'ArenaRL (Abstract): "while operating with only O(N) complexity ... the built seeded"'
    assert len(unverified(wrong_order, passages)) == 1


@pytest.mark.parametrize("page", PAGES)
def test_every_quotation_is_verbatim_and_names_its_section(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    assert unverified(text, read_passages()) == []


def test_the_protocols_page_quotes_the_papers() -> None:
    """The page does quote: an empty check would pass on a page whose quotation marks were all lost."""
    text = (ROOT / "docs/protocols.md").read_text(encoding="utf-8")
    assert sum(len(quotations(u)) for u in units(text)) >= 10
