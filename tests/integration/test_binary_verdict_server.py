"""A TIE answered where ties are not allowed (judge.allow_tie=false, the default on TSRL's tasks) is unreadable:
the openai judge asks again, then the failure policy (judge.failure) decides, against the real loopback server.
The server answers TIE only where the template offers it (here a template of one's own that does, on stories)."""

from __future__ import annotations

import pytest

from tsrl.judging import build_judge
from tsrl.remote.openai_config import OpenAIJudgeConfig
from tsrl.testing.judge_client import FAST, KEY_ENV, OPENED
from tsrl.testing.judge_server import JudgeServer
from tsrl.types import PairRequest, Prompt

pytestmark = pytest.mark.usefixtures("api_key")

OWN = """Judge the two.
---user---
$prompt
$fence_a_open
$response_a
$fence_a_close
$fence_b_open
$response_b
$fence_b_close
End with one of:
VERDICT: A
VERDICT: B
VERDICT: TIE"""


class Stories:
    name = "stories"


@pytest.mark.parametrize("failure, p_first", [("drop", None), ("tie", 0.5)])
def test_a_tie_where_ties_are_off_is_unreadable_and_the_failure_policy_decides(tmp_path, failure, p_first):
    template = tmp_path / "own_pairwise.txt"
    template.write_text(OWN)
    even = PairRequest(Prompt("p", "Say something."), "two words", "other two")  # equal word counts: TIE
    with JudgeServer() as server:
        cfg = OpenAIJudgeConfig(
            base_urls=[server.url], api_key_env=KEY_ENV, order="fixed", retry=FAST, constrain="off",
            template=str(template), failure=failure,
        )  # fmt: skip
        judge = build_judge(cfg, Stories())
        OPENED.append(judge)
        (verdict,) = judge.compare([even])
        assert verdict.p_first == p_first and "TIE is not an allowed verdict" in (verdict.error or verdict.raw)
        allowed = build_judge(OpenAIJudgeConfig(**{**cfg.__dict__, "allow_tie": True}), Stories())
        OPENED.append(allowed)
        assert allowed.compare([even])[0].p_first == 0.5
