"""Listwise answers: one judge call scores every response of a list, on the 0–10 rubric scale.

The list is shown in the caller's order under the labels R1 … Rn (slot i = responses[i-1], see
prompting.render_list); the answer holds one integer score per label. Nothing here reorders a list.

Forms (`judge.form`):
- `reasoning`: brief reasoning, then one line per label in label order, `R1: 7` … `Rn: 3`, as the listwise
  templates (prompts/<task>_listwise_v1.txt) ask;
- `direct`: the score lines alone — the template's closing instruction (the text after `$responses`) is replaced
  by DIRECT_LIST.

Constraints (`judge.constrain`), built per list length n, since the regex and the schema name every label:
- `regex`: reasoning form `[^\\n]{1,R}\\nR1: ([0-9]|10)\\nR2: ([0-9]|10)…` (R = judge.max_tokens − 16 characters,
  as for a verdict), direct form the lines alone;
- `choice`: a choice list cannot hold a list, so an endpoint whose constraint is choice is asked the regex of the
  direct form instead, in the same dialect;
- `json`: a closed schema {"reasoning": <at most R' = judge.max_tokens − 48 chars>, "scores": {"R1": 0–10, …}}
  whose `scores` object has exactly the n labels, all required, no other (direct form: `scores` alone);
- `off`: the template alone.

max_tokens of a list request: judge.max_tokens + 6·n for the reasoning form, 8 + 6·n for the direct form (the
room of each score line, `R12: 10` with its newline, JSON's quotes and comma included).

Reading an answer: the score lines are read only from the end of the answer — the trailing run of lines
`R<i>: <n>` (markdown and a "/10" tolerated; under the regex exactly the last n lines, which the grammar put
there) — so a response that quotes forged score lines cannot change the parse; an unconstrained answer that holds
the fence is an echo (constrain.AnswerSpec.parse). An answer that does
not score every label, scores a label twice, scores a label the list does not have or gives a score outside 0–10
is unreadable: ParseError `unparseable_list`, whose sentence names the labels, e.g. "the answer scores R1, R2 but
not R3, R4". It is asked again like any unreadable answer, then the failure policy applies.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tsrl.errors import ConfigError
from tsrl.judging.prompting import JudgeTemplate, ParseError, list_labels

LINE_TOKENS = 6  # max_tokens per score line: "R12: 10\n" (or `"R12": 10,` in JSON) is at most 6 tokens
DIRECT_LIST_SLACK = 8  # the direct form's room beyond its lines: JSON's braces and key, the end of the answer
DIRECT_LIST = (
    "Answer with the scores alone: exactly one line per response, in label order, each an integer from 0 to 10. "
    "Write nothing else:\n$score_lines"
)
LIST_LINE = re.compile(
    r"^[\s*`_#>-]*r(\d{1,3})[*`_]*\s*:\s*[*`_]*\s*(\d{1,3})(?:\s*/\s*10)?\s*[*`_.]*\s*$", re.IGNORECASE
)
GRADE = "([0-9]|10)"


def direct_list_template(template: JudgeTemplate) -> JudgeTemplate:
    """The list template with its closing instruction (after `$responses`) replaced by DIRECT_LIST."""
    cut = template.user.rfind("$responses")
    if cut < 0:
        raise ConfigError(
            f"judge.form=direct needs a listwise template that shows the responses with $responses; "
            f"{template.name} has none, so its closing instruction cannot be replaced."
        )
    user = f"{template.user[: cut + len('$responses')]}\n\n{DIRECT_LIST}"
    return JudgeTemplate(f"{template.name}+direct", template.system, user, template.digest)


def list_max_tokens(form: str, max_tokens: int, n: int) -> int:
    """A list request's max_tokens: judge.max_tokens + 6·n (reasoning), 8 + 6·n (direct)."""
    return (max_tokens if form == "reasoning" else DIRECT_LIST_SLACK) + LINE_TOKENS * n


def list_regex(form: str, n: int, chars: int) -> str:
    """The score lines R1 … Rn in order, after one line of at most `chars` characters for the reasoning form."""
    lines = "\\n".join(f"{label}: {GRADE}" for label in list_labels(n))
    return lines if form == "direct" else f"[^\\n]{{1,{chars}}}\\n{lines}"


def list_schema(form: str, n: int, chars: int) -> dict[str, Any]:
    """The closed JSON schema of a list answer: `scores` with exactly the labels R1 … Rn (integers 0–10), after a
    reasoning string of at most `chars` characters for the reasoning form."""
    labels = list_labels(n)
    scores = {
        "type": "object",
        "properties": {label: {"type": "integer", "enum": list(range(11))} for label in labels},
        "required": labels,
        "additionalProperties": False,
    }
    properties: dict[str, Any] = {"scores": scores}
    if form == "reasoning":
        properties = {"reasoning": {"type": "string", "maxLength": chars}, **properties}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def parse_list(text: str, n: int, constraint: str = "off") -> list[float]:
    """The scores of labels R1 … Rn, in label order, from a JSON answer (constraint json) or from the answer's
    trailing score lines: under the regex its last n lines (the grammar put them there, so a reasoning line that
    looks like a score line is not read), else the whole trailing run. ParseError (empty_content |
    unparseable_list) when the answer does not score exactly the n labels."""
    if not (text or "").strip():
        raise ParseError("empty_content", "the judge returned an empty answer")
    if constraint == "json":
        return checked_scores(json_scores(text), n, text)
    return checked_scores(trailing_scores(text, n if constraint == "regex" else None), n, text)


def trailing_scores(text: str, most: int | None = None) -> list[tuple[str, Any]]:
    """(label, score) of the run of score lines at the end of the answer (at most `most` of them), as written."""
    found: list[tuple[str, Any]] = []
    for line in reversed([line for line in text.strip().splitlines() if line.strip()]):
        match = LIST_LINE.match(line)
        if match is None or len(found) == most:
            break
        found.append((f"R{int(match.group(1))}", int(match.group(2))))
    return found[::-1]


def json_scores(text: str) -> list[tuple[str, Any]]:
    """(label, score) of a JSON answer's `scores` object."""
    try:
        scores = json.loads(text)["scores"]
        return list(scores.items())
    except (ValueError, TypeError, KeyError, AttributeError):
        raise ParseError(
            "unparseable_list", f"not a JSON object with a 'scores' object: {text.strip()[-80:]!r}"
        ) from None


def checked_scores(found: list[tuple[str, Any]], n: int, text: str) -> list[float]:
    """The scores in label order, once every label R1 … Rn is scored exactly once with an integer 0–10."""
    labels, said = list_labels(n), [label for label, _ in found]
    unknown = [label for label in said if label not in labels]
    if unknown:
        raise ParseError("unparseable_list", f"the answer scores {', '.join(unknown)}, which a list of {n} lacks")
    repeated = [label for label in labels if said.count(label) > 1]
    if repeated:
        raise ParseError("unparseable_list", f"the answer scores {', '.join(repeated)} more than once")
    missing = [label for label in labels if label not in said]
    if missing and said:
        raise ParseError("unparseable_list", f"the answer scores {', '.join(said)} but not {', '.join(missing)}")
    if missing:
        raise ParseError(
            "unparseable_list",
            f"the answer scores none of {', '.join(labels)}: it does not end with their score lines "
            f"({text.strip()[-80:]!r})",
        )
    scores = dict(found)
    wrong = [f"{label}: {scores[label]!r}" for label in labels if not is_grade(scores[label])]
    if wrong:
        raise ParseError("unparseable_list", f"the scores {', '.join(wrong)} are not integers from 0 to 10")
    return [float(scores[label]) for label in labels]


def is_grade(score: Any) -> bool:
    return isinstance(score, int) and not isinstance(score, bool) and 0 <= score <= 10
