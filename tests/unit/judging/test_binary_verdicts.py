"""TSRL's judge "returns a binary verdict" (§2.1) and rules "criteria first, overall quality as tie-break"
(Paper §3): on TSRL's tasks the pairwise template asks for A or B, and the constraint, the parser and the soft
verdict know only A and B; TIE is an option (judge.allow_tie=true, the default elsewhere); an answer TIE where it
is not allowed is unreadable. Every TSRL template, pairwise and pointwise, decides on the criteria first and lets
overall quality decide where they do not separate."""

from __future__ import annotations

import math

import pytest

from tsrl.judging import judge_fingerprint
from tsrl.judging.prompting import (
    BINARY_TASKS,
    ParseError,
    load_template,
    render,
    resolve_template,
    soft_verdict,
    ties_allowed,
)
from tsrl.remote.constrain import answer_spec, direct_template
from tsrl.remote.openai_config import OpenAIJudgeConfig

TSRL_TASKS = ["stories", "humor", "web", "counseling"]
FENCE = "0123456789abcdef"


def user_text(task: str, kind: str = "pairwise", allow_tie: bool | None = None) -> str:
    """The user turn the judge is sent for `task`, as judge=openai loads its template."""
    template = load_template(resolve_template("auto", task, kind), ties_allowed(allow_tie, task))
    responses = ("first", "second") if kind == "pairwise" else ("first",)
    messages = render(template, "Write something.", "", responses, FENCE)
    return messages[0]["content"] + "\n" + messages[1]["content"]


@pytest.mark.parametrize("task", TSRL_TASKS)
def test_tsrl_pairwise_templates_ask_for_a_or_b_and_offer_tie_only_when_allowed(task):
    text = user_text(task)
    assert task in BINARY_TASKS and not ties_allowed(None, task)
    assert text.rstrip().endswith("exactly one of:\nVERDICT: A\nVERDICT: B") and "TIE" not in text
    with_ties = user_text(task, allow_tie=True)
    assert with_ties.rstrip().endswith("VERDICT: A\nVERDICT: B\nVERDICT: TIE")
    assert "Answer TIE only if you truly cannot prefer either." in with_ties


@pytest.mark.parametrize("task, kind", [(t, k) for t in TSRL_TASKS for k in ("pairwise", "pointwise")])
def test_tsrl_templates_decide_on_the_criteria_first_and_break_ties_by_overall_quality(task, kind):
    text = user_text(task, kind)
    assert "Decide on the criteria first, in their order of importance; where the criteria do not separate" in text
    assert "overall quality decides" in text


def test_other_tasks_keep_ties_unless_told():
    assert ties_allowed(None, "aime") and not ties_allowed(False, "aime") and ties_allowed(True, "stories")
    assert user_text("aime").rstrip().endswith("VERDICT: B\nVERDICT: TIE")
    assert "TIE" not in user_text("aime", allow_tie=False)


def test_the_template_identity_changes_with_the_tie_option_also_for_a_template_without_marks(tmp_path):
    """A cache keyed by the template's identity never serves a TIE asked with ties to a judge without them."""
    shipped = resolve_template("auto", "stories")
    assert load_template(shipped, True).identity != load_template(shipped, False).identity
    own = tmp_path / "mine.txt"
    own.write_text("Judge.\n---user---\n$fence_a_open\n$response_a\n$fence_a_close\nVERDICT: A|B|TIE")
    assert load_template(own, True).identity != load_template(own, False).identity
    assert load_template(own, True).user == load_template(own, False).user  # your own text stays as written
    assert judge_fingerprint(OpenAIJudgeConfig(allow_tie=True)) != judge_fingerprint(OpenAIJudgeConfig())


@pytest.mark.parametrize("ties", [True, False])
def test_every_constraint_dialect_follows_the_tie_option(ties):
    verdicts = ["A", "B", "TIE"] if ties else ["A", "B"]
    alternatives = "(" + "|".join(verdicts) + ")"
    regex = answer_spec("verdict", "reasoning", "regex", "structured_outputs", 256, ties)
    assert regex.body["structured_outputs"]["regex"].endswith(f"\\nVERDICT: {alternatives}")
    assert answer_spec("verdict", "direct", "regex", "sglang", 256, ties).body["regex"] == alternatives
    assert answer_spec("verdict", "direct", "choice", "guided", 256, ties).body["guided_choice"] == verdicts
    json_spec = answer_spec("verdict", "reasoning", "json", "response_format", 256, ties)
    schema = json_spec.body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["verdict"]["enum"] == verdicts
    direct = direct_template(load_template(resolve_template("auto", "stories"), ties), ties)
    assert ("TIE" in direct.user) == ties


@pytest.mark.parametrize(
    "constraint, form, answer",
    [
        ("off", "reasoning", "Both are equally good.\nVERDICT: TIE"),
        ("regex", "direct", "TIE"),
        ("json", "reasoning", '{"reasoning": "even", "verdict": "TIE"}'),
    ],
)
def test_a_tie_answer_is_half_with_ties_and_unreadable_without(constraint, form, answer):
    """Without ties a TIE is unreadable (unparseable_verdict): re-asked, then judge.failure decides."""
    dialect = None if constraint == "off" else "structured_outputs"
    assert answer_spec("verdict", form, constraint, dialect, 256, True).parse(answer, FENCE) == 0.5
    with pytest.raises(ParseError, match="TIE is not an allowed verdict") as err:
        answer_spec("verdict", form, constraint, dialect, 256, False).parse(answer, FENCE)
    assert err.value.kind == "unparseable_verdict"
    assert answer_spec("verdict", form, constraint, dialect, 256, False).parse(answer.replace("TIE", "B"), FENCE) == 0


def test_a_soft_verdict_without_ties_is_p_a_over_a_and_b():
    top = [{" A": math.log(0.3), " B": math.log(0.1), " T": math.log(0.6)}]
    assert soft_verdict(top) == pytest.approx(0.3 + 0.3)  # P(A) + ½ P(TIE)
    assert soft_verdict(top, ties=False) == pytest.approx(0.75)  # 0.3 / (0.3 + 0.1)
