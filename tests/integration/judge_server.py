"""A real OpenAI-compatible chat-completions server on loopback that scripts verdicts and injects faults.

Verdict rule (deterministic, so tests can check alignment): the fenced response with more words wins;
equal word counts → TIE. Faults are drawn per request from a seeded RNG at `fault_rate`, uniformly over
`fault_kinds`, or taken from the `queue` of scripted faults first. Every request and every injected fault
is counted in `stats` (thread-safe). Run as a script for use from another process:

    python tests/integration/judge_server.py --port-file PATH [--latency 0.05] [--fault-rate 0.2]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    def __init__(self, fault_rate: float = 0.0, fault_kinds: tuple[str, ...] = FAULTS, latency_s: float = 0.0,
                 hang_s: float = 3.0, seed: int = 0, logprobs: bool = True) -> None:
        self.fault_rate, self.fault_kinds, self.latency_s, self.hang_s = fault_rate, fault_kinds, latency_s, hang_s
        self.rng, self.lock, self.logprobs = random.Random(seed), threading.Lock(), logprobs
        self.stats: Counter[str] = Counter()
        self.queue: list[str] = []
        self.auth_headers: list[str] = []
        ThreadingHTTPServer.request_queue_size = 256  # the default listen backlog of 5 stalls concurrent clients
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda *args: None  # a client killed mid-request is expected here
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "JudgeServer":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_fault(self) -> str | None:
        with self.lock:
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
        if fault == "empty":
            text = ""
        elif fault == "wrong_format":
            text = "I think the first one is somewhat better overall."
        elif fault == "echo":
            text = user + "\nVERDICT: A"
        choice: dict = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        if body.get("logprobs") and self.logprobs and verdict in ("A", "B", "TIE") and fault is None:
            p = {"A": [0.9, 0.08, 0.02], "B": [0.08, 0.9, 0.02], "TIE": [0.1, 0.1, 0.8]}[verdict]
            alts = [{"token": t, "logprob": __import__("math").log(q), "bytes": None} for t, q in zip((" A", " B", " T"), p)]
            tokens = [{"token": "VERDICT", "logprob": 0.0, "bytes": None, "top_logprobs": []},
                      {"token": ":", "logprob": 0.0, "bytes": None, "top_logprobs": []},
                      {"token": alts[("A", "B", "TIE").index(verdict)]["token"], "logprob": -0.1, "bytes": None,
                       "top_logprobs": alts}]
            choice["logprobs"] = {"content": tokens}
        return {"id": "cmpl-test", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
                "choices": [choice], "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": 12,
                                               "total_tokens": len(user) // 4 + 12}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                with server.lock:
                    server.auth_headers.append(self.headers.get("authorization", ""))
                fault = server.next_fault()
                time.sleep(server.hang_s if fault == "hang" else server.latency_s)
                if fault == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault in ("rate_limited", "server_error"):
                    status = 429 if fault == "rate_limited" else 500
                    extra = {"retry-after-ms": "50", "Retry-After": "0.05"} if status == 429 else {}
                    return self._send(status, b'{"error": {"message": "injected"}}', extra)
                payload = b'{"choices": [{"message": ' if fault == "malformed_json" else \
                    json.dumps(server.completion(body, fault)).encode()
                self._send(200, payload, {})

            def _send(self, status: int, payload: bytes, headers: dict) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (timeout) first

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--stats-file", default="")
    args = parser.parse_args()
    with JudgeServer(fault_rate=args.fault_rate, latency_s=args.latency) as server:
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
