"""`model=tiny`: a few-million-parameter Llama built from config, with a byte-level BPE tokenizer trained
locally on the task's own text, and a short supervised warm start. Built once, cached on disk.

The warm start is sized by the tokens it computes on, not by steps: a budget of padded tokens
(`warmstart_tokens`) spent in batches of at most `warmstart_batch_tokens`, so a task of 500-token web pages
builds in about the time of a task of 40-token jokes, and a first run of any task reaches its first RL step
within a few minutes on 2 CPU cores.

The warm start teaches the format, not the preference: it fits the training prompts' anchors of *every*
tier equally (top to low), plus copies in which the two required words are swapped for other common
nouns so that the model learns to copy words from the prompt. The warm-started policy
therefore writes a mix of good and bad jokes, and RL has a real preference to learn. Held-out prompts and
their anchors are never trained on; the substitution vocabulary is a shipped list of common nouns (see the
task), which stands in for the general vocabulary any pretrained policy has.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from tsrl.errors import ConfigError
from tsrl.models.lora import LoraSettings
from tsrl.models.source import PolicySource
from tsrl.progress import PROGRESS_EVERY_S, duration
from tsrl.registry import MODELS
from tsrl.tasks import Task
from tsrl.types import Prompt

SPECIAL_TOKENS = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
log = logging.getLogger("tsrl")

BUILD_VERSION = "2"  # bump when the build recipe changes, so cached models are rebuilt


@dataclass
class TinyModelConfig:
    """Model `tiny`: small Llama + locally trained tokenizer, warm-started on the task's anchors."""

    vocab_size: int = 2048
    """BPE vocabulary size."""
    hidden_size: int = 128
    """Transformer width."""
    num_layers: int = 4
    """Transformer blocks."""
    num_heads: int = 4
    """Attention heads."""
    warmstart_steps: int = 1500
    """Most supervised steps on the training anchors before RL (0 = random init); the token budget below ends the
    warm start sooner."""
    warmstart_tokens: int = 1_500_000
    """Token budget of the warm start, counted as a padded batch costs (examples × the longest one): it stops after
    the batch that spends it, so a task of long answers (stories, web pages) warm-starts in about the time of a
    short one; 0 = no budget (exactly warmstart_steps batches)."""
    warmstart_batch_tokens: int = 2560
    """A warm-start batch holds as many examples as fit in this many padded tokens (at least one), so batches of
    long answers hold fewer examples; 0 = 32 examples a batch whatever their length."""
    warmstart_lr: float = 3e-3
    """Peak learning rate of the warm start."""
    copy_prob: float = 0.9
    """Share of warm-start examples whose two words are swapped for random common nouns."""
    cache_dir: str = "~/.cache/tsrl/models"
    """Where built models are stored and looked up."""
    seed: int = 0
    """Seed of initialisation and warm start."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    """Train a LoRA adapter instead of every weight (model.lora.r > 0)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward instead of keeping them (transformers'
    gradient_checkpointing_enable, non-reentrant): ~one more forward of compute for activation memory."""

    def __post_init__(self) -> None:
        if min(self.warmstart_steps, self.warmstart_tokens, self.warmstart_batch_tokens) < 0:
            raise ConfigError(
                "model.warmstart_steps, model.warmstart_tokens and model.warmstart_batch_tokens must be >= 0 (0 = "
                f"none / no budget / 32 examples a batch); got {self.warmstart_steps}, {self.warmstart_tokens} "
                f"and {self.warmstart_batch_tokens}."
            )


def _fingerprint(cfg: TinyModelConfig, task: Task) -> str:
    # the adapter and checkpointing are applied after loading: they do not change the built folder
    build = {k: v for k, v in asdict(cfg).items() if k not in ("lora", "gradient_checkpointing")}
    digest = hashlib.sha256(json.dumps({**build, "version": BUILD_VERSION, "task": task.name}).encode())
    for p in task.prompts("train"):
        digest.update((p.text + "".join(a.text for a in p.anchors)).encode())
    digest.update("|".join(_vocabulary(task)).encode())
    return digest.hexdigest()[:16]


def _substitute(text: str, words: tuple[str, ...], new: tuple[str, ...]) -> str:
    for old, repl in zip(words, new):
        text = re.sub(rf"\b{re.escape(old)}\b", repl, text)
        text = re.sub(rf"\b{re.escape(old.capitalize())}\b", repl.capitalize(), text)
    return text


def warmstart_examples(
    prompts: list[Prompt], vocab: list[str], n: int, copy_prob: float, rng: random.Random
) -> list[tuple[str, str]]:
    """n (prompt, response) pairs drawn uniformly over training anchors of every tier; with probability
    copy_prob the two required words are replaced, in prompt and response, by random words of `vocab`
    (fresh each time, so the only way to predict them is to copy them from the prompt)."""
    pairs = []
    for _ in range(n):
        prompt = rng.choice(prompts)
        anchor = rng.choice(prompt.anchors)
        words = prompt.fields.get("words")
        if not words or not vocab or rng.random() >= copy_prob:
            pairs.append((prompt.text, anchor.text))
            continue
        new = tuple(rng.sample(vocab, len(words)))
        text = prompt.text
        for old, repl in zip(words, new):
            text = text.replace(old, repl)
        pairs.append((text, _substitute(anchor.text, words, new)))
    return pairs


def train_bpe(corpus: list[str], vocab_size: int, specials: list[str]):
    """A byte-level BPE `tokenizers.Tokenizer` of about `vocab_size` tokens trained on `corpus`, `specials` first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer)
    return core


def train_tokenizer(corpus: list[str], vocab_size: int):
    from transformers import PreTrainedTokenizerFast

    core = train_bpe(corpus, vocab_size, SPECIAL_TOKENS)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|end|>", pad_token="<|pad|>", additional_special_tokens=SPECIAL_TOKENS[2:]
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tokenize_pairs(tokenizer, pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """(input ids, labels) per pair: the chat prompt is masked (-100), the response and its <|end|> are not."""
    heads = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
        for p, _ in pairs
    ]
    head_ids = tokenizer(heads, add_special_tokens=False)["input_ids"]
    tail_ids = tokenizer([r for _, r in pairs], add_special_tokens=False)["input_ids"]
    return [
        (h + t + [tokenizer.eos_token_id], [-100] * len(h) + t + [tokenizer.eos_token_id])
        for h, t in zip(head_ids, tail_ids)
    ]


def pad_batch(rows: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(ids) for ids, _ in rows)
    return {
        "input_ids": torch.tensor([ids + [pad_id] * (width - len(ids)) for ids, _ in rows]),  # [b, L]
        "attention_mask": torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows]),  # [b, L]
        "labels": torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows]),  # [b, L]
    }


def warmstart_batches(tokenizer, task: Task, cfg: TinyModelConfig, cap: int) -> list[list[tuple[list[int], list[int]]]]:
    """The warm start's batches, drawn before it starts so that its schedule knows how many there are: fresh
    examples (warmstart_examples) cut to the model's `cap` positions, packed in the order drawn into batches of at
    most warmstart_batch_tokens padded tokens (32 examples when 0), until warmstart_steps batches or until the
    batches' padded tokens reach warmstart_tokens."""
    rng = random.Random(cfg.seed)
    prompts, vocab = task.prompts("train"), _vocabulary(task)
    batches: list[list[tuple[list[int], list[int]]]] = []
    batch: list[tuple[list[int], list[int]]] = []
    spent = 0

    def close() -> None:
        nonlocal batch, spent
        batches.append(batch)
        spent += len(batch) * max(len(ids) for ids, _ in batch)
        batch = []

    def done() -> bool:
        return len(batches) >= cfg.warmstart_steps or 0 < cfg.warmstart_tokens <= spent

    while not done():
        for ids, labels in tokenize_pairs(tokenizer, warmstart_examples(prompts, vocab, 64, cfg.copy_prob, rng)):
            row = (ids[:cap], labels[:cap])  # long anchors (web pages) are cut to what the model holds
            if cfg.warmstart_batch_tokens:
                width = max([len(row[0]), *(len(ids) for ids, _ in batch)])
                if batch and (len(batch) + 1) * width > cfg.warmstart_batch_tokens:
                    close()
            batch.append(row)
            if not cfg.warmstart_batch_tokens and len(batch) == 32:
                close()
            if done():
                break
    return batches


def warm_start(model, tokenizer, task: Task, cfg: TinyModelConfig) -> list[float]:
    """Supervised fine-tuning on freshly sampled examples (one-cycle LR); returns every step's loss."""
    start = last = time.monotonic()  # drawing the batches counts: progress comes PROGRESS_EVERY_S after the start
    batches = warmstart_batches(tokenizer, task, cfg, model.config.max_position_embeddings)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.warmstart_lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=cfg.warmstart_lr, total_steps=len(batches), pct_start=0.1
    )
    model.train()
    losses = []
    for step, rows in enumerate(batches):
        loss = model(**pad_batch(rows, tokenizer.pad_token_id)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY_S:
            last, left = now, (now - start) / (step + 1) * (len(batches) - step - 1)
            log.info(
                "tiny policy for task=%s: warm-start step %d/%d, loss %.3f, about %s left",
                task.name,
                step + 1,
                len(batches),
                losses[-1],
                duration(left),
            )
    return losses


def _vocabulary(task: Task) -> list[str]:
    return task.vocabulary() if hasattr(task, "vocabulary") else []


def build_tiny(cfg: TinyModelConfig, task: Task, target: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    start = time.monotonic()
    torch.manual_seed(cfg.seed)
    vocab = _vocabulary(task)
    sample = warmstart_examples(task.prompts("train"), vocab, 4000, cfg.copy_prob, random.Random(cfg.seed))
    tokenizer = train_tokenizer([t for pair in sample for t in pair] + vocab, cfg.vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=4 * cfg.hidden_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config)
    losses = warm_start(model, tokenizer, task, cfg) if cfg.warmstart_steps else []
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")  # unique per builder
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "warmstart.json").write_text(json.dumps({"losses": losses, "build_s": time.monotonic() - start}))
        tmp.replace(target)  # atomic: concurrent builders or a crash never leave a half-written model
    except OSError:  # another builder finished first: its folder is the same build
        if not (target / "config.json").is_file():
            raise
    finally:  # gone once renamed; else a Ctrl-C or a failure while saving leaves no half-written folder behind
        shutil.rmtree(tmp, ignore_errors=True)


def tiny_folder(cfg: TinyModelConfig, task: Task) -> Path:
    """Where the tiny policy of these settings and this task's training data is cached."""
    return Path(cfg.cache_dir).expanduser() / f"tiny-{task.name}-{_fingerprint(cfg, task)}"


def build_note(cfg: TinyModelConfig, task: Task) -> str:
    """What a run must build before its first step ("" when the policy is cached): said with the run's estimate,
    with the build times of the policies cached beside it (warmstart.json's build_s, measured here)."""
    target = tiny_folder(cfg, task)
    if target.is_dir():
        return ""
    times = sorted(t for t in map(build_seconds, target.parent.glob("tiny-*/warmstart.json")) if t is not None)
    took = (
        f"earlier builds there took {duration(times[len(times) // 2])} (median of {len(times)})"
        if times
        else "a few minutes on 2 CPU cores"
    )
    return (
        f"the tiny policy for task={task.name}, once (no cached one in {target.parent}): a tokenizer, then a warm "
        f"start of at most {cfg.warmstart_steps} steps; {took}"
    )


def build_seconds(record: Path) -> float | None:
    """How long the build that wrote `record` (a warmstart.json) took; None for a build that did not time itself."""
    try:
        seconds = json.loads(record.read_text()).get("build_s")
    except (OSError, ValueError):
        return None
    return seconds if isinstance(seconds, (int, float)) else None


def tiny_source(cfg: TinyModelConfig, task: Task) -> PolicySource:
    """The tiny policy's cached folder, built on first use."""
    target = tiny_folder(cfg, task)
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        log.info(
            "no cached tiny policy for task=%s with these %d training prompts and model.* settings (other "
            "training data, e.g. task.train_file or task.anchors_file, builds one of its own; task.max_prompts "
            "does not); building it once into %s: a tokenizer, then a warm start of at most %d steps and %s "
            "padded tokens, a few minutes on 2 CPU cores (progress every %.0f s)",
            task.name,
            len(task.prompts("train")),
            target,
            cfg.warmstart_steps,
            f"{cfg.warmstart_tokens:,}" if cfg.warmstart_tokens else "no budget of",
            PROGRESS_EVERY_S,
        )
        start = time.monotonic()
        with torch.random.fork_rng(devices=[]):  # a run must not depend on whether the cache existed
            build_tiny(cfg, task, target)
        log.info("tiny policy for task=%s built in %s", task.name, duration(time.monotonic() - start))
    return PolicySource(target)


MODELS.register("tiny", TinyModelConfig, tiny_source)
