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
from tsrl.models.forward import innermost, keeps_logits
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
    """The prompt as the policy sees it: its conversation (or one user turn) through the chat template; without
    a template, the turns' text one after another."""
    turns = prompt.messages or (("user", prompt.text),)
    if tokenizer.chat_template is None:
        return "\n\n".join(content for _, content in turns)
    return tokenizer.apply_chat_template(
        [{"role": role, "content": content} for role, content in turns], add_generation_prompt=True, tokenize=False
    )


def longest_prompt_tokens(tokenizer, prompts: Sequence[Prompt]) -> int:
    """The token count of the longest of `prompts` as the policy sees it (chat template applied), 0 for none: what
    a generator's context must hold before the completion's tokens."""
    texts = [chat_prompt(tokenizer, p) for p in prompts]
    return max((len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]), default=0)


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
    ) -> list[Group]:
        """n completions per prompt; with greedy_first, completion 0 of each group is the greedy decode. `emit`
        gets each chunk's groups (generator.prompts_per_call prompts) as soon as they are decoded."""
        gather = self.whole_model if self.whole_model is not None and self.cfg.gather_zero3 else nullcontext
        with gather():  # collective under ZeRO-3: every process calls generate together
            return self._generate(prompts, n, max_new_tokens or self.cfg.max_new_tokens, greedy_first, emit)

    def _generate(
        self, prompts: Sequence[Prompt], n: int, limit: int, greedy_first: bool, emit: Emit | None
    ) -> list[Group]:
        step = max(1, self.cfg.prompts_per_call)
        groups: list[Group] = []
        for start in range(0, len(prompts), step):
            chunk = prompts[start : start + step]
            sampled = self._generate_chunk(chunk, n - 1 if greedy_first else n, limit) if n > greedy_first else []
            if greedy_first:
                greedy = self._generate_chunk(chunk, 1, limit, greedy=True)
                sampled = [
                    Group(g.prompt, g.prompt_ids, g.rollouts + s.rollouts)
                    for g, s in zip(greedy, sampled or [Group(g.prompt, g.prompt_ids, []) for g in greedy])
                ]
            if emit is not None:
                emit(list(enumerate(sampled, start=len(groups))))
            groups += sampled
        return groups

    def _generate_chunk(
        self, prompts: Sequence[Prompt], n: int, max_new_tokens: int, greedy: bool = False
    ) -> list[Group]:
        tok = self.tokenizer
        tok.padding_side = "left"
        enc = tok([chat_prompt(tok, p) for p in prompts], return_tensors="pt", padding=True, add_special_tokens=False)
        was_training = self.model.training
        self.model.eval()
        sampling = (
            {"do_sample": False}
            if greedy
            else {"do_sample": True, "temperature": self.cfg.temperature, "top_p": self.cfg.top_p, "top_k": 0}
        )
        device = next(self.model.parameters()).device
        ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)  # [B, P]
        out = self.model.generate(
            input_ids=ids.repeat_interleave(n, 0),
            attention_mask=mask.repeat_interleave(n, 0),
            **self._prefilled(ids, mask, n, max_new_tokens),
            **sampling,
            max_new_tokens=max_new_tokens,
            output_scores=not greedy,
            output_logits=greedy,
            return_dict_in_generate=True,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
        self.model.train(was_training)
        width = ids.shape[1]
        completions = out.sequences[:, width:]  # [B*n, T']
        steps = [logits.float() / self.cfg.temperature for logits in out.logits] if greedy else out.scores
        logprobs = torch.stack(
            [
                torch.log_softmax(score.float(), dim=-1).gather(1, completions[:, t : t + 1]).squeeze(1)
                for t, score in enumerate(steps)
            ],
            dim=1,
        )  # [B*n, T']
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
