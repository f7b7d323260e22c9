"""Test and benchmark support: a real OpenAI-compatible chat-completions server on loopback that scripts verdicts
and injects faults. Standard library only (asyncio streams), so it runs wherever tsrl does.

Verdict rule (deterministic, so tests can check alignment): the fenced response with more words wins;
equal word counts → TIE. A pointwise question (only a RESPONSE A fence) is graded min(10, words of the
response). Faults are drawn per request from a seeded RNG at `fault_rate`, uniformly over `fault_kinds`, or
taken from the `queue` of scripted faults first. Besides FAULTS, `blackhole` takes the request and never
answers (the connection stays open until the client gives up on it). With `first_unreadable`, the first
answer to each distinct pair (its two fenced texts) has no verdict line and every later one is proper. Every
request and every injected fault is counted in `stats`. Each answer leaves exactly `latency` after its
request arrived. `GET /models` lists `model` (not counted as a request; with `serve_models=False` it is a 404).
With `latency_per_token_s` an answer leaves that much later per completion token (a model's decode time).

Constrained answers, as real servers give them: `dialect` names the request fields the server obeys —
`structured_outputs` (vLLM ≥ 0.10: `structured_outputs: {choice|regex|json}`), `guided` (older vLLM: top-level
`guided_choice|guided_regex|guided_json`), `sglang` (a top-level `regex`), `response_format` (only OpenAI's
`response_format` JSON schema) or `none` (the default: nothing). All but `none` also obey `response_format`; any
other field is ignored silently, as servers do, and each obeyed one counts `constrained/<choice|regex|json>`. A
constrained answer always conforms. The candidates, in order: the reasoning form (one line of reasoning, then
`VERDICT: X` or `SCORE: n`; a shorter line where the first is too long), the direct form (`X` or `n` alone), the
JSON objects {"reasoning": …, "verdict": "X"} and {"verdict": "X"} (grades: "score": n). A regex takes the first
candidate it matches in full, else the regex itself if it is a literal (a probe); a choice list the scripted
value if listed, else its first choice; a JSON schema the object with exactly the schema's properties, filled by
name (reasoning, verdict, score) or, for an enum or const, with a value it allows. Where nothing conforms the
answer is an HTTP 400 (counted `rejected`), as from a server that refuses the constraint. With log-probs the
token that holds the value carries the alternatives over the allowed values: the first token of a direct answer
(answer 0.9, the others sharing 0.1, as after a grammar mask), the value's token in JSON, the last token (" A")
of a reasoning answer as always. Unconstrained, the model follows the template: the reasoning form, or the
direct form when the closing instruction asks for the answer and "nothing else". With `free_text` it is a weak
model instead and, unconstrained, rambles without a verdict line until max_tokens (finish_reason "length").
Injected faults hit constrained answers too; `free_text` and `first_unreadable` (failings of the model) do not.
usage.completion_tokens is max(1, len(answer) // 4), or the request's max_tokens for a rambling answer.

Run as a module for use from another process:

    python -m tsrl.testing.judge_server --port-file PATH [--latency 0.05] [--fault-rate 0.2]
        [--fault-kinds blackhole] [--hang 8] [--seed 0] [--dialect structured_outputs] [--free-text]
        [--latency-per-token 0.01]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FENCE = re.compile(r"\[\[RESPONSE ([AB]) ([0-9a-f]+)\]\]\n(.*?)\n\[\[END RESPONSE \1 \2\]\]", re.DOTALL)
FAULTS = ("rate_limited", "server_error", "hang", "drop", "malformed_json", "empty", "wrong_format", "echo")
TRANSPORT = {
    "rate_limited": "rate_limited",
    "server_error": "server_error",
    "hang": "timeout",
    "drop": "connection",
    "malformed_json": "malformed_response",
}  # server fault → client error kind
CONTENT = {"empty": "empty_content", "wrong_format": "unparseable_verdict", "echo": "echoed_prompt"}
DIALECTS = ("structured_outputs", "guided", "sglang", "response_format", "none")
CONSTRAINTS = ("choice", "regex", "json")
VALUES = {"verdict": ("A", "B", "TIE"), "score": tuple(str(g) for g in range(11))}
LINE = {"verdict": "VERDICT", "score": "SCORE"}
REASONING = {
    "verdict": "Response A and response B were compared on the criteria.",
    "score": "The response was graded on the criteria.",
}
SHORT_REASONING = "Compared."  # fits the shortest reasoning line a judge allows (16 characters)
RAMBLE = "The first joke is about cats. The second joke is about a dog who wants to be a cat, and then the dog"
ASKS_DIRECT = re.compile(r"nothing else", re.IGNORECASE)
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error"}
VERDICT_P = {"A": [0.9, 0.08, 0.02], "B": [0.08, 0.9, 0.02], "TIE": [0.1, 0.1, 0.8]}  # over " A", " B", " T"


def scripted_verdict(user_text: str) -> str:
    """'A' | 'B' | 'TIE' by word count of the fenced responses ('?' when fences are missing)."""
    found = {label: body for label, _, body in FENCE.findall(user_text)}
    if set(found) != {"A", "B"}:
        return "?"
    a, b = (len(found[k].split()) for k in "AB")
    return "A" if a > b else "B" if b > a else "TIE"


def scripted(user_text: str) -> tuple[str, str]:
    """('score', '0'…'10') for one fenced response (its words, at most 10), else ('verdict', scripted_verdict)."""
    found = {label: body for label, _, body in FENCE.findall(user_text)}
    if set(found) == {"A"}:
        return "score", str(min(10, len(found["A"].split())))
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
    """The first candidate the regex matches in full, else the regex itself when it is a literal."""
    regex = re.compile(pattern)
    direct = tuple(v for v in VALUES[kind] if regex.fullmatch(v))
    candidates = [
        reasoning_answer(kind, value, REASONING[kind]),
        reasoning_answer(kind, value, SHORT_REASONING),
        Answer(value, "direct", value, direct),
        json_answer(kind, value, None),
        json_answer(kind, value, {"properties": {kind: {}}}),
    ]
    for candidate in candidates:
        if candidate is not None and regex.fullmatch(candidate.text):
            return candidate
    literal = re.sub(r"\\(.)", r"\1", pattern)  # the regex with its escapes undone: 'zqx\-probe' → 'zqx-probe'
    return Answer(literal, "plain") if regex.fullmatch(literal) else None


def constrained_answer(kind: str, value: str, constraint: str, spec: Any) -> Answer | None:
    """The scripted answer that obeys `constraint` (choice | regex | json) = `spec`; None when none can."""
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


class JudgeServer:
    """Runs on its own asyncio loop in a background thread (one coroutine per connection, so a 50 ms latency
    costs a sleep, not a thread); `stats`, `auth_headers` and `bodies` are only written from that loop.
    `keep_bodies` keeps every request body and its arrival time (time.monotonic) for tests that inspect them."""

    def __init__(
        self,
        fault_rate: float = 0.0,
        fault_kinds: tuple[str, ...] = FAULTS,
        latency_s: float = 0.0,
        hang_s: float = 3.0,
        seed: int = 0,
        logprobs: bool = True,
        keep_bodies: bool = False,
        retry_after_s: float = 0.05,
        model: str = "judge",
        serve_models: bool = True,
        first_unreadable: bool = False,
        dialect: str = "none",
        free_text: bool = False,
        latency_per_token_s: float = 0.0,
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"dialect={dialect!r} is unknown; choose one of {list(DIALECTS)}.")
        self.fault_rate, self.fault_kinds, self.latency_s, self.hang_s = fault_rate, fault_kinds, latency_s, hang_s
        self.retry_after_s = retry_after_s  # what a 429 asks for (retry-after-ms and Retry-After)
        self.model, self.serve_models = model, serve_models
        self.first_unreadable, self.seen_pairs = first_unreadable, set()
        self.dialect, self.free_text = dialect, free_text
        self.latency_per_token_s = latency_per_token_s  # added to `latency` per completion token of the answer
        self.rng, self.logprobs = random.Random(seed), logprobs
        self.stats: Counter[str] = Counter()
        self.queue: list[str] = []
        self.auth_headers: list[str] = []
        self.keep_bodies, self.bodies, self.arrivals = keep_bodies, [], []
        self.connections: set[asyncio.StreamWriter] = set()
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=512))
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> JudgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.loop.is_closed():  # stopped already (a test that takes a server down early)
            return

        async def stop() -> None:
            self.server.close()
            for writer in self.connections:  # open keep-alive connections too: the URL is dead from here on
                writer.transport.abort()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()

    def next_fault(self) -> str | None:
        self.stats["requests"] += 1
        fault = (
            self.queue.pop(0)
            if self.queue
            else (self.rng.choice(self.fault_kinds) if self.rng.random() < self.fault_rate else None)
        )
        if fault:
            self.stats[f"fault/{fault}"] += 1
        return fault

    def completion(self, body: dict, fault: str | None) -> tuple[int, dict]:
        """(HTTP status, JSON body) of the scripted answer to one request: a 400 when its constraint cannot be met."""
        user = body["messages"][-1]["content"]
        user = user if isinstance(user, str) else " ".join(p.get("text", "") for p in user)
        kind, value = scripted(user)
        constraint = requested_constraint(body, self.dialect)
        if constraint is None:
            answer = self._unconstrained(kind, value, user)
            fault = fault or self._unreadable_first(user)
        else:
            self.stats[f"constrained/{constraint[0]}"] += 1
            try:
                answer = constrained_answer(kind, value, *constraint)
            except (re.error, ValueError, TypeError, AttributeError, KeyError):  # a malformed regex or schema
                answer = None
            if answer is None:
                self.stats["rejected"] += 1
                message = f"no answer can meet the {constraint[0]} constraint {json.dumps(constraint[1])[:200]}"
                return 400, {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
        faulted = {
            "empty": "",
            "wrong_format": "I think the first one is somewhat better overall.",
            "echo": user + "\nVERDICT: A",
        }
        if fault in faulted:
            answer = Answer(faulted[fault], "plain")
        return 200, self._reply(body, user, answer, fault)

    def _unconstrained(self, kind: str, value: str, user: str) -> Answer:
        """What the model writes when nothing constrains it: rambling (free_text), the value alone when the closing
        instruction asks for nothing else, else the reasoning form."""
        if self.free_text:
            return Answer(RAMBLE, "plain", finish="length")
        if ASKS_DIRECT.search(user.rsplit("[[END RESPONSE", 1)[-1]):
            return Answer(value, "direct", value, VALUES[kind])
        return reasoning_answer(kind, value, REASONING[kind])

    def _unreadable_first(self, user: str) -> str | None:
        """'wrong_format' for the first answer to each distinct pair under `first_unreadable`."""
        pair = tuple(body for _, _, body in FENCE.findall(user))
        if not self.first_unreadable or pair in self.seen_pairs:
            return None
        self.seen_pairs.add(pair)
        self.stats["fault/first_unreadable"] += 1
        return "wrong_format"

    def _reply(self, body: dict, user: str, answer: Answer, fault: str | None) -> dict:
        choice: dict = {
            "index": 0,
            "finish_reason": answer.finish,
            "message": {"role": "assistant", "content": answer.text},
        }
        tokens = (
            logprob_tokens(answer, body.get("top_logprobs"))
            if body.get("logprobs") and self.logprobs and fault is None
            else None
        )
        if tokens:
            choice["logprobs"] = {"content": tokens}
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        out = limit if answer.finish == "length" and limit else max(1, len(answer.text) // 4)
        return {
            "id": "cmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [choice],
            "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": out, "total_tokens": len(user) // 4 + out},
        }

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One keep-alive HTTP/1.1 connection: read requests until the client closes it."""
        self.connections.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                fields = (line.partition(":") for line in lines[1:] if line)
                headers = {name.strip().lower(): value.strip() for name, _, value in fields}
                raw = await reader.readexactly(int(headers.get("content-length", 0)))
                if lines[0].startswith("GET "):
                    self._models(writer, lines[0].split(" ")[1])
                    await writer.drain()
                    continue
                body = json.loads(raw)
                due = self.loop.time() + (self.hang_s if (fault := self.next_fault()) == "hang" else self.latency_s)
                self.auth_headers.append(headers.get("authorization", ""))
                if self.keep_bodies:
                    self.bodies.append(body)
                    self.arrivals.append(time.monotonic())
                if fault == "blackhole":  # taken, never answered: the connection stays open until the client leaves
                    await reader.read()
                    return
                if fault in ("rate_limited", "server_error"):
                    status = 429 if fault == "rate_limited" else 500
                    wait = self.retry_after_s
                    extra = {"retry-after-ms": f"{wait * 1000:g}", "Retry-After": f"{wait:g}"} if status == 429 else {}
                    payload = b'{"error": {"message": "injected"}}'
                elif fault == "malformed_json":
                    status, extra, payload = 200, {}, b'{"choices": [{"message": '
                else:
                    status, reply = self.completion(body, fault)
                    extra, payload = {}, json.dumps(reply).encode()
                    due += self.latency_per_token_s * (reply.get("usage") or {}).get("completion_tokens", 0)
                await asyncio.sleep(due - self.loop.time())  # the answer is ready; it leaves at arrival + latency
                if fault == "drop":
                    writer.transport.abort()
                    return
                self._send(writer, status, payload, extra)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed the connection (or gave up on a hanging request)
        except asyncio.CancelledError:
            pass  # the server stops; ending quietly spares asyncio's streams a traceback about a cancelled handler
        finally:
            self.connections.discard(writer)
            writer.transport.abort()

    def _models(self, writer: asyncio.StreamWriter, path: str) -> None:
        self.stats["models_requests"] += 1
        if not (self.serve_models and path.rstrip("/").endswith("/models")):
            self._send(writer, 404, b'{"error": {"message": "not found"}}', {})
            return
        listed = {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "tsrl-test"}]}
        self._send(writer, 200, json.dumps(listed).encode(), {})

    @staticmethod
    def _send(writer: asyncio.StreamWriter, status: int, payload: bytes, headers: dict) -> None:
        lines = [
            f"HTTP/1.1 {status} {REASONS[status]}",
            "content-type: application/json",
            f"content-length: {len(payload)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--fault-kinds", nargs="+", default=list(FAULTS), choices=[*FAULTS, "blackhole"])
    parser.add_argument("--hang", type=float, default=3.0, help="seconds a 'hang' fault waits before answering")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stats-file", default="")
    parser.add_argument("--dialect", default="none", choices=DIALECTS, help="the constraint fields obeyed")
    parser.add_argument("--free-text", action="store_true", help="unconstrained answers ramble without a verdict")
    parser.add_argument(
        "--latency-per-token",
        type=float,
        default=0.0,
        help="seconds added to --latency per completion token (models decode time)",
    )
    args = parser.parse_args()
    with JudgeServer(
        fault_rate=args.fault_rate,
        fault_kinds=tuple(args.fault_kinds),
        latency_s=args.latency,
        hang_s=args.hang,
        seed=args.seed,
        dialect=args.dialect,
        free_text=args.free_text,
        latency_per_token_s=args.latency_per_token,
    ) as server:
        Path(args.port_file).write_text(server.url)
        try:
            while True:
                time.sleep(0.2)
                if args.stats_file:
                    Path(args.stats_file).write_text(json.dumps(server.stats))
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
