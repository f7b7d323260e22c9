"""Test and benchmark support: a real OpenAI-compatible chat-completions server on loopback that scripts verdicts
and injects faults. Standard library only (asyncio streams; transformers only with `tokenizer`), so it runs
wherever tsrl does.

What it answers is judge_answers.py: the fenced response with more words wins (a lone response is graded by its
words, each response of a list fenced R1 … Rn is scored by its words, at most 10), and a constrained answer obeys
the constraint fields of its `dialect`, each obeyed one counted
`constrained/<choice|regex|json>`; a constraint that no answer can meet is an HTTP 400 (counted `rejected`), as
from a server that refuses it. Faults are drawn per request from a seeded RNG at `fault_rate`, uniformly over
`fault_kinds`, or taken from the `queue` of scripted faults first. Besides FAULTS, `blackhole` takes the request
and never answers (the connection stays open until the client gives up on it). With `first_unreadable`, the
first answer to each distinct pair (its two fenced texts) has no verdict line and every later one is proper.
Injected faults hit constrained answers too; `free_text` and `first_unreadable` (failings of the model) do not.
Every request and every injected fault is counted in `stats`. Each answer leaves exactly `latency` after its
request arrived. `GET /models` lists `model` (not counted as a request; with `serve_models=False` it is a 404).
With `latency_per_token_s` an answer leaves that much later per completion token (a model's decode time).
With `list_missing=N` every unconstrained list answer lacks its last N score lines (a malformed list, a failing of
the model like `free_text`). With `tokenizer=PATH` (a local Hugging Face tokenizer folder) usage.prompt_tokens and
completion_tokens are counted with that tokenizer (the prompt through its chat template) instead of characters / 4.

Run as a module for use from another process:

    python -m tsrl.testing.judge_server [--port 8000] [--model judge] [--port-file PATH] [--latency 0.05]
        [--fault-rate 0.2] [--fault-kinds blackhole] [--hang 8] [--seed 0] [--dialect structured_outputs] [--free-text]
        [--latency-per-token 0.01] [--list-missing 1] [--tokenizer PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import threading
import time
from collections import Counter
from pathlib import Path

from tsrl.testing.judge_answers import (
    DIALECTS,
    FENCE,
    Answer,
    TokenCounter,
    completion_body,
    constrained_answer,
    requested_constraint,
    scripted,
    unconstrained_answer,
)

FAULTS = ("rate_limited", "server_error", "hang", "drop", "malformed_json", "empty", "wrong_format", "echo")
TRANSPORT = {
    "rate_limited": "rate_limited",
    "server_error": "server_error",
    "hang": "timeout",
    "drop": "connection",
    "malformed_json": "malformed_response",
}  # server fault → client error kind
CONTENT = {"empty": "empty_content", "wrong_format": "unparseable_verdict", "echo": "echoed_prompt"}
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error"}


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
        list_missing: int = 0,
        tokenizer: str = "",
        port: int = 0,
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"dialect={dialect!r} is unknown; choose one of {list(DIALECTS)}.")
        self.fault_rate, self.fault_kinds, self.latency_s, self.hang_s = fault_rate, fault_kinds, latency_s, hang_s
        self.retry_after_s = retry_after_s  # what a 429 asks for (retry-after-ms and Retry-After)
        self.model, self.serve_models = model, serve_models
        self.first_unreadable, self.seen_pairs = first_unreadable, set()
        self.dialect, self.free_text = dialect, free_text
        self.latency_per_token_s = latency_per_token_s  # added to `latency` per completion token of the answer
        self.list_missing = list_missing  # score lines dropped from the end of every unconstrained list answer
        self.counter = TokenCounter(tokenizer) if tokenizer else None  # usage by this tokenizer, else chars / 4
        self.rng, self.logprobs = random.Random(seed), logprobs
        self.stats: Counter[str] = Counter()
        self.queue: list[str] = []
        self.auth_headers: list[str] = []
        self.keep_bodies, self.bodies, self.arrivals = keep_bodies, [], []
        self.connections: set[asyncio.StreamWriter] = set()
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", port, backlog=512))
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
            answer = unconstrained_answer(kind, value, user, self.free_text, self.list_missing)
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
        return 200, completion_body(body, user, answer, self.logprobs and fault is None, self.counter)

    def _unreadable_first(self, user: str) -> str | None:
        """'wrong_format' for the first answer to each distinct pair under `first_unreadable`."""
        pair = tuple(body for _, _, body in FENCE.findall(user))
        if not self.first_unreadable or pair in self.seen_pairs:
            return None
        self.seen_pairs.add(pair)
        self.stats["fault/first_unreadable"] += 1
        return "wrong_format"

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
    parser = argparse.ArgumentParser(
        prog="python -m tsrl.testing.judge_server",
        description="A loopback OpenAI-compatible judge that needs no model, GPU or key: the response with more "
        "words wins. Point judge=openai at the URL it prints to try the paid-judge path (caps, spend, faults).",
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: one the OS picks)")
    parser.add_argument("--model", default="judge", help="the model name it serves and lists (judge.model)")
    parser.add_argument("--port-file", default="", help="a file to write the URL to once the server listens")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer leaves")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="share of requests answered by a fault")
    parser.add_argument(
        "--fault-kinds",
        nargs="+",
        default=list(FAULTS),
        choices=[*FAULTS, "blackhole"],
        help="the faults drawn uniformly (blackhole: never answers)",
    )
    parser.add_argument("--hang", type=float, default=3.0, help="seconds a 'hang' fault waits before answering")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault draws")
    parser.add_argument("--stats-file", default="", help="a JSON file rewritten every 0.2 s with the counters")
    parser.add_argument("--dialect", default="none", choices=DIALECTS, help="the constraint fields obeyed")
    parser.add_argument("--free-text", action="store_true", help="unconstrained answers ramble without a verdict")
    parser.add_argument(
        "--latency-per-token",
        type=float,
        default=0.0,
        help="seconds added to --latency per completion token (models decode time)",
    )
    parser.add_argument("--list-missing", type=int, default=0, help="score lines dropped from unconstrained lists")
    parser.add_argument("--tokenizer", default="", help="a Hugging Face tokenizer folder that counts usage tokens")
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
        list_missing=args.list_missing,
        tokenizer=args.tokenizer,
        model=args.model,
        port=args.port,
    ) as server:
        if args.port_file:
            Path(args.port_file).write_text(server.url)
        print(f"serving model {args.model!r} at {server.url} (Ctrl-C stops); try:", flush=True)
        print(
            f"  tsrl-train judge=openai judge.model={args.model} 'judge.base_urls=[{server.url}]' judge.api_key_env=''"
        )
        try:
            while True:
                time.sleep(0.2)
                if args.stats_file:
                    Path(args.stats_file).write_text(json.dumps(server.stats))
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
