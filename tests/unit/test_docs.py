"""The README stays a front page, and the links between it and the docs pages resolve.

`make docs` builds the site with `mkdocs build --strict`, which fails on a broken link inside docs/; these tests
also cover README.md and CONTRIBUTING.md (outside the site, read on their own) and run without mkdocs. An
`#anchor` into a Markdown file must name one of its headings by the slug MkDocs' default `toc` extension gives
it: the heading's text without markup, accents folded to ASCII, every character that is not a letter, digit,
underscore, hyphen or space dropped, lower-cased, runs of spaces and hyphens turned into one hyphen; a repeated
slug gets `_1`, `_2`, … GitHub's slugs differ only where a heading holds non-ASCII punctuation between spaces
(" — ") or repeated spaces, so links to such headings are worth avoiding in README.md.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250
LINKED_FILES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::([\w-]+))?"\s*$')


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def expand_snippets(path: Path) -> str:
    """The file's text with pymdownx.snippets includes (`--8<-- "FILE:section"`, FILE from the repo root)
    replaced by what they include, as the docs build sees it."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = SNIPPET.match(line.strip())
        if not match:
            out.append(line)
            continue
        included = (ROOT / match.group(1)).read_text(encoding="utf-8").splitlines()
        if match.group(2):
            start = next(i for i, s in enumerate(included) if f"--8<-- [start:{match.group(2)}]" in s)
            end = next(i for i, s in enumerate(included) if f"--8<-- [end:{match.group(2)}]" in s)
            included = included[start + 1 : end]
        out.extend(included)
    return "\n".join(out)


def slugify(heading: str) -> str:
    """MkDocs' default toc slug of a Markdown heading's text (Python-Markdown's `toc.slugify`)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def heading_slugs(path: Path) -> set[str]:
    slugs: set[str] = set()
    for line in prose_lines(expand_snippets(path)):
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug, n = slugify(match.group(1)), 0
        while (slug if n == 0 else f"{slug}_{n}") in slugs:
            n += 1
        slugs.add(slug if n == 0 else f"{slug}_{n}")
    return slugs


def relative_links(path: Path) -> list[str]:
    """Every link target in the file's prose that is not a URL (inline code spans left out)."""
    targets = []
    for line in prose_lines(path.read_text(encoding="utf-8")):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            target = match.group(1)
            if not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                targets.append(target)
    return targets


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target} (no file {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked})")
        elif anchor and linked.suffix == ".md" and anchor not in heading_slugs(linked):
            broken.append(f"{target} (no heading with slug #{anchor} in {linked.name})")
    return broken


def test_readme_is_a_front_page() -> None:
    """The guides live in docs/; the README keeps the pitch, the two commands and the way in."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES, (
        f"README.md has {len(text.splitlines())} lines, the front page's limit is {README_MAX_LINES}: "
        "move the detail to a page under docs/ and link it"
    )
    for must in ("make train", "make test", "pip wheel", "docs/getting-started.md"):
        assert must in text, f"README.md no longer mentions {must!r}"


@pytest.mark.parametrize("path", LINKED_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    assert broken_links(path) == [], f"{path.relative_to(ROOT)} has broken links"


def test_links_are_found() -> None:
    """Guards the link pattern: the README links every docs page, and the pages link each other a lot."""
    readme = {t.partition("#")[0] for t in relative_links(ROOT / "README.md")}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md") if p.name != "index.md"}
    assert pages <= readme, f"README.md does not link {sorted(pages - readme)}"
    assert sum(len(relative_links(p)) for p in LINKED_FILES) > 100


def test_a_broken_link_or_anchor_is_caught(tmp_path: Path) -> None:
    """The checker itself: a missing file, a missing anchor and a slug spelled GitHub's way all fail."""
    (tmp_path / "other.md").write_text("# Other\n\n## The judge — in detail (`judge=openai`)\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Local\n\n"
        "[ok](other.md#the-judge-in-detail-judgeopenai) [ok](other.md#twice_1) [ok](#local) "
        "[missing](nowhere.md) [bad](other.md#no-such-heading) [github](other.md#the-judge--in-detail-judgeopenai)\n\n"
        "```\n[in a fence](nowhere-either.md)\n```\n`[in code](nowhere-at-all.md)` [web](https://example.org/x.md)\n"
    )
    assert [b.split(" ")[0] for b in broken_links(page)] == [
        "nowhere.md",
        "other.md#no-such-heading",
        "other.md#the-judge--in-detail-judgeopenai",
    ]


def test_readme_config_example_composes(tmp_path: Path) -> None:
    """The README's `tsrl-train` example is a config tsrl accepts: composed and converted to the typed
    dataclasses (their range and cross-field checks run), as `tsrl-train` does before a run."""
    from tsrl.integrations.scoring import compose_run_config

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## A run, configured\n.*?```bash\n(.*?)```", text, re.S)
    assert block, "README.md has no `## A run, configured` section with a bash block"
    argv = shlex.split(block.group(1).replace("\\\n", " ").replace("$HOME", str(tmp_path)))
    assert argv[0] == "tsrl-train"
    groups = {
        key: value for key, _, value in (a.partition("=") for a in argv[1:]) if key in ("task", "judge", "reward")
    }
    overrides = [a for a in argv[1:] if a.partition("=")[0] not in groups]
    cfg = compose_run_config(
        groups.get("reward", "ladder"),
        groups.get("judge", "rubric_sim"),
        groups.get("task", "humor"),
        str(tmp_path / "run"),
        overrides,
    )
    for override in overrides:  # every value arrived where it was meant to go
        key, _, value = override.partition("=")
        if "." in key and not value.startswith("["):
            node = cfg
            for part in key.split("."):
                node = getattr(node, part)
            assert str(node) == value, f"{key}={value} composed to {node!r}"


def test_the_measured_times_of_the_two_commands_live_in_one_place() -> None:
    """The README and the pages once gave two different `make test` timings and test counts: the measured table is
    in docs/getting-started.md alone, and the other files link to it."""
    holders = [p.relative_to(ROOT) for p in LINKED_FILES if "| `make test` main stage" in p.read_text(encoding="utf-8")]
    assert holders == [Path("docs/getting-started.md")], holders
    assert "docs/getting-started.md#the-two-commands" in (ROOT / "README.md").read_text(encoding="utf-8")
