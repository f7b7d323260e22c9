"""The project's test and benchmark support: fakes that behave like the real components, a loopback judge server.

Shared by `tests/` and `benchmarks/` (tests never import from one another, nor benchmarks from tests); the
library itself never imports it. Nothing here needs a test-only package: pytest fixtures stay in the conftests.

- `fakes`: `NumberTask` (quality is the number in the text) and `ScriptedJudge` (answers from a table), real
  classes implementing the `Task` and `Judge` protocols, and `number_prompt`.
- `judge_server`: `JudgeServer`, a real OpenAI-compatible server on loopback that scripts verdicts and injects
  faults (`python -m tsrl.testing.judge_server` runs it for another process).
- `judge_answers`: what that server answers (the scripted verdict, constrained answers, log-probs).
- `judge_client`: the openai judge pointed at a `JudgeServer`: a fast retry policy, pairs with known winners.
- `cli`: `tsrl-train` as a subprocess on a tiny policy, and its metrics.
- `logprobs`: the gap between a sampler's and the learner's log-probs (the vLLM tests).
"""
