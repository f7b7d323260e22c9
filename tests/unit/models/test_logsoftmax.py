"""The selective log-softmax and the chunked entropy (tsrl/models/logsoftmax.py): the naive path's values and
gradients, and a peak memory below what the naive path needs, for a 128k vocabulary."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from tsrl.models.logsoftmax import CHUNK_ELEMENTS, token_entropy, token_logprobs


def naive_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    z = logits.float() / temperature  # [N, T, V]
    return torch.log_softmax(z, -1).gather(-1, targets[..., None]).squeeze(-1)  # [N, T]


def naive_entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    z = logits.float() / temperature  # [N, T, V]
    return -(torch.softmax(z, -1) * torch.log_softmax(z, -1)).sum(-1)  # [N, T]


def logits_and_targets(dtype: torch.dtype, N: int = 3, T: int = 13, V: int = 97) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    logits = (4 * torch.randn(N, T, V)).to(dtype).requires_grad_()  # [N, T, V], peaked rows and flat ones
    return logits, torch.randint(0, V, (N, T))  # [N, T]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk", [CHUNK_ELEMENTS, 5 * 97, 1])
def test_logprobs_and_gradients_equal_the_naive_path(dtype, chunk):
    """τ = 0.7, a masked weighted sum as the loss (rows 1 and the tail of row 2 masked out, as padding is):
    log-probs and the logits' gradient equal log_softmax(logits.float() / τ)[y], with one chunk, chunks of 5 rows
    (the last one short) and one row per chunk. The gradient comes back in the logits' dtype."""
    logits, targets = logits_and_targets(dtype)
    mask = torch.ones(targets.shape)  # [N, T]
    mask[1] = 0
    mask[2, 7:] = 0
    weights = torch.linspace(-2, 3, targets.numel()).view(targets.shape) * mask  # [N, T]
    ours = token_logprobs(logits, targets, 0.7, chunk)
    (ours * weights).sum().backward()
    grad, logits.grad = logits.grad, None
    expected = naive_logprobs(logits, targets, 0.7)
    (expected * weights).sum().backward()
    assert ours.dtype == torch.float32 and grad.dtype == dtype
    assert torch.allclose(ours, expected, atol=1e-5)
    tolerance = 1e-6 if dtype == torch.float32 else 1e-2  # bf16: the same float32 value, rounded once
    assert torch.allclose(grad.float(), logits.grad.float(), atol=tolerance)
    assert grad[1].abs().max() == 0 and grad[2, 7:].abs().max() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_entropy_equals_the_naive_path(dtype):
    logits, _ = logits_and_targets(dtype)
    for chunk in (CHUNK_ELEMENTS, 4 * 97, 1):
        ours = token_entropy(logits, 1.3, chunk)
        assert not ours.requires_grad
        assert torch.allclose(ours, naive_entropy(logits.detach(), 1.3), atol=1e-5)


def test_non_contiguous_logits_give_the_same_values():
    """Logits that are a slice of a wider output (a model without logits_to_keep) are read correctly."""
    logits, targets = logits_and_targets(torch.float32, T=20)
    part = logits[:, 3:16]  # [N, 13, V], not contiguous
    assert torch.allclose(
        token_logprobs(part, targets[:, :13], 0.9, 4 * 97), naive_logprobs(part, targets[:, :13], 0.9)
    )


def test_gradcheck_in_float64():
    torch.manual_seed(1)
    logits = torch.randn(2, 5, 7, dtype=torch.float64, requires_grad=True)  # [N, T, V]
    targets = torch.randint(0, 7, (2, 5))
    assert torch.autograd.gradcheck(lambda z: token_logprobs(z, targets, 0.8, 3 * 7), (logits,))


PEAK_SCRIPT = """
import json, sys
import torch
from tsrl.models.logsoftmax import token_logprobs, token_entropy

def naive(logits, targets, t):
    z = logits.float() / t
    logp = torch.log_softmax(z, -1).gather(-1, targets[..., None]).squeeze(-1)
    with torch.no_grad():
        (torch.softmax(z, -1) * z).sum(-1)
    return logp

def chunked(logits, targets, t):
    token_entropy(logits, t)
    return token_logprobs(logits, targets, t)

torch.set_num_threads(1)
N, T, V = 2, 256, 128_256
step = {"naive": naive, "chunked": chunked}[sys.argv[1]]
warm = torch.randn(2, 3, 5, requires_grad=True)  # load every kernel before measuring
step(warm, torch.zeros(2, 3, dtype=torch.long), 0.9).sum().backward()
logits = torch.randn(N, T, V).requires_grad_()
targets = torch.randint(0, V, (N, T))
def status(field):
    with open("/proc/self/status") as lines:
        return 1024 * int(next(line.split()[1] for line in lines if line.startswith(field)))

with open("/proc/self/clear_refs", "w") as clear:  # reset the high-water mark, which a spawned child inherits
    clear.write("5")
before = status("VmRSS:")
step(logits, targets, 0.9).sum().backward()
print(json.dumps({"peak_bytes": status("VmHWM:") - before, "logits_bytes": logits.numel() * 4}))
"""


def peaks(*kinds: str) -> list[dict[str, int]]:
    """Peak memory of forward + backward + entropy above what was live before (the logits), each in a fresh
    process (run side by side): VmHWM is the high-water mark of resident memory, reset just before the step
    (/proc/self/clear_refs; ru_maxrss would carry the pytest parent's own peak into the child spawned from it), and
    large tensors go back to the system when freed, so the delta is the step's own peak."""
    runs = [
        subprocess.Popen([sys.executable, "-c", PEAK_SCRIPT, kind], stdout=subprocess.PIPE, text=True) for kind in kinds
    ]
    outputs = [run.communicate()[0] for run in runs]
    assert all(run.returncode == 0 for run in runs)
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs]


def test_peak_memory_of_the_logprob_step_for_a_128k_vocabulary():
    """float32 logits [2, 256, 128256] (250 MiB) requiring grad. The bound is the chunked path's own: the logits'
    gradient (1× the logits, in their dtype) plus one float32 chunk (4·CHUNK_ELEMENTS bytes, 64 MiB) plus 16 MiB of
    slack for [N, T] vectors and the allocator. The naive path keeps the scaled float32 copy, log_softmax's output
    and the backward's temporaries (about four copies of the logits) and exceeds it."""
    ours, naive = peaks("chunked", "naive")
    bound = ours["logits_bytes"] + 4 * CHUNK_ELEMENTS + 16 * 2**20
    mib = {kind: f"{run['peak_bytes'] / 2**20:.0f} MiB" for kind, run in (("chunked", ours), ("naive", naive))}
    print(f"peak above the logits: {mib}, bound {bound / 2**20:.0f} MiB")
    assert ours["peak_bytes"] < bound, ours
    assert naive["peak_bytes"] > bound, naive
