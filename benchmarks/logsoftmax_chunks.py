"""Throughput of the selective log-softmax (tsrl/models/logsoftmax.py) against its chunk size.

    .venv/bin/python benchmarks/logsoftmax_chunks.py [--rows 512] [--vocab 128256] [--dtype float32]

Forward + backward of token_logprobs plus the entropy on logits [1, rows, vocab], best of 5 runs per chunk size
(2^18 … 2^26 elements), and the naive float32 path for reference. Prints one line per size: seconds and
tokens/s. CHUNK_ELEMENTS is chosen where the throughput has stopped rising: a larger chunk only costs memory.
"""

from __future__ import annotations

import argparse
import time

import torch

from tsrl.models.logsoftmax import token_entropy, token_logprobs


def naive(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    z = logits.float() / temperature  # [N, T, V]
    logp = torch.log_softmax(z, -1).gather(-1, targets[..., None]).squeeze(-1)  # [N, T]
    with torch.no_grad():
        (torch.softmax(z, -1) * z).sum(-1)
    return logp


def chunked(chunk: int):
    def run(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
        token_entropy(logits, temperature, chunk)
        return token_logprobs(logits, targets, temperature, chunk)

    return run


def seconds(step, logits: torch.Tensor, targets: torch.Tensor) -> float:
    best = float("inf")
    for _ in range(5):
        logits.grad = None
        start = time.perf_counter()
        step(logits, targets, 0.9).sum().backward()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=128_256)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    logits = torch.randn(1, args.rows, args.vocab).to(getattr(torch, args.dtype)).requires_grad_()  # [1, T, V]
    targets = torch.randint(0, args.vocab, (1, args.rows))  # [1, T]
    runs = {"naive": naive} | {f"2^{k}": chunked(1 << k) for k in range(18, 27, 2)}
    for name, step in runs.items():
        s = seconds(step, logits, targets)
        print(f"{name:>6}: {s:.3f} s  {args.rows / s:,.0f} tokens/s")


if __name__ == "__main__":
    main()
