"""Readable answers from any judge model: the two answer forms and the server-side constraints that enforce them.

Forms (`judge.form`):
- `reasoning` (default): brief reasoning, then a final line `VERDICT: A|B|TIE` (a grade: `SCORE: 0-10`), as the
  shipped templates ask.
- `direct`: the verdict alone (`A`, `B` or `TIE`; a grade: the integer) and nothing else — one to three output
  tokens, the cheapest judge call there is. With log-probs the first token's alternatives give P(A) over the
  allowed choices (a soft verdict). The template's closing instruction (the text after its last response fence)
  is replaced by DIRECT_PAIRWISE / DIRECT_POINTWISE.

Where ties are not allowed (`judge.allow_tie`, off on TSRL's tasks: its verdicts are binary) every verdict form,
constraint and parser below loses TIE: `VERDICT: (A|B)`, choices A and B, the enum ["A", "B"], the direct
instruction without TIE, soft verdicts P(A) over {A, B}; an answer TIE is then unreadable.

Constraints (`judge.constrain`): ask the server to decode only answers of the form, so a weak judge model (one
that never ends with `VERDICT: A` on its own) still answers every question.
- `regex`: reasoning form `[^\\n]{1,R}\\nVERDICT: (A|B|TIE)` (one line of at most R characters, R = max_tokens − 16,
  so the verdict always fits: a token is at least one character), direct form `(A|B|TIE)`;
- `choice`: the direct form's choices (vLLM `choice`; a choice list cannot hold reasoning);
- `json`: a JSON object `{"reasoning": <at most R' chars>, "verdict": "A"|"B"|"TIE"}` (direct: `{"verdict": …}`;
  grades: `"score"`, an integer 0–10, R' = max_tokens − 48) through OpenAI's `response_format` JSON schema (vLLM,
  SGLang and hosted APIs; on vLLM its `structured_outputs` json without free whitespace, which a small model
  otherwise fills tokens with);
- `off`: nothing asked; the template alone;
- `auto` (default): the best the endpoint honours — choice (direct) or regex (reasoning) where it can, else json,
  else off with a warning.

Servers spell the same constraint differently (DIALECTS): vLLM ≥ 0.10 takes `structured_outputs: {choice|regex|
json}`, older vLLM `guided_choice|guided_regex|guided_json`, SGLang a top-level `regex`, and every one of them
(hosted APIs too) `response_format`. Servers ignore fields they do not know, so acceptance is not proof: `probe`
sends a constraint no model would meet by chance (answer exactly "zqx-probe") in each spelling and keeps the first
spelling the answer obeys. The judge probes every endpoint once, when it is built, and remembers the result.

A third kind of answer, a list (one 0–10 score per response of a list, labels R1 … Rn), has its forms,
constraints and parser in list_answers.py; `list_spec` builds its AnswerSpec per list length.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tsrl.errors import ConfigError
from tsrl.judging.base import JudgeUnreadable
from tsrl.judging.list_answers import list_max_tokens, list_regex, list_schema, parse_list
from tsrl.judging.prompting import JudgeTemplate, ParseError, parse_score, parse_verdict, verdict_value

FORMS = ("reasoning", "direct")
CONSTRAINTS = ("auto", "regex", "choice", "json", "off")
DIALECTS = ("structured_outputs", "guided", "sglang", "response_format")  # probed in this order
KINDS = ("verdict", "score")  # built once per endpoint; a list's spec depends on its length (list_spec)
VERDICTS = ("A", "B", "TIE")
GRADES = tuple(str(g) for g in range(11))
PROBE = "zqx-probe"
VERDICT_SLACK = 16  # tokens kept for "\nVERDICT: TIE" after the reasoning line (and a closing brace in JSON)
DIRECT_MAX_TOKENS = {
    "choice": 4,
    "regex": 4,
    "json": 24,
    "off": 8,
}  # "TIE" and the end; {"verdict":"TIE"}; a bit of slack

DIRECT_PAIRWISE = (
    "Answer with exactly one of A, B or TIE: A if response A is better, B if response B is better, "
    "TIE only if you truly cannot prefer either. Write nothing else."
)
DIRECT_PAIRWISE_BINARY = (
    "Answer with exactly one of A or B: A if response A is better, B if response B is better. Write nothing else."
)
DIRECT_POINTWISE = "Answer with the grade alone: one integer from 0 to 10. Write nothing else."
DIRECT_LINE = re.compile(r"^[\s*`\"'_]*(?:verdict\s*:\s*)?[*`\"'_]*\s*(a|b|tie)\s*[*`\"'_.]*\s*$", re.IGNORECASE)
GRADE_LINE = re.compile(
    r"^[\s*`\"'_]*(?:score\s*:\s*)?[*`\"'_]*\s*(\d{1,2})(?:\s*/\s*10)?\s*[*`\"'_.]*\s*$", re.IGNORECASE
)


def check_form(form: str, constrain: str) -> None:
    if form not in FORMS:
        raise ConfigError(f"judge.form={form!r} is unknown; choose one of {list(FORMS)}.")
    if constrain not in CONSTRAINTS:
        raise ConfigError(f"judge.constrain={constrain!r} is unknown; choose one of {list(CONSTRAINTS)}.")
    if constrain == "choice" and form != "direct":
        raise ConfigError(
            "judge.constrain=choice fixes the whole answer to one of the verdicts, which leaves no room "
            "for reasoning; use judge.form=direct with it, or judge.constrain=regex|json|auto."
        )


def verdicts(ties: bool = True) -> tuple[str, ...]:
    """The verdicts a judge may give: A, B and, where ties are allowed, TIE."""
    return VERDICTS if ties else VERDICTS[:2]


def direct_template(template: JudgeTemplate, ties: bool = True) -> JudgeTemplate:
    """The template with its closing instruction (after the last `$fence_*_close`) replaced by the direct one."""
    user = template.user
    cut = max(user.rfind("$fence_b_close"), user.rfind("$fence_a_close"))
    if cut < 0:
        raise ConfigError(
            f"judge.form=direct needs a template whose responses are fenced ($fence_a_close…); "
            f"{template.name} has no fence, so its closing instruction cannot be replaced."
        )
    pairwise = "$fence_b_close" in user
    end = user.index("_close", cut) + len("_close")
    instruction = (DIRECT_PAIRWISE if ties else DIRECT_PAIRWISE_BINARY) if pairwise else DIRECT_POINTWISE
    return JudgeTemplate(f"{template.name}+direct", template.system, f"{user[:end]}\n\n{instruction}", template.digest)


def reasoning_chars(max_tokens: int, json_object: bool = False) -> int:
    """The longest reasoning that leaves room for the verdict within max_tokens (a JSON object's keys and quotes
    take more room than a verdict line)."""
    return max(16, max_tokens - VERDICT_SLACK * (3 if json_object else 1))


def regex(kind: str, form: str, max_tokens: int, ties: bool = True) -> str:
    alternatives = "(" + "|".join(verdicts(ties)) + ")"
    line = f"VERDICT: {alternatives}" if kind == "verdict" else "SCORE: ([0-9]|10)"
    if form == "direct":
        return alternatives if kind == "verdict" else "([0-9]|10)"
    return f"[^\\n]{{1,{reasoning_chars(max_tokens)}}}\\n{line}"


def schema(kind: str, form: str, max_tokens: int, ties: bool = True) -> dict[str, Any]:
    answer = (
        {"verdict": {"type": "string", "enum": list(verdicts(ties))}}
        if kind == "verdict"
        else {"score": {"type": "integer", "enum": list(range(11))}}
    )
    properties = (
        answer
        if form == "direct"
        else {"reasoning": {"type": "string", "maxLength": reasoning_chars(max_tokens, json_object=True)}, **answer}
    )
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def choices(kind: str, ties: bool = True) -> list[str]:
    return list(verdicts(ties) if kind == "verdict" else GRADES)


def fields(dialect: str, constraint: str, value: Any) -> dict[str, Any]:
    """The request-body fields that ask `dialect`'s server for `constraint` (choice | regex | json) = `value`."""
    if constraint == "json" and dialect == "structured_outputs":  # vLLM: without free whitespace, which eats tokens
        return {"structured_outputs": {"json": value, "disable_any_whitespace": True}}
    if constraint == "json":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "tsrl_answer", "schema": value, "strict": True},
            }
        }
    if dialect == "structured_outputs":
        return {"structured_outputs": {constraint: value}}
    if dialect == "guided":
        return {f"guided_{constraint}": value}
    if dialect == "sglang":  # no choice list: the same alternatives as a regex
        return {"regex": value if constraint == "regex" else "(" + "|".join(map(re.escape, value)) + ")"}
    raise AssertionError(f"{dialect} cannot express {constraint}")


def resolve(constrain: str, form: str, dialect: str | None) -> str:
    """The constraint used at an endpoint: `constrain` itself, or for auto the best the dialect honours."""
    if constrain != "auto":
        return constrain
    if dialect is None:
        return "off"
    if dialect == "response_format":
        return "json"
    return "choice" if form == "direct" and dialect != "sglang" else "regex"


@dataclass(frozen=True)
class AnswerSpec:
    """How one endpoint is asked for one kind of answer: the form, the constraint and the body fields."""

    kind: str  # verdict | score | list
    form: str  # reasoning | direct
    constraint: str  # choice | regex | json | off
    body: dict[str, Any]  # the constraint's fields and max_tokens
    ties: bool = True  # a verdict may be TIE (judge.allow_tie); else an answer TIE is unreadable
    labels: int = 0  # a list's length n: its answer scores R1 … Rn

    @property
    def label(self) -> str:
        """'<form>/<constraint>', recorded with every answer (Verdict.form / Score.form)."""
        return f"{self.form}/{self.constraint}"

    def parse(self, text: str, fence: str) -> Any:
        """The value of an answer of this spec to a question fenced with `fence`: p(first wins) for a verdict, the
        grade for a score, the n scores in label order for a list; ParseError when it holds none or echoes the
        prompt (holds the fence). A constrained
        answer's last line is the grammar's, so quoting a fence in it cannot forge a verdict: only an
        unconstrained answer is checked for the fence."""
        fence = fence if self.constraint == "off" else "\0"  # "\0": a token no answer holds
        if fence in (text or ""):
            raise ParseError("echoed_prompt", "the judge's answer repeats the fenced prompt")
        if self.kind == "list":
            return parse_list(text, self.labels, self.constraint)
        if self.constraint == "json":
            return parse_json(text, self.kind, self.ties)
        if self.form == "direct":
            return parse_direct(text, self.kind, self.ties)
        return parse_verdict(text, fence, self.ties) if self.kind == "verdict" else parse_score(text, fence)


def answer_spec(
    kind: str, form: str, constraint: str, dialect: str | None, max_tokens: int, ties: bool = True
) -> AnswerSpec:
    """How to ask for one kind of answer (a verdict with or without TIE); a direct answer's max_tokens is capped
    at what it needs."""
    limit = {"max_tokens": min(max_tokens, DIRECT_MAX_TOKENS[constraint]) if form == "direct" else max_tokens}
    if constraint == "off":
        return AnswerSpec(kind, form, "off", limit, ties)
    value: Any = {
        "choice": lambda: choices(kind, ties),
        "regex": lambda: regex(kind, form, max_tokens, ties),
        "json": lambda: schema(kind, form, max_tokens, ties),
    }[constraint]()
    body = {**fields(dialect or "response_format", constraint, value), **limit}
    return AnswerSpec(kind, form, constraint, body, ties)


def list_spec(form: str, constraint: str, dialect: str | None, max_tokens: int, n: int) -> AnswerSpec:
    """How to ask for the scores of a list of n responses (list_answers.py): choice, which cannot hold a list,
    becomes the regex in the same dialect; max_tokens grows by each score line's room."""
    constraint = "regex" if constraint == "choice" else constraint
    limit = {"max_tokens": list_max_tokens(form, max_tokens, n)}
    if constraint == "off":
        return AnswerSpec("list", form, "off", limit, labels=n)
    value = (
        list_regex(form, n, reasoning_chars(max_tokens))
        if constraint == "regex"
        else list_schema(form, n, reasoning_chars(max_tokens, json_object=True))
    )
    return AnswerSpec(
        "list", form, constraint, {**fields(dialect or "response_format", constraint, value), **limit}, labels=n
    )


def parse_direct(text: str, kind: str, ties: bool = True) -> float:
    """A direct answer: the whole answer is the verdict (A/B/TIE) or the grade, give or take markdown."""
    stripped = (text or "").strip()
    if not stripped:
        raise ParseError("empty_content", "the judge returned an empty answer")
    line = DIRECT_LINE if kind == "verdict" else GRADE_LINE
    match = line.match(stripped)
    if match is None or (kind == "score" and int(match.group(1)) > 10):
        expected = ("A, B or TIE" if ties else "A or B") if kind == "verdict" else "an integer from 0 to 10"
        raise ParseError(f"unparseable_{kind}", f"a direct answer must be {expected} alone: {stripped[-80:]!r}")
    return verdict_value(match.group(1), ties, stripped) if kind == "verdict" else float(match.group(1))


def parse_json(text: str, kind: str, ties: bool = True) -> float:
    try:
        answer = json.loads(text)
        value = answer[kind]
    except (ValueError, TypeError, KeyError):
        raise ParseError(
            f"unparseable_{kind}", f"not a JSON object with a {kind!r} field: {text.strip()[-80:]!r}"
        ) from None
    if kind == "verdict" and str(value).upper() in VERDICTS:
        return verdict_value(str(value), ties, text)
    if kind == "score" and isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 10:
        return float(value)
    raise ParseError(f"unparseable_{kind}", f"the {kind} {value!r} is not one of the allowed answers")


def probe_fields(dialect: str) -> tuple[dict[str, Any], Callable[[str], bool]]:
    """A constraint in `dialect` that only a server obeying it meets, and the check of the answer."""
    if dialect == "response_format":
        value: Any = {
            "type": "object",
            "properties": {"probe": {"type": "string", "enum": [PROBE]}},
            "required": ["probe"],
            "additionalProperties": False,
        }

        def obeyed(text: str) -> bool:
            try:
                return json.loads(text) == {"probe": PROBE}
            except ValueError:
                return False

        return fields(dialect, "json", value), obeyed
    return fields(dialect, "regex", re.escape(PROBE)), lambda text: text.strip() == PROBE


def probe_order(wanted: str) -> tuple[str, ...]:
    """The dialects worth probing for `wanted` (a judge.constrain value other than off)."""
    if wanted == "json":  # vLLM's own spelling first: it can forbid the free whitespace response_format allows
        return ("structured_outputs", "response_format")
    return DIALECTS if wanted == "auto" else DIALECTS[:3]  # regex / choice: response_format cannot say them


async def probe(ask: Callable[[dict[str, Any]], Awaitable[str | None]], wanted: str) -> str | None:
    """The first dialect of probe_order(wanted) whose probe the endpoint obeys, None if none. `ask(fields)` returns
    the answer text, or None when the server refused the request (a 4xx: it does not know the field)."""
    for dialect in probe_order(wanted):
        extra, obeyed = probe_fields(dialect)
        answer = await ask(extra)
        if answer is not None and obeyed(answer):
            return dialect
    return None


PARSE_KINDS = ("unparseable_verdict", "unparseable_score", "unparseable_list", "empty_content", "echoed_prompt")
NOUNS = {"verdict": "verdict", "score": "score", "list": "list of scores"}
LINES = {
    "verdict": "a line 'VERDICT: {}'",
    "score": "a line 'SCORE: <0-10>'",
    "list": "one line 'R<i>: <0-10>' per response",
}


def advice(spec: AnswerSpec, cut: bool) -> str:
    """Why answers of `spec` were unreadable and what to do (`cut`: they all ran to max_tokens)."""
    line = LINES[spec.kind].format("|".join(verdicts(spec.ties)))
    limit = spec.body.get("max_tokens")
    if spec.constraint == "off":
        what = (
            f"end its answer with {line}" if spec.form == "reasoning" else f"answer with the {NOUNS[spec.kind]} alone"
        )
        ran = f" (these ran to judge.max_tokens={limit} without one)" if cut else ""
        return (
            f"The server is up; with judge.constrain=off the model must {what}, and this one does not{ran}. Use "
            "judge.constrain=auto (vLLM, SGLang and most hosted APIs can constrain the answer), a stronger judge "
            "model, or a template it follows (judge.template=…)."
        )
    if cut:
        return (
            f"The answers were cut off at max_tokens={limit} before the {NOUNS[spec.kind]}. Raise judge.max_tokens"
            + (", or use judge.form=direct." if spec.form == "reasoning" else ".")
        )
    return (
        f"The server was asked to constrain the answers ({spec.label}) but they do not conform, so it does "
        "not apply that constraint. Check its structured-output support, or try judge.constrain=json or off."
    )


class FormatWatch:
    """Tells a judge that answers unreadably from one that is slow or down, within the first answers of a run.

    Until one answer is readable, at most `first` requests are out at a time (`admit` waits for a slot; `settle`
    frees it when a request ends without a readable answer, e.g. a transport failure); the first readable answer
    opens the gate for good. If the first `first` answers are all unreadable, `error` is set (a JudgeUnreadable
    that says what the answers looked like and the fix) and every waiting request is turned away: the run stops
    after one round of answers instead of minutes of re-asks. first = 0 turns the watch off."""

    def __init__(self, first: int) -> None:
        self.first, self.out, self.readable = first, 0, 0
        self.unreadable: Counter[str] = Counter()
        self.cut = 0  # unreadable answers that stopped at max_tokens
        self.changed = asyncio.Event()
        self.error: JudgeUnreadable | None = None
        self.make_error = JudgeUnreadable

    def closed(self) -> bool:
        return bool(self.first) and not self.readable and self.error is None

    async def admit(self) -> tuple[bool, bool]:
        """(go on, holds a slot): wait for a slot while the gate is closed; go on = False once the run is stopped."""
        while self.closed() and self.out >= self.first:
            self.changed.clear()
            await self.changed.wait()
        held = self.closed()
        self.out += held
        return self.error is None, held

    def settle(self, held: bool) -> None:
        """A request that held a slot has ended (readable or not): its slot goes to the next one."""
        if held:
            self.out -= 1
            self.changed.set()

    def answered(self, error_kind: str | None, text: str, finished: str, where: str, spec: AnswerSpec) -> None:
        """Record one answer (error_kind None = readable); may set `error`."""
        if error_kind is None:
            self.readable += 1
            self.changed.set()
            return
        self.unreadable[error_kind] += 1
        self.cut += finished == "length"
        seen = sum(self.unreadable.values())
        if self.first and not self.readable and self.error is None and seen >= self.first:
            kinds = ", ".join(f"{kind} ×{count}" for kind, count in self.unreadable.most_common())
            sample = " ".join(text.split())[-120:]
            last = f"the last one ended {sample!r}" if sample else "the last one was empty"
            self.error = self.make_error(
                f"The judge at {where} answers, but none of its first {seen} answers held a readable "
                f"{NOUNS[spec.kind]} ({kinds}; asked as {spec.label}); {last}. " + advice(spec, self.cut == seen)
            )
            self.changed.set()
