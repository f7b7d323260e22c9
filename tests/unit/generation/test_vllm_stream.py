"""generator=vllm's hand-over under trainer.pipeline=stream, without an engine: the groups one engine step finishes
reach `emit` in one call. A group alone in a call is judged alone (the ladder sends each arrival as one judge batch
and waits for it), so groups that finish together and were handed over one by one cost the streamed step a judge
latency more than a sync step. The engine is a scripted fake of the vllm.LLM surface the streaming path calls
(enqueue, then llm_engine.step until nothing is unfinished); vLLM itself is not imported."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tsrl.generation.vllm import VLLMGenerator
from tsrl.generation.vllm_config import VLLMGeneratorConfig
from tsrl.testing.fakes import number_prompt


class ScriptedEngine:
    """Finishes the requests `schedule[s]` names (by submission index) at engine step s; every completion is the
    token ids [7, 8] drawn at log-prob -0.5."""

    def __init__(self, schedule: list[list[int]]) -> None:
        self.schedule, self.steps = list(schedule), 0
        model_config = SimpleNamespace(enable_sleep_mode=False, max_model_len=512)
        self.llm_engine = SimpleNamespace(
            vllm_config=SimpleNamespace(model_config=model_config),
            has_unfinished_requests=lambda: bool(self.schedule),
            step=self.step,
        )

    def apply_model(self, fn: Any) -> list[Any]:
        return [fn(SimpleNamespace(packed_modules_mapping={}))]

    def enqueue(self, prompts: list, params: list, **_: Any) -> list[str]:
        return [f"{i}-abcdefgh" for i in range(len(prompts))]  # vLLM's internal ids; outputs carry "<i>"

    def step(self) -> list[Any]:
        self.steps += 1
        done = self.schedule.pop(0)
        token = SimpleNamespace(logprob=-0.5)
        completion = SimpleNamespace(token_ids=[7, 8], logprobs=[{7: token}, {8: token}], finish_reason="stop")
        return [SimpleNamespace(request_id=str(r), finished=True, outputs=[completion] * 2) for r in done]


def test_groups_an_engine_step_finishes_reach_emit_together(policy):
    """Requests 0 and 2 finish at step 2, request 1 at step 3 (step 1 finishes none): two hand-overs, [0, 2] then
    [1], each group exactly once and equal to the group generate returns."""
    _, tokenizer = policy
    engine = ScriptedEngine([[], [0, 2], [1]])
    gen = VLLMGenerator(engine, tokenizer, VLLMGeneratorConfig(), expected=set())
    gen._params = lambda requests, limit: [None] * len(requests)  # SamplingParams: vLLM's, not needed by the fake
    calls: list[list[tuple[int, Any]]] = []
    groups = gen.generate([number_prompt(f"p{i}", [0]) for i in range(3)], n=2, emit=calls.append)
    assert [[b for b, _ in call] for call in calls] == [[0, 2], [1]] and engine.steps == 3
    assert all(groups[b] is group for call in calls for b, group in call)
    assert all(len(g.rollouts) == 2 and g.rollouts[0].logprobs == [-0.5, -0.5] for g in groups)
