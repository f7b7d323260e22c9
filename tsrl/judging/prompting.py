"""Judge prompts: versioned rubric templates, fencing of untrusted responses, strict verdict parsing.

Templates are files in tsrl/judging/prompts/ named `<task>_<kind>_v<N>.txt`, kind pairwise (a verdict),
pointwise (a 0–10 grade) or listwise (a 0–10 score for each response of a list), or a path to your own file. A
file holds a system part and a user part separated by a line `---user---`; `$prompt`, `$criteria`,
`$response_a/b` and `$fence_a/b_open/close` are substituted in one pass, so text inside a response is never
expanded again. A listwise template takes `$responses` instead (render_list: the fenced list, each response
between `[[RESPONSE R<i> <token>]]` and `[[END RESPONSE R<i> <token>]]`), `$count`, `$labels` ("R1, R2, R3") and
`$score_lines` (one `R<i>: <score>` line per label, the lines the answer ends with).

A task's criteria live in one file, prompts/<task>_criteria_v<N>.txt, which each of its templates includes with
a line `{{<task>_criteria_v<N>}}` (expanded when the template is loaded): the pairwise verdict, the pointwise
grade and the listwise scores of a task are judged against the same words and cannot drift apart. The generic
templates take `$criteria` instead (a prompt's `fields["rubric"]`, else GENERIC_CRITERIA). The template's
identity for caching is its name plus a hash of its text with the criteria included, so editing a criteria file
changes the key too.

Why the answer cannot be forged by a response:
- every request gets a fresh random fence token; each response sits between `[[RESPONSE A <token>]]` and
  `[[END RESPONSE A <token>]]` lines, so a response cannot close its fence or open another one;
- the verdict is read only from the *last non-empty line* of the judge's answer, which must be exactly
  `VERDICT: A`, `VERDICT: B` or, where ties are allowed, `VERDICT: TIE` (case and surrounding markdown
  `*`/backticks tolerated);
- an answer that contains the fence token is an echo of the prompt (it may end with a response's forged
  verdict line) and is rejected as `echoed_prompt`;
- a list's score lines are likewise read only from the end of the answer (list_answers.py).

Binary verdicts: TSRL's judge "returns a binary verdict" (§2.1), so on its tasks (BINARY_TASKS) a pairwise
template asks for A or B and nothing else; TIE is an option (`judge.allow_tie=true`, the default on every other
task). A shipped pairwise template marks the tie option's text with `{{tie_sentence}}` (the sentence allowing a
TIE) and `{{tie_line}}` (the `VERDICT: TIE` line), expanded when the template is loaded: with ties the text is
what it always was, without them both marks vanish, and the template's hash (its cache identity) differs. An
answer TIE where ties are not allowed is unreadable (re-asked, then the failure policy, `judge.failure`).

A vision judge (`judge.vision`) also sees each response's rendering: `with_images` appends them to the user turn
as image parts, after the text, each introduced by its response's label (A, B, or R<i> in a list).
"""

from __future__ import annotations

import base64
import hashlib
import math
import mimetypes
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from tsrl.errors import ConfigError

PROMPTS_DIR = Path(__file__).parent / "prompts"
INCLUDE = re.compile(r"\{\{(\w+_criteria_v\d+)\}\}")  # {{humor_criteria_v1}}: prompts/humor_criteria_v1.txt
GENERIC_CRITERIA = (
    "1. Does what the request asks, completely and correctly.\n"
    "2. Helpful and specific rather than vague.\n3. Clear, well organised and concise."
)
VERDICT_LINE = re.compile(r"^[\s*`_#>]*verdict\s*:\s*[*`_]*\s*(a|b|tie)\s*[*`_.]*\s*$", re.IGNORECASE)
SCORE_LINE = re.compile(r"^[\s*`_#>]*score\s*:\s*[*`_]*\s*(\d{1,2})(?:\s*/\s*10)?\s*[*`_.]*\s*$", re.IGNORECASE)
VERDICT_P = {"a": 1.0, "b": 0.0, "tie": 0.5}
BINARY_TASKS = frozenset({"stories", "humor", "web", "counseling"})
"""TSRL's tasks, whose judge returns a binary verdict (§2.1): no TIE unless judge.allow_tie=true."""
TIE_MARKS = {
    "{{tie_sentence}}": "Answer TIE only if you truly cannot prefer either. ",
    "{{tie_line}}": "\nVERDICT: TIE",
}
"""A shipped template's tie marks and their text where ties are allowed (removed where they are not)."""


class ParseError(ValueError):
    """The judge's answer holds no valid final verdict; `kind` is the error kind counted in metrics."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class JudgeTemplate:
    """A loaded template: name (the version, e.g. humor_pairwise_v1), system and user parts, content hash."""

    name: str
    system: str
    user: str
    digest: str

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.digest}"


def resolve_template(spec: str, task_name: str, kind: str = "pairwise") -> Path:
    """`auto` → `<task>_<kind>_v1` if shipped, else `generic_<kind>_v1` (kind: pairwise | pointwise | listwise);
    a bare name → prompts/<name>.txt; anything else is a file path."""
    if spec == "auto":
        own = PROMPTS_DIR / f"{task_name}_{kind}_v1.txt"
        return own if own.is_file() else PROMPTS_DIR / f"generic_{kind}_v1.txt"
    path = PROMPTS_DIR / f"{spec}.txt" if "/" not in spec and not spec.endswith(".txt") else Path(spec).expanduser()
    if not path.is_file():
        shipped = sorted(p.stem for p in PROMPTS_DIR.glob("*.txt") if "_criteria_" not in p.stem)
        raise ConfigError(f"Judge template {spec!r} not found ({path}); use one of {shipped} or a path to a .txt file.")
    return path


def criteria_text(name: str) -> str:
    """The criteria file prompts/<name>.txt, stripped; a ConfigError naming the shipped ones if absent."""
    path = PROMPTS_DIR / f"{name}.txt"
    if not path.is_file():
        shipped = sorted(p.stem for p in PROMPTS_DIR.glob("*_criteria_v*.txt"))
        raise ConfigError(
            f"A judge template includes {{{{{name}}}}}, but {path} does not exist; "
            f"include one of {shipped} or write the criteria into the template."
        )
    return path.read_text(encoding="utf-8").strip()


def included_criteria(path: Path) -> list[str]:
    """The names of the criteria files a template includes, in order."""
    return INCLUDE.findall(path.read_text(encoding="utf-8"))


def ties_allowed(allow_tie: bool | None, task_name: str) -> bool:
    """judge.allow_tie, or where it is unset (None) the task's own: no ties on TSRL's tasks (BINARY_TASKS)."""
    return allow_tie if allow_tie is not None else task_name not in BINARY_TASKS


def load_template(path: Path, ties: bool = True) -> JudgeTemplate:
    """The template at `path` with its criteria included and its tie marks expanded (`ties`) or removed; a
    template without ties hashes apart from the same file with them, marks or not (its answers differ)."""
    # a `$` in criteria is text, not a placeholder: escaped before the template's own substitution
    text = INCLUDE.sub(lambda m: criteria_text(m.group(1)).replace("$", "$$"), path.read_text(encoding="utf-8"))
    for mark, tie_text in TIE_MARKS.items():
        text = text.replace(mark, tie_text if ties else "")
    if "\n---user---\n" not in text:
        raise ConfigError(f"Judge template {path} lacks the '---user---' line that separates system and user parts.")
    system, user = text.split("\n---user---\n", 1)
    digest = hashlib.sha256((text if ties else text + "\0binary").encode()).hexdigest()[:12]
    return JudgeTemplate(path.stem, system.strip(), user.strip(), digest)


def new_fence() -> str:
    return secrets.token_hex(8)


def render(
    template: JudgeTemplate, prompt_text: str, criteria: str, responses: tuple[str, ...], fence: str
) -> list[dict[str, str]]:
    """Chat messages for one question; responses are (A, B) for pairwise or (A,) for pointwise."""
    values = {"prompt": prompt_text, "criteria": criteria or GENERIC_CRITERIA}
    for label, text in zip("ab", (*responses, "", "")[:2]):
        values[f"response_{label}"] = text.strip("\n")
        values[f"fence_{label}_open"] = f"[[RESPONSE {label.upper()} {fence}]]"
        values[f"fence_{label}_close"] = f"[[END RESPONSE {label.upper()} {fence}]]"
    user = Template(template.user).safe_substitute(values)
    return [{"role": "system", "content": template.system}, {"role": "user", "content": user}]


def list_labels(n: int) -> list[str]:
    """The labels of a list of n responses: R1 … Rn (slot i shows responses[i-1])."""
    return [f"R{i}" for i in range(1, n + 1)]


def render_list(
    template: JudgeTemplate, prompt_text: str, criteria: str, responses: tuple[str, ...], fence: str
) -> list[dict[str, str]]:
    """Chat messages for one list question: responses[i-1] fenced under the label Ri, in the order given."""
    labels = list_labels(len(responses))
    fenced = (
        f"[[RESPONSE {label} {fence}]]\n{text.strip(chr(10))}\n[[END RESPONSE {label} {fence}]]"
        for label, text in zip(labels, responses)
    )
    values = {
        "prompt": prompt_text,
        "criteria": criteria or GENERIC_CRITERIA,
        "responses": "\n\n".join(fenced),
        "count": str(len(responses)),
        "labels": ", ".join(labels),
        "score_lines": "\n".join(f"{label}: <score>" for label in labels),
    }
    user = Template(template.user).safe_substitute(values)
    return [{"role": "system", "content": template.system}, {"role": "user", "content": user}]


def image_part(source: str) -> dict[str, Any]:
    """A chat image part: a data: URL as it is, a file path read and base64-encoded (MIME type from its name)."""
    if not source.startswith("data:"):
        mime = mimetypes.guess_type(source)[0] or "image/png"
        source = f"data:{mime};base64,{base64.b64encode(Path(source).read_bytes()).decode()}"
    return {"type": "image_url", "image_url": {"url": source}}


def with_images(messages: list[dict[str, Any]], images: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
    """`render`'s (or `render_list`'s) messages with each response's rendering, (label, file path or data: URL or
    None), as an image part after the text of the user turn, introduced by its label (A, B, R1…); unchanged when
    no response has one."""
    shown = [(label, src) for label, src in images if src]
    if shown:
        parts: list[dict[str, Any]] = [{"type": "text", "text": messages[1]["content"]}]
        for label, src in shown:
            parts += [{"type": "text", "text": f"Rendering of response {label}:"}, image_part(src)]
        messages[1] = {"role": "user", "content": parts}
    return messages


def final_line(answer: str, fence: str) -> str:
    if not answer or not answer.strip():
        raise ParseError("empty_content", "the judge returned an empty answer")
    if fence in answer:
        raise ParseError("echoed_prompt", "the judge's answer repeats the fenced prompt")
    return answer.strip().splitlines()[-1]


def verdict_value(word: str, ties: bool, answer: str) -> float:
    """A → 1, B → 0, TIE → ½ where ties are allowed; a TIE where they are not raises ParseError (unreadable)."""
    if word.lower() == "tie" and not ties:
        raise ParseError(
            "unparseable_verdict", f"TIE is not an allowed verdict (judge.allow_tie=false): {answer.strip()[-80:]!r}"
        )
    return VERDICT_P[word.lower()]


def parse_verdict(answer: str, fence: str, ties: bool = True) -> float:
    """p(first wins) from the judge's own final line: A → 1, B → 0, TIE → ½ (only where `ties`); anything else
    raises ParseError."""
    match = VERDICT_LINE.match(final_line(answer, fence))
    if match is None:
        allowed = "A|B|TIE" if ties else "A|B"
        raise ParseError("unparseable_verdict", f"last line is not 'VERDICT: {allowed}': {answer.strip()[-80:]!r}")
    return verdict_value(match.group(1), ties, answer)


def parse_score(answer: str, fence: str) -> float:
    match = SCORE_LINE.match(final_line(answer, fence))
    if match is None or int(match.group(1)) > 10:
        raise ParseError("unparseable_score", f"last line is not 'SCORE: 0-10': {answer.strip()[-80:]!r}")
    return float(match.group(1))


def soft_verdict(top_logprobs: list[dict[str, float]], ties: bool = True) -> float | None:
    """P(A) + ½P(TIE), renormalised over {A, B, TIE} (without `ties`: P(A) over {A, B}), from the top log-probs
    at the verdict token.

    `top_logprobs` holds one {token: logprob} dict per generated token; the verdict token is the last one
    whose alternatives include both an A-like and a B-like token. None when no such position exists."""
    for alternatives in reversed(top_logprobs):
        mass = {"a": 0.0, "b": 0.0, "tie": 0.0}
        for token, logprob in alternatives.items():
            key = token.strip(" *`_:\"'{}").lower()
            if key in ("t", "ti"):
                key = "tie"  # tokenisers often split TIE; its first piece stands for it
            if key in mass:
                mass[key] += math.exp(logprob)
        if mass["a"] > 0 and mass["b"] > 0:
            mass["tie"] *= ties
            total = sum(mass.values())
            return (mass["a"] + 0.5 * mass["tie"]) / total
    return None
