"""`generator=hf`: batched sampling with `transformers.generate` (left padding, G samples per prompt).

Returns completion token ids (EOS kept when the model stopped, padding dropped), the sampling
log-probabilities of those tokens under the processed distribution (temperature, top-p), and whether
max_new_tokens cut the completion. With greedy_first (ArenaRL's anchor), sample 0 of every group is decoded
greedily and the other n − 1 are sampled; the greedy completion's log-probs are read from the raw logits at
the sampling temperature, so the learner's importance ratio stays comparable. The model object is shared
with the learner, so weights are always in sync and load_weights is a no-op; a vLLM generator replaces this
module on GPU.

Each prompt's keys and values are computed once and repeated to its n samples (generate() would run the prompt
n times), into a static cache sized prompt + max_new_tokens (`kv_cache=static`; generate()'s own cache grows by
concatenation at every token). The tokens drawn are the same either way for the same seed.

Sampling is per row: each completion is drawn under a seed of its own (its group seed + its index,
tsrl.generation.seeds; the trainer names the group seeds, other callers let them be drawn from torch's global RNG).
generate() decodes greedily over SeededSampling, a logits processor that adds Gumbel noise from the row's own
torch.Generator to the processed logits (temperature, then top-p, as transformers computes them): the argmax is a
draw from the processed distribution, and the row's draws do not depend on the batch it is decoded in, the process,
or what was sampled before. The log-probs returned are those of the processed distribution, without the noise.

Under DeepSpeed ZeRO-3 each process holds a partition of every weight, and DeepSpeed's hooks gather each layer
before it runs and free it after: decoding T tokens gathers the whole model T times. With `gather_zero3` (the
default) the Learner gathers the whole model once around each `generate` call and switches the hooks off inside
(`whole_model`, DeepSpeed's unwrap_model_for_generation, as TRL does): one all-gather per call, but every process
then holds the whole model in its compute dtype while it decodes. gather_zero3=false keeps the per-layer path, for
a model whose whole weights do not fit beside its training state. The samples are the same either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from tsrl.errors import ConfigError
from tsrl.generation.base import Generator
from tsrl.generation.seeds import group_seeds, sample_seed
from tsrl.models.forward import innermost, keeps_logits
from tsrl.models.source import CHAT_TEMPLATE_KWARGS
from tsrl.registry import GENERATORS
from tsrl.types import Emit, Group, Prompt, Rollout


@dataclass
class HFGeneratorConfig:
    """Generator `hf`: transformers sampling on the policy's own weights."""

    SHARES_POLICY_MODULE: ClassVar[bool] = True
    """It samples with the learner's own module: no sampler/learner mismatch (algo.is_correction=auto is none)."""

    temperature: float = 1.0
    """Sampling temperature (the learner divides logits by the same value)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 48
    """Completion length cap; longer completions are cut and flagged truncated."""
    prompts_per_call: int = 16
    """Prompts per generate() call (memory bound); each brings its G samples."""
    kv_cache: str = "static"
    """static: preallocated for prompt + max_new_tokens positions (fastest here); dynamic: grown token by token
    (less memory when most completions stop early; for models whose layers a static cache does not fit)."""
    gather_zero3: bool = True
    """Under ZeRO-3: gather the whole policy once per generate call (true) or layer by layer at every token (false:
    for a model whose whole weights do not fit on one device beside its training state). Same samples."""

    def __post_init__(self) -> None:
        check_sampling(self.temperature, self.top_p)
        if self.kv_cache not in ("static", "dynamic"):
            raise ConfigError(f"generator.kv_cache={self.kv_cache!r} is unknown; use static or dynamic.")
        if self.max_new_tokens < 1 or self.prompts_per_call < 1:
            raise ConfigError(
                f"generator.max_new_tokens and generator.prompts_per_call must be >= 1, got "
                f"{self.max_new_tokens} and {self.prompts_per_call}."
            )


def check_sampling(temperature: float, top_p: float) -> None:
    """The sampling settings every generator shares: temperature > 0, top_p in (0, 1]."""
    if temperature <= 0:
        raise ConfigError(f"generator.temperature must be > 0 (sampling), got {temperature}.")
    if not 0 < top_p <= 1:
        raise ConfigError(f"generator.top_p must lie in (0, 1], got {top_p}.")


def chat_prompt(tokenizer, prompt: Prompt) -> str:
    """The prompt as the policy sees it: its conversation (or one user turn) through the chat template, with the
    template's switches the policy's tokenizer carries (model.chat_template_kwargs, e.g. enable_thinking=false:
    tsrl.models.source); without a template, the turns' text one after another."""
    turns = prompt.messages or (("user", prompt.text),)
    if tokenizer.chat_template is None:
        return "\n\n".join(content for _, content in turns)
    return tokenizer.apply_chat_template(
        [{"role": role, "content": content} for role, content in turns],
        add_generation_prompt=True,
        tokenize=False,
        **getattr(tokenizer, CHAT_TEMPLATE_KWARGS, {}),
    )


def longest_prompt_tokens(tokenizer, prompts: Sequence[Prompt]) -> int:
    """The token count of the longest of `prompts` as the policy sees it (chat template applied), 0 for none: what
    a generator's context must hold before the completion's tokens."""
    texts = [chat_prompt(tokenizer, p) for p in prompts]
    return max((len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]), default=0)


def processed_logits(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """The logits [R, V] of the distribution a completion is sampled from: divided by the temperature, then cut to
    the nucleus. transformers' TemperatureLogitsWarper then TopPLogitsWarper (min_tokens_to_keep 1), the same
    operations in the same order, so the values are those generate()'s own sampling draws from."""
    if temperature != 1.0:
        logits = logits / temperature
    if top_p < 1.0:
        ascending, order = torch.sort(logits, descending=False)  # [R, V]
        cut = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p  # the unlikely tail holding at most 1 − top_p
        cut[..., -1:] = False  # the likeliest token always stays
        logits = logits.masked_fill(cut.scatter(1, order, cut), -float("inf"))
    return logits


class SeededSampling:
    """A logits processor that makes generate()'s greedy decoding sample, each row under a seed of its own: it
    returns the processed logits plus Gumbel noise drawn from the row's own torch.Generator, and the argmax of
    logits + Gumbel noise is a draw from softmax(logits) (the Gumbel-max trick). A row's t-th token uses its
    generator's t-th draw, so what it samples depends on its seed and its logits, not on the other rows of the
    batch, the process, or torch's global RNG. It records the drawn token's log-prob under the processed
    distribution, without the noise: the sampling log-prob the update compares its own with."""

    def __init__(self, temperature: float, top_p: float, seeds: Sequence[int], device: torch.device) -> None:
        self.temperature, self.top_p = temperature, top_p
        self.generators = [torch.Generator(device=device).manual_seed(seed) for seed in seeds]
        self.logprobs: list[torch.Tensor] = []  # [R] per decoded position

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        logits = processed_logits(scores, self.temperature, self.top_p)  # [R, V]
        uniform = torch.stack(
            [torch.rand(logits.shape[1], generator=g, device=logits.device) for g in self.generators]
        )  # [R, V]
        noisy = logits - torch.log(-torch.log(uniform))  # a uniform of exactly 0 gives −inf: never drawn
        drawn = noisy.argmax(dim=-1, keepdim=True)  # [R, 1] what generate()'s greedy step picks
        self.logprobs.append(torch.log_softmax(logits, dim=-1).gather(1, drawn).squeeze(1))
        return noisy


class HFGenerator(Generator):
    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        cfg: HFGeneratorConfig,
        whole_model: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        """`whole_model`: entered around each generate call when gather_zero3 is on — the Learner's, which gathers
        a ZeRO-3 policy whole (and is a no-op for a policy held whole)."""
        self.model, self.tokenizer, self.cfg = model, tokenizer, cfg
        self.whole_model = whole_model

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Shared weights: nothing to copy."""

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[Prompt],
        n: int,
        max_new_tokens: int | None = None,
        greedy_first: bool = False,
        emit: Emit | None = None,
        seeds: Sequence[int] | None = None,
    ) -> list[Group]:
        """n completions per prompt; with greedy_first, completion 0 of each group is the greedy decode. `emit`
        gets each chunk's groups (generator.prompts_per_call prompts) as soon as they are decoded. `seeds`: each
        prompt's group seed (completion j sampled under seed + j), None = drawn from torch's global RNG."""
        seeds = group_seeds(seeds, len(prompts))
        limit, step = max_new_tokens or self.cfg.max_new_tokens, max(1, self.cfg.prompts_per_call)
        gather = self.whole_model if self.whole_model is not None and self.cfg.gather_zero3 else nullcontext
        groups: list[Group] = []
        with gather():  # collective under ZeRO-3: every process calls generate together
            for start in range(0, len(prompts), step):
                chunk = self._generate_groups(
                    prompts[start : start + step], seeds[start : start + step], n, limit, greedy_first
                )
                if emit is not None:
                    emit(list(enumerate(chunk, start=len(groups))))
                groups += chunk
        return groups

    def _generate_groups(
        self, prompts: Sequence[Prompt], seeds: list[int], n: int, limit: int, greedy_first: bool
    ) -> list[Group]:
        """One generate call's groups: n sampled completions per prompt, or with greedy_first the greedy decode as
        completion 0 and completions 1 … n − 1 sampled (each under its group seed + its index)."""
        first = int(greedy_first)
        rows = [sample_seed(seed, j) for seed in seeds for j in range(first, n)]  # [B·(n − first)], prompt-major
        sampled = self._generate_chunk(prompts, n - first, limit, rows) if n > first else []
        if not greedy_first:
            return sampled
        greedy = self._generate_chunk(prompts, 1, limit, None)
        if not sampled:
            return greedy
        return [Group(g.prompt, g.prompt_ids, g.rollouts + s.rollouts) for g, s in zip(greedy, sampled)]

    def _generate_chunk(
        self, prompts: Sequence[Prompt], n: int, max_new_tokens: int, seeds: list[int] | None
    ) -> list[Group]:
        """n completions of each prompt in one generate() call: sampled row by row under `seeds` (one per row,
        prompt-major: SeededSampling), or the greedy decode where `seeds` is None."""
        tok = self.tokenizer
        tok.padding_side = "left"
        enc = tok([chat_prompt(tok, p) for p in prompts], return_tensors="pt", padding=True, add_special_tokens=False)
        device = next(self.model.parameters()).device
        ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)  # [B, P]
        sampler = None if seeds is None else SeededSampling(self.cfg.temperature, self.cfg.top_p, seeds, device)
        was_training = self.model.training
        self.model.eval()
        out = self.model.generate(
            input_ids=ids.repeat_interleave(n, 0),
            attention_mask=mask.repeat_interleave(n, 0),
            **self._prefilled(ids, mask, n, max_new_tokens),
            do_sample=False,  # the argmax: of the logits (greedy), or of the sampler's noisy logits (a draw per row)
            logits_processor=None if sampler is None else [sampler],
            max_new_tokens=max_new_tokens,
            output_logits=sampler is None,
            return_dict_in_generate=True,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
        self.model.train(was_training)
        completions = out.sequences[:, ids.shape[1] :]  # [B*n, T']
        if sampler is not None:  # the drawn tokens' log-probs under the processed distribution, noise left out
            logprobs = torch.stack(sampler.logprobs[: completions.shape[1]], dim=1)  # [B*n, T']
        else:  # the greedy tokens' log-probs at the sampling temperature
            steps = [logits.float() / self.cfg.temperature for logits in out.logits]
            logprobs = torch.stack(
                [
                    torch.log_softmax(step, dim=-1).gather(1, completions[:, t : t + 1]).squeeze(1)
                    for t, step in enumerate(steps)
                ],
                dim=1,
            )  # [B*n, T']
        return self._groups(prompts, enc, completions, logprobs, n)

    def _groups(
        self, prompts: Sequence[Prompt], enc: Any, completions: torch.Tensor, logprobs: torch.Tensor, n: int
    ) -> list[Group]:
        """The decoded rows [B*n, T'] as one Group per prompt: each completion cut after its EOS (kept), or flagged
        truncated where max_new_tokens cut it."""
        tok = self.tokenizer
        is_eos = completions == tok.eos_token_id  # [B*n, T']
        stopped = is_eos.any(dim=1)  # [B*n]
        lengths = torch.where(
            stopped, is_eos.int().argmax(dim=1) + 1, torch.full_like(stopped, completions.shape[1], dtype=torch.long)
        )
        ids, lps = completions.tolist(), logprobs.tolist()
        texts = tok.batch_decode([row[:length] for row, length in zip(ids, lengths.tolist())], skip_special_tokens=True)
        groups = []
        for b, prompt in enumerate(prompts):
            prompt_ids = enc["input_ids"][b][enc["attention_mask"][b].bool()].tolist()
            rollouts = [
                Rollout(
                    text=texts[i].strip(),
                    token_ids=ids[i][: lengths[i]],
                    logprobs=lps[i][: lengths[i]],
                    truncated=not bool(stopped[i]),
                )
                for i in range(b * n, (b + 1) * n)
            ]
            groups.append(Group(prompt=prompt, prompt_ids=prompt_ids, rollouts=rollouts))
        return groups

    def _prefilled(self, ids: torch.Tensor, mask: torch.Tensor, n: int, max_new_tokens: int) -> dict:
        """generate()'s cache argument: the prompts [B, P] but their last token run once, repeated to B·n rows
        (generate() runs the last token itself, for the first sampling logits)."""
        P = ids.shape[1]
        if P < 2:  # nothing to run ahead
            return {"cache_implementation": "static"} if self.cfg.kv_cache == "static" else {}
        keep = {"logits_to_keep": 1} if keeps_logits(type(innermost(self.model))) else {}
        head = mask[:, :-1]
        cache = self.model(
            input_ids=ids[:, :-1],
            attention_mask=head,
            position_ids=(head.cumsum(-1) - 1).clamp_min(0),
            use_cache=True,
            **keep,
        ).past_key_values
        if self.cfg.kv_cache == "dynamic":
            cache.batch_repeat_interleave(n)
            return {"past_key_values": cache}
        from transformers import StaticCache

        static = StaticCache(config=self.model.config, max_cache_len=P + max_new_tokens)
        positions = torch.arange(P - 1, device=ids.device)
        for index, layer in enumerate(cache.layers):
            static.update(
                layer.keys.repeat_interleave(n, 0),
                layer.values.repeat_interleave(n, 0),
                index,
                {"cache_position": positions},
            )
        return {"past_key_values": static}


GENERATORS.register(
    "hf", HFGeneratorConfig, lambda cfg, model, tokenizer, prompts=(): HFGenerator(model, tokenizer, cfg)
)
