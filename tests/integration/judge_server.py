"""A real OpenAI-compatible chat-completions server on loopback that scripts verdicts and injects faults.

Verdict rule (deterministic, so tests can check alignment): the fenced response with more words wins;
equal word counts → TIE. Faults are drawn per request from a seeded RNG at `fault_rate`, uniformly over
`fault_kinds`, or taken from the `queue` of scripted faults first. Besides FAULTS, `blackhole` takes the
request and never answers (the connection stays open until the client gives up on it). With
`first_unreadable`, the first answer to each distinct pair (its two fenced texts) has no verdict line and
every later one is proper. Every request and every injected fault is counted in `stats`. Each answer leaves
exactly `latency` after its request arrived. `GET /models` lists `model` (not counted as a request; with
`serve_models=False` it is a 404). Run as a script for use from another process:

    python tests/integration/judge_server.py --port-file PATH [--latency 0.05] [--fault-rate 0.2]
        [--fault-kinds blackhole] [--hang 8] [--seed 0]
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
from pathlib import Path

FENCE = re.compile(r"\[\[RESPONSE ([AB]) ([0-9a-f]+)\]\]\n(.*?)\n\[\[END RESPONSE \1 \2\]\]", re.DOTALL)
FAULTS = ("rate_limited", "server_error", "hang", "drop", "malformed_json", "empty", "wrong_format", "echo")
TRANSPORT = {"rate_limited": "rate_limited", "server_error": "server_error", "hang": "timeout",
             "drop": "connection", "malformed_json": "malformed_response"}  # server fault → client error kind
CONTENT = {"empty": "empty_content", "wrong_format": "unparseable_verdict", "echo": "echoed_prompt"}


def scripted_verdict(user_text: str) -> str:
    """'A' | 'B' | 'TIE' by word count of the fenced responses ('?' when fences are missing)."""
    found = {label: body for label, _, body in FENCE.findall(user_text)}
    if set(found) != {"A", "B"}:
        return "?"
    a, b = (len(found[k].split()) for k in "AB")
    return "A" if a > b else "B" if b > a else "TIE"


class JudgeServer:
    """Runs on its own asyncio loop in a background thread (one coroutine per connection, so a 50 ms latency
    costs a sleep, not a thread); `stats`, `auth_headers` and `bodies` are only written from that loop.
    `keep_bodies` keeps every request body and its arrival time (time.monotonic) for tests that inspect them."""

    def __init__(self, fault_rate: float = 0.0, fault_kinds: tuple[str, ...] = FAULTS, latency_s: float = 0.0,
                 hang_s: float = 3.0, seed: int = 0, logprobs: bool = True, keep_bodies: bool = False,
                 retry_after_s: float = 0.05, model: str = "judge", serve_models: bool = True,
                 first_unreadable: bool = False) -> None:
        self.fault_rate, self.fault_kinds, self.latency_s, self.hang_s = fault_rate, fault_kinds, latency_s, hang_s
        self.retry_after_s = retry_after_s  # what a 429 asks for (retry-after-ms and Retry-After)
        self.model, self.serve_models = model, serve_models
        self.first_unreadable, self.seen_pairs = first_unreadable, set()
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

    def __enter__(self) -> "JudgeServer":
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
        fault = self.queue.pop(0) if self.queue else (
            self.rng.choice(self.fault_kinds) if self.rng.random() < self.fault_rate else None)
        if fault:
            self.stats[f"fault/{fault}"] += 1
        return fault

    def completion(self, body: dict, fault: str | None) -> dict:
        messages = body["messages"]
        user = messages[-1]["content"]
        user = user if isinstance(user, str) else " ".join(p.get("text", "") for p in user)
        verdict = scripted_verdict(user)
        text = f"Response A and response B were compared on the criteria.\nVERDICT: {verdict}"
        if self.first_unreadable and fault is None:
            pair = tuple(body for _, _, body in FENCE.findall(user))
            if pair not in self.seen_pairs:
                self.seen_pairs.add(pair)
                self.stats["fault/first_unreadable"] += 1
                fault = "wrong_format"
        if fault == "empty":
            text = ""
        elif fault == "wrong_format":
            text = "I think the first one is somewhat better overall."
        elif fault == "echo":
            text = user + "\nVERDICT: A"
        choice: dict = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        if body.get("logprobs") and self.logprobs and verdict in ("A", "B", "TIE") and fault is None:
            p = {"A": [0.9, 0.08, 0.02], "B": [0.08, 0.9, 0.02], "TIE": [0.1, 0.1, 0.8]}[verdict]
            alts = [{"token": t, "logprob": math.log(q), "bytes": None} for t, q in zip((" A", " B", " T"), p)]
            tokens = [{"token": "VERDICT", "logprob": 0.0, "bytes": None, "top_logprobs": []},
                      {"token": ":", "logprob": 0.0, "bytes": None, "top_logprobs": []},
                      {"token": alts[("A", "B", "TIE").index(verdict)]["token"], "logprob": -0.1, "bytes": None,
                       "top_logprobs": alts}]
            choice["logprobs"] = {"content": tokens}
        return {"id": "cmpl-test", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
                "choices": [choice], "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": 12,
                                               "total_tokens": len(user) // 4 + 12}}

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
                else:
                    status, extra = 200, {}
                    payload = b'{"choices": [{"message": ' if fault == "malformed_json" else \
                        json.dumps(self.completion(body, fault)).encode()
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
        reason = {200: "OK", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error"}[status]
        lines = [f"HTTP/1.1 {status} {reason}", "content-type: application/json", f"content-length: {len(payload)}",
                 *(f"{name}: {value}" for name, value in headers.items())]
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
    args = parser.parse_args()
    with JudgeServer(fault_rate=args.fault_rate, fault_kinds=tuple(args.fault_kinds), latency_s=args.latency,
                     hang_s=args.hang, seed=args.seed) as server:
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
