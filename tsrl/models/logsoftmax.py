"""Token log-probabilities and entropies from logits [N, T, V] without a float32 copy of the logits.

The naive path, `log_softmax(logits.float() / τ).gather(y)`, keeps several float32 tensors the size of the
logits alive for autograd (the scaled copy, the softmax of the backward, the gradients of the gather and the
division): 20 bytes per logit measured on CPU, and at 8 × 1,024 tokens and a 128k vocabulary each float32 copy
is 3.9 GiB. Here the logits are read in chunks of rows, each upcast on
its own:

    forward   log p[n, t] = z[n, t, y] − logsumexp_v z[n, t, v],   z = logits / τ (float32, one chunk at a time)
    backward  ∂/∂logits[n, t, v] = g[n, t] · (1[v = y] − softmax(z[n, t])[v]) / τ

Autograd keeps only the logits in their own dtype (the model made them anyway), the targets and the log-normaliser
[N, T] in float32; the backward recomputes each chunk's softmax and writes the gradient straight into a tensor of
the logits' dtype. Peak memory of forward + backward: the logits, their gradient (both in the model's dtype) and
one float32 chunk of CHUNK_ELEMENTS (plus [N, T]-sized vectors). Values are those of the naive path up to float32
rounding: every chunk is computed in float32 (float64 logits stay float64).

The entropy H = logsumexp z − Σ softmax(z)·z is a metric without gradient; it is read in the same chunks.

Dimension letters: N rows (sequences), T tokens, M = N·T token rows, V vocabulary, C rows of one chunk.
"""

from __future__ import annotations

import torch

CHUNK_ELEMENTS = 1 << 24
"""Logits in one float32 working chunk (64 MiB): max(1, CHUNK_ELEMENTS // V) token rows at a time, 128 rows of a
128k vocabulary. Measured with benchmarks/logsoftmax_chunks.py (forward + backward + entropy, 256 tokens × 128,256,
best of 5, on 2 shared CPU cores, so noisy): 2^18 → 1.14 s, 2^20 → 0.74 s, 2^22 → 1.08 s, 2^24 → 0.68 s, 2^26 →
0.77 s, the float32 log_softmax path 1.23 s. Past 2^20 a larger chunk buys nothing and costs memory; 2^24 is
1/32 of the logits of 8 × 1,024 tokens × 128k in bf16, and large enough that a GPU kernel's launch is hidden (not
measured on a GPU)."""


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half-precision logits, float64 for float64 (gradcheck)."""
    return torch.promote_types(dtype, torch.float32)


def _row_chunks(M: int, V: int, chunk_elements: int) -> list[slice]:
    """Slices of M rows holding at most chunk_elements // V rows each (at least one row)."""
    rows = max(1, chunk_elements // V)
    return [slice(start, min(start + rows, M)) for start in range(0, M, rows)]


def _scaled(chunk: torch.Tensor, temperature: float) -> torch.Tensor:
    """A fresh float32 (or float64) copy of a logits chunk [C, V] divided by τ; safe to modify in place."""
    return chunk.to(_compute_dtype(chunk.dtype), copy=True).div_(temperature)  # [C, V]


class _SelectiveLogSoftmax(torch.autograd.Function):
    """log softmax(logits / τ)[targets] [M] of logits [M, V], chunked forward, recomputing backward."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx,
        logits: torch.Tensor,
        targets: torch.Tensor,
        temperature: float,
        chunk_elements: int,
    ) -> torch.Tensor:
        M, V = logits.shape
        log_norm = torch.empty(M, dtype=_compute_dtype(logits.dtype), device=logits.device)  # [M]
        picked = torch.empty_like(log_norm)  # [M]
        for rows in _row_chunks(M, V, chunk_elements):
            z = _scaled(logits[rows], temperature)  # [C, V]
            picked[rows] = z.gather(-1, targets[rows, None]).squeeze(-1)  # [C]
            top = z.amax(-1, keepdim=True)  # [C, 1]
            log_norm[rows] = z.sub_(top).exp_().sum(-1).log_() + top.squeeze(-1)  # [C]; z overwritten in place
        ctx.save_for_backward(logits, targets, log_norm)
        ctx.temperature, ctx.chunk_elements = temperature, chunk_elements
        return picked - log_norm  # [M]

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        logits, targets, log_norm = ctx.saved_tensors
        M, V = logits.shape
        grad_logits = torch.empty_like(logits, memory_format=torch.contiguous_format)  # [M, V], logits' dtype
        scale = grad.to(log_norm.dtype) / ctx.temperature  # [M]
        for rows in _row_chunks(M, V, ctx.chunk_elements):
            probs = _scaled(logits[rows], ctx.temperature).sub_(log_norm[rows, None]).exp_()  # [C, V] softmax
            probs.neg_().scatter_add_(-1, targets[rows, None], torch.ones_like(probs[:, :1]))  # onehot − softmax
            grad_logits[rows] = probs.mul_(scale[rows, None])  # [C, V], cast to the logits' dtype
        return grad_logits, None, None, None


def token_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float, chunk_elements: int = CHUNK_ELEMENTS
) -> torch.Tensor:
    """log softmax(logits / τ)[targets] [N, T] (float32) of logits [N, T, V] of any float dtype and targets [N, T];
    differentiable in the logits. Contiguous logits are read in place (others are copied once by the reshape)."""
    N, T, V = logits.shape
    flat = _SelectiveLogSoftmax.apply(
        logits.reshape(N * T, V), targets.reshape(N * T).to(logits.device), float(temperature), chunk_elements
    )  # [N·T]
    return flat.view(N, T)  # [N, T]


@torch.no_grad()
def token_entropy(logits: torch.Tensor, temperature: float, chunk_elements: int = CHUNK_ELEMENTS) -> torch.Tensor:
    """Entropy [N, T] (float32, no grad) of softmax(logits / τ) over the vocabulary, logits [N, T, V]."""
    N, T, V = logits.shape
    flat = logits.reshape(N * T, V)  # [M, V]
    entropy = torch.empty(N * T, dtype=_compute_dtype(logits.dtype), device=logits.device)  # [M]
    for rows in _row_chunks(N * T, V, chunk_elements):
        shifted = _scaled(flat[rows], temperature)  # [C, V]
        shifted.sub_(shifted.amax(-1, keepdim=True))  # s = z − max z
        weights = shifted.exp()  # [C, V], e^s
        total = weights.sum(-1)  # [C]
        entropy[rows] = total.log() - weights.mul_(shifted).sum(-1) / total  # H = log Σe^s − Σ e^s·s / Σe^s
    return entropy.view(N, T)  # [N, T]
