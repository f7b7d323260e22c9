"""Test and benchmark support: the model behind the loopback judge server (judge_server.py), i.e. what a chat
request is answered. Pure functions of the request: no sockets, no faults, no randomness.

Verdict rule (deterministic, so tests can check alignment): the fenced response with more words wins;
equal word counts → TIE, answered A where TIE cannot be (unconstrained after a closing instruction that does
not offer it — TSRL's binary templates — or under a constraint that does not allow it).
A pointwise question (only a RESPONSE A fence) is graded min(10, words of the
response). A list (fences R1 … Rn) scores each label min(10, words of that response).

Constrained answers, as real servers give them: `dialect` names the request fields the server obeys —
`structured_outputs` (vLLM ≥ 0.10: `structured_outputs: {choice|regex|json}`), `guided` (older vLLM: top-level
`guided_choice|guided_regex|guided_json`), `sglang` (a top-level `regex`), `response_format` (only OpenAI's
`response_format` JSON schema) or `none` (the default: nothing). All but `none` also obey `response_format`; any
other field is ignored silently, as servers do. A constrained answer always conforms. The candidates, in order:
the reasoning form (one line of reasoning, then `VERDICT: X` or `SCORE: n`; a shorter line where the first is too
long), the direct form (`X` or `n` alone), the JSON objects {"reasoning": …, "verdict": "X"} and {"verdict": "X"}
(grades: "score": n). A regex takes the first candidate it matches in full, else the regex itself if it is a
literal (a probe); a choice list the scripted value if listed, else its first choice; a JSON schema the object
with exactly the schema's properties, filled by name (reasoning, verdict, score) or, for an enum or const, with a
value it allows. Where nothing conforms there is no answer (the server turns that into an HTTP 400). With
log-probs the token that holds the value carries the alternatives over the allowed values: the first token of a
direct answer (answer 0.9, the others sharing 0.1, as after a grammar mask), the value's token in JSON, the last
token (" A") of a reasoning answer as always. Unconstrained, the model follows the template: the reasoning form,
or the direct form when the closing instruction asks for the answer and "nothing else". With `free_text` it is a
weak model instead and, unconstrained, rambles without a verdict line until max_tokens (finish_reason "length").
usage.completion_tokens is max(1, len(answer) // 4), or the request's max_tokens for a rambling answer, and
usage.prompt_tokens len(user turn) // 4; with a TokenCounter (a Hugging Face tokenizer folder) both are counted
with that tokenizer instead: the prompt as the chat template renders the messages, the answer as its tokens.

A list is answered in the same forms: the reasoning form (a line of reasoning, then `R1: n` … `Rn: n` in label
order), the direct form (the lines alone), the JSON objects {"reasoning": …, "scores": {"R1": n, …}} and
{"scores": {…}}; a regex takes the first of these it matches in full, a JSON schema is filled by name (its
`scores` object by label, so a schema that names fewer labels gets fewer scores), and a choice list cannot hold a
list (no answer: HTTP 400). `list_missing` drops the last N score lines of every unconstrained list answer.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any

FENCE = re.compile(r"\[\[RESPONSE ([AB]|R\d+) ([0-9a-f]+)\]\]\n(.*?)\n\[\[END RESPONSE \1 \2\]\]", re.DOTALL)
DIALECTS = ("structured_outputs", "guided", "sglang", "response_format", "none")
CONSTRAINTS = ("choice", "regex", "json")
VALUES = {"verdict": ("A", "B", "TIE"), "score": tuple(str(g) for g in range(11))}
LINE = {"verdict": "VERDICT", "score": "SCORE"}
REASONING = {
    "verdict": "Response A and response B were compared on the criteria.",
    "score": "The response was graded on the criteria.",
    "list": "The responses were compared with each other on the criteria.",
}
SHORT_REASONING = "Compared."  # fits the shortest reasoning line a judge allows (16 characters)
RAMBLE = "The first joke is about cats. The second joke is about a dog who wants to be a cat, and then the dog"
ASKS_DIRECT = re.compile(r"nothing else", re.IGNORECASE)
VERDICT_P = {"A": [0.9, 0.08, 0.02], "B": [0.08, 0.9, 0.02], "TIE": [0.1, 0.1, 0.8]}  # over " A", " B", " T"


def scripted_verdict(user_text: str) -> str:
    """'A' | 'B' | 'TIE' by word count of the fenced responses ('?' when fences are missing)."""
    found = {label: body for label, _, body in FENCE.findall(user_text)}
    if set(found) != {"A", "B"}:
        return "?"
    a, b = (len(found[k].split()) for k in "AB")
    return "A" if a > b else "B" if b > a else "TIE"


def scripted(user_text: str) -> tuple[str, str]:
    """('score', '0'…'10') for one fenced response (its words, at most 10); ('list', '3 10 0') for fences R1 … Rn
    (each response's words, at most 10, in label order); else ('verdict', scripted_verdict)."""
    found = {label: body for label, _, body in FENCE.findall(user_text)}
    if set(found) == {"A"}:
        return "score", str(min(10, len(found["A"].split())))
    listed = sorted((int(label[1:]), body) for label, body in found.items() if label.startswith("R"))
    if listed:
        return "list", " ".join(str(min(10, len(body.split()))) for _, body in listed)
    return "verdict", scripted_verdict(user_text)


@dataclass(frozen=True)
class Answer:
    """One answer: its text, its layout (reasoning | direct | json | plain), the scripted value it holds at
    character `at`, and the values the decoder could have put there (the log-prob alternatives)."""

    text: str
    shape: str
    value: str = ""
    allowed: tuple[str, ...] = ()
    at: int = 0
    finish: str = "stop"


def reasoning_answer(kind: str, value: str, line: str) -> Answer:
    text = f"{line}\n{LINE[kind]}: {value}"
    return Answer(text, "reasoning", value, VALUES[kind], len(text) - len(value))


def json_answer(kind: str, value: str, schema: Any) -> Answer | None:
    """The object with exactly the schema's properties (reasoning and `kind` without a schema), filled from the
    script by name, an enum or const with a value it allows; None when a property is left without a value."""
    schema = json.loads(schema) if isinstance(schema, str) else schema or {}
    properties = schema.get("properties") or {"reasoning": {}, kind: {}}
    script = {"reasoning": REASONING[kind], kind: int(value) if kind == "score" else value}
    answer = {}
    for name, prop in properties.items():
        allows = prop["enum"] if "enum" in prop else [prop["const"]] if "const" in prop else None
        filled = script.get(name)
        if allows is not None and filled not in allows:
            filled = allows[0] if allows else None
        if filled is None:
            return None
        answer[name] = filled[: prop["maxLength"]] if isinstance(filled, str) and "maxLength" in prop else filled
    if not set(schema.get("required", [])) <= set(answer):
        return None
    text = json.dumps(answer)
    if kind not in answer:
        return Answer(text, "json")
    allowed = tuple(map(str, properties[kind].get("enum", VALUES[kind])))
    at = text.index(f'"{kind}": ') + len(kind) + 4 + isinstance(answer[kind], str)
    return Answer(text, "json", str(answer[kind]), allowed, at)


def regex_answer(kind: str, value: str, pattern: str) -> Answer | None:
    """The first candidate the regex matches in full (a grammar without TIE forces a TIE to A, as a judge with
    judge.allow_tie=false must take a side), else the regex itself when it is a literal."""
    regex = re.compile(pattern)
    direct = tuple(v for v in VALUES[kind] if regex.fullmatch(v))
    for said in (value, "A") if value == "TIE" else (value,):
        candidates = [
            reasoning_answer(kind, said, REASONING[kind]),
            reasoning_answer(kind, said, SHORT_REASONING),
            Answer(said, "direct", said, direct),
            json_answer(kind, said, None),
            json_answer(kind, said, {"properties": {kind: {}}}),
        ]
        for candidate in candidates:
            if candidate is not None and regex.fullmatch(candidate.text):
                return candidate
    literal = re.sub(r"\\(.)", r"\1", pattern)  # the regex with its escapes undone: 'zqx\-probe' → 'zqx-probe'
    return Answer(literal, "plain") if regex.fullmatch(literal) else None


def list_lines(value: str, missing: int = 0) -> str:
    """The score lines of a list's scripted value ('3 10' → 'R1: 3\nR2: 10'), less the last `missing` ones."""
    scores = value.split()
    return "\n".join(f"R{i}: {score}" for i, score in enumerate(scores[: len(scores) - missing], 1))


def list_json(value: str, schema: Any) -> Answer | None:
    """The list object with exactly the schema's properties: reasoning (cut to maxLength) and scores, filled by
    label (a label the schema names but the list lacks: no answer); without a schema both, every label scored."""
    schema = json.loads(schema) if isinstance(schema, str) else schema or {}
    script = {f"R{i}": int(score) for i, score in enumerate(value.split(), 1)}
    answer: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {"reasoning": {}, "scores": {}}).items():
        if name == "reasoning":
            answer[name] = REASONING["list"][: prop.get("maxLength")]
        elif name == "scores" and "properties" not in prop:
            answer[name] = script
        elif name == "scores" and set(prop["properties"]) <= set(script):
            answer[name] = {label: script[label] for label in prop["properties"]}
        else:
            return None
    return Answer(json.dumps(answer), "json") if set(schema.get("required", [])) <= set(answer) else None


def list_answer(value: str, constraint: str, spec: Any) -> Answer | None:
    """The list answer that obeys `constraint` = `spec` (a choice list cannot hold one); None when none can."""
    if constraint == "json":
        return list_json(value, spec)
    if constraint == "choice":
        return None
    lines = list_lines(value)
    candidates = [
        Answer(f"{REASONING['list']}\n{lines}", "reasoning"),
        Answer(f"{SHORT_REASONING}\n{lines}", "reasoning"),
        Answer(lines, "direct"),
        list_json(value, None),
        list_json(value, {"properties": {"scores": {}}}),
    ]
    regex = re.compile(spec)
    return next((c for c in candidates if c is not None and regex.fullmatch(c.text)), None)


def constrained_answer(kind: str, value: str, constraint: str, spec: Any) -> Answer | None:
    """The scripted answer that obeys `constraint` (choice | regex | json) = `spec`; None when none can."""
    if kind == "list":
        return list_answer(value, constraint, spec)
    if constraint == "choice":
        choices = tuple(map(str, spec))
        pick = value if value in choices else choices[0] if choices else None
        return Answer(pick, "direct", pick, choices) if pick is not None else None
    if constraint == "regex":
        return regex_answer(kind, value, spec)
    return json_answer(kind, value, spec)


def requested_constraint(body: dict, dialect: str) -> tuple[str, Any] | None:
    """The (constraint, spec) of `body` that a `dialect` server obeys; None when it obeys none of its fields."""
    if dialect == "none":
        return None
    spelled = {
        "structured_outputs": body.get("structured_outputs") or {},
        "guided": {c: body.get(f"guided_{c}") for c in CONSTRAINTS},
        "sglang": {"regex": body.get("regex")},
    }.get(dialect, {})
    found = [(c, spelled[c]) for c in CONSTRAINTS if spelled.get(c) is not None]
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        found.append(("json", (response_format.get("json_schema") or {}).get("schema")))
    elif response_format.get("type") == "json_object":
        found.append(("json", None))
    return found[0] if found else None


def alternative(token: str, p: float) -> dict:
    return {"token": token, "logprob": math.log(p), "bytes": None}


def generated(token: str, logprob: float = 0.0, alternatives: list | None = None) -> dict:
    return {"token": token, "logprob": logprob, "bytes": None, "top_logprobs": alternatives or []}


def logprob_tokens(answer: Answer, top_n: Any) -> list[dict] | None:
    """Per-token log-probs, the alternatives at the value's first token (TIE is 'T' + 'IE'); None without a value.
    A reasoning answer keeps the shape it always had: 'VERDICT', ':', then ' A' with ' A', ' B', ' T'."""
    if answer.value not in answer.allowed:
        return None
    first = {v: "T" if v == "TIE" else v for v in answer.allowed}
    n = len(answer.allowed)
    probs = [1.0] if n == 1 else [0.9 if v == answer.value else 0.1 / (n - 1) for v in answer.allowed]
    space = " " if answer.shape == "reasoning" else ""
    if answer.shape == "reasoning" and answer.allowed == VALUES["verdict"]:
        probs = VERDICT_P[answer.value]
    alternatives = [alternative(space + first[v], p) for v, p in zip(answer.allowed, probs)]
    if isinstance(top_n, int) and 0 < top_n < len(alternatives):
        alternatives = sorted(alternatives, key=lambda alt: -alt["logprob"])[:top_n]
    if answer.shape == "reasoning":
        label = answer.text.rsplit("\n", 1)[-1].partition(":")[0]
        return [generated(label), generated(":"), generated(space + first[answer.value], -0.1, alternatives)]
    head, tail = answer.text[: answer.at], answer.text[answer.at + len(answer.value) :]
    p = probs[answer.allowed.index(answer.value)]
    tokens = [generated(head)] if head else []
    tokens.append(generated(first[answer.value], math.log(p), alternatives))
    tokens += [generated(piece) for piece in (answer.value[len(first[answer.value]) :], tail) if piece]
    return tokens


def unconstrained_answer(kind: str, value: str, user: str, free_text: bool, list_missing: int = 0) -> Answer:
    """What the model writes when nothing constrains it: rambling (free_text), the value alone when the closing
    instruction asks for nothing else, else the reasoning form (a list: less its last `list_missing` lines)."""
    if free_text:
        return Answer(RAMBLE, "plain", finish="length")
    closing = user.rsplit("[[END RESPONSE", 1)[-1]
    if kind == "list":
        lines = list_lines(value, list_missing)
        return (
            Answer(lines, "direct")
            if ASKS_DIRECT.search(closing)
            else Answer(f"{REASONING[kind]}\n{lines}", "reasoning")
        )
    if value == "TIE" and "TIE" not in closing:
        value = "A"  # a binary template asks for A or B
    if ASKS_DIRECT.search(closing):
        return Answer(value, "direct", value, VALUES[kind])
    return reasoning_answer(kind, value, REASONING[kind])


class TokenCounter:
    """Token counts by a Hugging Face tokenizer (a local folder, read once): a request's messages as its chat
    template renders them for generation, an answer's text as its own tokens."""

    def __init__(self, path: str) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)

    def prompt(self, messages: list[dict]) -> int:
        plain = [{"role": m["role"], "content": text_of(m["content"])} for m in messages]
        text = self.tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True)
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def answer(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def text_of(content: Any) -> str:
    """A message's text: the string itself, or its text parts joined (image parts are not counted)."""
    return content if isinstance(content, str) else " ".join(part.get("text", "") for part in content)


def completion_body(body: dict, user: str, answer: Answer, logprobs: bool, counter: TokenCounter | None = None) -> dict:
    """The chat-completion JSON body of `answer` to the request `body` (whose user turn is `user`); with
    per-token log-probs when `logprobs` and the request asks for them; usage counted by `counter` if given."""
    choice: dict = {
        "index": 0,
        "finish_reason": answer.finish,
        "message": {"role": "assistant", "content": answer.text},
    }
    tokens = logprob_tokens(answer, body.get("top_logprobs")) if body.get("logprobs") and logprobs else None
    if tokens:
        choice["logprobs"] = {"content": tokens}
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if answer.finish == "length" and limit:
        out = limit
    else:
        out = max(1, counter.answer(answer.text) if counter else len(answer.text) // 4)
    prompt = counter.prompt(body["messages"]) if counter else len(user) // 4
    return {
        "id": "cmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [choice],
        "usage": {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out},
    }
