"""Readable answers from any judge model (tsrl/remote/constrain.py) against the real loopback server in each
constraint dialect: what judge.constrain=auto picks per endpoint and the fields it sends, explicit constraints
a server cannot honour, the direct form and its soft verdicts, the fail-fast watch on a judge that never answers
readably (and that it neither stops a judge that does nor hangs on transport failures), the probe's retries,
extra_body over the spec; then the pure functions of constrain.py."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from tsrl.errors import ConfigError
from tsrl.judging import JudgeUnavailable, JudgeUnreadable
from tsrl.judging.prompting import ParseError
from tsrl.remote.constrain import DIRECT_PAIRWISE, DIRECT_POINTWISE, fields, parse_direct, parse_json, regex, schema
from tsrl.remote.hedging import HedgeConfig
from tsrl.remote.openai_config import OpenAIJudgeConfig
from tsrl.testing.judge_client import FAST, PROMPT, expected, judge_for, timed_compare, word_pairs
from tsrl.testing.judge_server import JudgeServer
from tsrl.types import ScoreRequest

pytestmark = pytest.mark.usefixtures("api_key")  # the key in KEY_ENV; judges closed after each test

CHOICE = ["A", "B", "TIE"]
REGEX = r"[^\n]{1,240}\nVERDICT: (A|B|TIE)"  # max_tokens 256 − 16 characters of reasoning, then the verdict line
VERDICT = {"type": "string", "enum": CHOICE}
SCHEMA = {
    "type": "object",
    "properties": {"reasoning": {"type": "string", "maxLength": 208}, "verdict": VERDICT},
    "required": ["reasoning", "verdict"],
    "additionalProperties": False,
}  # 208 = 256 − 48
DIRECT_SCHEMA = {
    "type": "object",
    "properties": {"verdict": VERDICT},
    "required": ["verdict"],
    "additionalProperties": False,
}
CONSTRAINT_FIELDS = ("structured_outputs", "guided_choice", "guided_regex", "guided_json", "regex", "response_format")
# P(A) + ½P(TIE) by the server's log-prob table: the " A"/" B"/" T" table at a VERDICT line (0.9/0.08/0.02 for A);
# at a value alone (a direct answer, a JSON verdict) the answer holds 0.9 and the others share 0.1
LINE_SOFT = {1.0: 0.9 + 0.02 / 2, 0.0: 0.08 + 0.02 / 2, 0.5: 0.1 + 0.8 / 2}
VALUE_SOFT = {1.0: 0.9 + 0.05 / 2, 0.0: 0.05 + 0.05 / 2, 0.5: 0.05 + 0.9 / 2}


def response_format(value: dict) -> dict:
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "tsrl_answer", "schema": value, "strict": True},
        }
    }


# dialect, form → (constraint fields of every answer's body, max_tokens, Verdict.form, probe requests)
AUTO = {
    ("structured_outputs", "reasoning"): ({"structured_outputs": {"regex": REGEX}}, 256, "reasoning/regex", 1),
    ("structured_outputs", "direct"): ({"structured_outputs": {"choice": CHOICE}}, 4, "direct/choice", 1),
    ("guided", "reasoning"): ({"guided_regex": REGEX}, 256, "reasoning/regex", 2),
    ("guided", "direct"): ({"guided_choice": CHOICE}, 4, "direct/choice", 2),
    ("sglang", "reasoning"): ({"regex": REGEX}, 256, "reasoning/regex", 3),
    ("sglang", "direct"): ({"regex": "(A|B|TIE)"}, 4, "direct/regex", 3),  # SGLang has no choice list
    ("response_format", "reasoning"): (response_format(SCHEMA), 256, "reasoning/json", 4),
    ("response_format", "direct"): (response_format(DIRECT_SCHEMA), 24, "direct/json", 4),
    ("none", "reasoning"): ({}, 256, "reasoning/off", 4),
    ("none", "direct"): ({}, 8, "direct/off", 4),
}


def soft(request: Any, label: str) -> float:
    """The soft verdict the server's log-probs give for `request` asked as `label` ('<form>/<constraint>')."""
    at_line = label.startswith("reasoning/") and not label.endswith("/json")
    return (LINE_SOFT if at_line else VALUE_SOFT)[expected(request)]


def answers(server: JudgeServer, probes: int) -> list[dict]:
    """The bodies of the questions a server received, after the probes that came first."""
    assert len(server.bodies) == server.stats["requests"]
    return server.bodies[probes:]


def assert_constrained(body: dict, constraint: dict) -> None:
    """`body` holds exactly the constraint fields `constraint` names, and no other spelling."""
    assert {key: body[key] for key in constraint} == constraint
    assert not [key for key in CONSTRAINT_FIELDS if key in body and key not in constraint]


def in_time(call: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    """call() on a thread; fails the test instead of hanging it when the call does not return in time."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as err:  # handed to the test below
            outcome["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), f"the judge did not return within {timeout_s} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# --- judge.constrain=auto, per dialect ---------------------------------------------------------------------------


@pytest.mark.parametrize("dialect, form", list(AUTO))
def test_auto_picks_the_best_constraint_each_dialect_honours(dialect, form, caplog):
    """Probed once at build (structured_outputs, guided, sglang, response_format, in that order, stopping at the
    first obeyed); every question then carries that dialect's spelling of the constraint and no other, the direct
    form's max_tokens is capped, every verdict is right and soft, and records how it was asked. Each attempt may
    take 2 s and none is hedged: the request count is exact, and with FAST's 0.5 s a loaded machine's slow answer
    was asked again."""
    constraint, max_tokens, label, probes = AUTO[dialect, form]
    requests = word_pairs(30)
    with JudgeServer(dialect=dialect, keep_bodies=True) as server:
        slow_ok = {"retry": replace(FAST, timeout_s=2.0), "hedge": HedgeConfig(enabled=False)}
        with caplog.at_level(logging.WARNING, logger="tsrl"):
            judge = judge_for(server, constrain="auto", form=form, **slow_ok)
        verdicts = judge.compare(requests)
        metrics = judge.drain_metrics()
    notes = [r.getMessage() for r in caplog.records if "judge.constrain" in r.getMessage()]
    if dialect == "none":  # said on tsrl's logger (a warnings.warn from the judge's event loop named asyncio)
        assert [r.name for r in caplog.records if "judge.constrain" in r.getMessage()] == ["tsrl"]
        assert server.url in notes[0] and "honours no structured-output field" in notes[0]
    else:
        assert notes == []
    assert server.stats["requests"] == probes + len(requests)
    for body in answers(server, probes):
        assert_constrained(body, constraint)
        assert body["max_tokens"] == max_tokens and body["top_logprobs"] == (20 if form == "direct" else 5)
    assert [v.form for v in verdicts] == [f"{label}+soft"] * len(requests)
    for request, verdict in zip(requests, verdicts):
        assert verdict.error is None and verdict.p_first == pytest.approx(soft(request, label), abs=1e-9)
    assert metrics["answers"] == metrics[f"answers/{label}"] == metrics["soft_verdicts"] == len(requests)
    assert "unreadable_answers" not in metrics


def test_each_endpoint_is_asked_in_its_own_dialect():
    """One judge over a vLLM-style endpoint and one that only knows response_format: each is probed on its own
    and each gets its own fields (a body built for one never reaches the other)."""
    requests = word_pairs(40)
    with (
        JudgeServer(dialect="structured_outputs", keep_bodies=True) as vllm,
        JudgeServer(dialect="response_format", keep_bodies=True) as hosted,
    ):
        judge = judge_for(
            vllm,
            base_urls=[vllm.url, hosted.url],
            constrain="auto",
            concurrency=4,
            retry=replace(FAST, endpoint_cooldown_s=0.0),
        )
        verdicts = judge.compare(requests)
    vllm_bodies, hosted_bodies = answers(vllm, 1), answers(hosted, 4)
    assert len(vllm_bodies) + len(hosted_bodies) == len(requests) and vllm_bodies and hosted_bodies
    for body in vllm_bodies:
        assert_constrained(body, {"structured_outputs": {"regex": REGEX}})
    for body in hosted_bodies:
        assert_constrained(body, response_format(SCHEMA))
    forms = [v.form for v in verdicts]
    assert forms.count("reasoning/regex+soft") == len(vllm_bodies)
    assert forms.count("reasoning/json+soft") == len(hosted_bodies)
    for request, verdict in zip(requests, verdicts):
        assert verdict.p_first == pytest.approx(soft(request, verdict.form.removesuffix("+soft")), abs=1e-9)


# --- explicit constraints --------------------------------------------------------------------------------------


def test_an_explicit_regex_a_server_cannot_honour_stops_the_build_naming_the_url():
    with JudgeServer(dialect="response_format") as server:
        with pytest.raises(ConfigError, match=re.escape(server.url)) as err:
            judge_for(server, constrain="regex")
    assert "judge.constrain=regex" in str(err.value) and "judge.constrain=auto" in str(err.value)
    assert server.stats["requests"] == 3  # the regex probes of structured_outputs, guided and sglang; not JSON


@pytest.mark.parametrize(
    "dialect, constraint",
    [
        ("structured_outputs", {"structured_outputs": {"json": SCHEMA, "disable_any_whitespace": True}}),
        ("guided", response_format(SCHEMA)),  # no structured_outputs: OpenAI's spelling
    ],
)
def test_an_explicit_json_constraint_uses_vllm_s_own_spelling_where_it_can(dialect, constraint):
    requests = word_pairs(12)
    with JudgeServer(dialect=dialect, keep_bodies=True) as server:
        verdicts = judge_for(server, constrain="json").compare(requests)
    probes = 1 if dialect == "structured_outputs" else 2  # json probes structured_outputs, then response_format
    for body in answers(server, probes):
        assert_constrained(body, constraint)
    assert {v.form for v in verdicts} == {"reasoning/json+soft"}
    assert [v.p_first for v in verdicts] == pytest.approx([VALUE_SOFT[expected(r)] for r in requests], abs=1e-9)


def test_choice_with_the_reasoning_form_is_a_config_error():
    with pytest.raises(ConfigError, match="judge.form=direct"):
        OpenAIJudgeConfig(constrain="choice", form="reasoning")
    OpenAIJudgeConfig(constrain="choice", form="direct")  # the combination it is made for


# --- the direct form ---------------------------------------------------------------------------------------------


def test_the_direct_form_asks_for_the_verdict_alone_and_reads_p_a_from_its_first_token():
    requests = word_pairs(15)
    with JudgeServer(dialect="structured_outputs", keep_bodies=True) as server:
        judge = judge_for(server, constrain="auto", form="direct")
        verdicts = judge.compare(requests)
        hard = judge_for(server, constrain="auto", form="direct", logprobs=False).compare(requests)
    body = answers(server, 1)[0]
    user = body["messages"][-1]["content"]
    assert user.endswith(f"\n\n{DIRECT_PAIRWISE}") and "Think briefly" not in user  # the closing instruction
    assert re.search(r"\[\[END RESPONSE A [0-9a-f]+\]\]", user) and re.search(r"\[\[END RESPONSE B [0-9a-f]+\]\]", user)
    assert body["max_tokens"] == 4 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["structured_outputs"] == {"choice": CHOICE}
    # A wins: 0.9 + ½·0.05; B wins: 0.05 + ½·0.05; a tie: 0.05 + ½·0.9
    assert [v.p_first for v in verdicts] == pytest.approx([VALUE_SOFT[expected(r)] for r in requests], abs=1e-9)
    assert {expected(r) for r in requests} == {1.0, 0.0, 0.5}  # every outcome is seen
    assert {v.form for v in verdicts} == {"direct/choice+soft"}
    assert [v.p_first for v in hard] == [expected(r) for r in requests] and {v.form for v in hard} == {"direct/choice"}


@pytest.mark.parametrize("dialect", ["structured_outputs", "response_format"])
@pytest.mark.parametrize("form", ["reasoning", "direct"])
def test_pointwise_grades_in_both_forms(dialect, form):
    """The server grades a response min(10, its words); 1 to 12 words cover the whole scale's top."""
    requests = [ScoreRequest(PROMPT, " ".join(["word"] * n)) for n in range(1, 13)]
    label = {
        ("structured_outputs", "reasoning"): "reasoning/regex",
        ("structured_outputs", "direct"): "direct/choice",
        ("response_format", "reasoning"): "reasoning/json",
        ("response_format", "direct"): "direct/json",
    }
    with JudgeServer(dialect=dialect, keep_bodies=True) as server:
        scores = judge_for(server, constrain="auto", form=form).score(requests)
    assert [s.value for s in scores] == [float(min(10, n)) for n in range(1, 13)]
    assert {s.form for s in scores} == {label[dialect, form]}  # a grade is never soft
    body = answers(server, 1 if dialect == "structured_outputs" else 4)[0]
    grades = [str(g) for g in range(11)]
    if form == "direct":
        assert body["messages"][-1]["content"].endswith(f"\n\n{DIRECT_POINTWISE}")
    if dialect == "structured_outputs":
        wanted = grades if form == "direct" else r"[^\n]{1,240}\nSCORE: ([0-9]|10)"
        assert body["structured_outputs"] == {"choice" if form == "direct" else "regex": wanted}
    else:
        properties = body["response_format"]["json_schema"]["schema"]["properties"]
        assert properties["score"] == {"type": "integer", "enum": list(range(11))}
        assert list(properties) == (["score"] if form == "direct" else ["reasoning", "score"])


# --- failing fast on a judge that never answers readably -------------------------------------------------------


@pytest.mark.parametrize("reask", [0, 1])
def test_a_judge_that_never_answers_readably_stops_after_its_first_answers(reask):
    """A weak model, unconstrained, rambles to max_tokens on every question: after 4 answers (first_answers) the
    run stops with one sentence, not after 200 questions' worth of re-asks. Only the 4 first questions are let out
    (a slot freed by an unreadable answer may let one more go before the 4th answer arrives) and each is re-asked
    at most `reask` times."""
    with JudgeServer() as readable:  # the time 8 readable answers take on this machine, now
        baseline = timed_compare(judge_for(readable, retry=replace(FAST, reask=reask)), word_pairs(8))
    with JudgeServer(free_text=True) as server:
        judge = judge_for(server, retry=replace(FAST, reask=reask))
        start = time.perf_counter()
        with pytest.raises(JudgeUnreadable) as err:
            judge.compare(word_pairs(200))
        elapsed = time.perf_counter() - start
        sent = server.stats["requests"]
    message = str(err.value)
    assert server.url in message and "none of its first 4 answers held a readable verdict" in message
    assert "unparseable_verdict ×4" in message and "asked as reasoning/off" in message
    assert "judge.max_tokens=256" in message and "judge.constrain=auto" in message  # what they did; the fix
    assert 4 <= sent <= 8 and elapsed < baseline + 1.5, (elapsed, baseline)


def test_the_direct_form_s_fail_fast_message_names_judge_constrain_auto():
    with JudgeServer(free_text=True) as server:
        with pytest.raises(JudgeUnreadable, match=re.escape(server.url)) as err:
            judge_for(server, form="direct").compare(word_pairs(200))
        sent = server.stats["requests"]
    assert "asked as direct/off" in str(err.value) and "judge.constrain=auto" in str(err.value) and sent <= 16


def test_the_same_weak_model_answers_everything_when_constrained():
    requests = word_pairs(200)
    with JudgeServer(free_text=True, dialect="structured_outputs") as server:
        judge = judge_for(server, constrain="auto")
        verdicts = judge.compare(requests)
        metrics = judge.drain_metrics()
    assert [v.p_first for v in verdicts] == pytest.approx([LINE_SOFT[expected(r)] for r in requests], abs=1e-9)
    assert {v.form for v in verdicts} == {"reasoning/regex+soft"}
    assert server.stats["requests"] == 1 + 200 and metrics["answers"] == 200 and "unreadable_answers" not in metrics


@pytest.mark.parametrize("unreadable, stops", [(3, False), (4, True)])
def test_the_watch_stops_only_when_all_of_its_first_answers_are_unreadable(unreadable, stops):
    """first_answers=4, one request at a time, no re-ask: 3 unreadable answers, then readable ones, is a judge
    that works (the 3 are failed verdicts); 4 unreadable answers first is one that does not."""
    requests = word_pairs(10)
    with JudgeServer() as server:
        server.queue = ["wrong_format"] * unreadable
        judge = judge_for(server, concurrency=1, logprobs=False, retry=replace(FAST, reask=0, first_answers=4))
        if stops:
            with pytest.raises(JudgeUnreadable, match="none of its first 4 answers"):
                judge.compare(requests)
            assert server.stats["requests"] == 4
            return
        verdicts = judge.compare(requests)
        metrics = judge.drain_metrics()
    assert all(v.p_first is None and v.error.startswith("unparseable_verdict") for v in verdicts[:3])
    assert [v.p_first for v in verdicts[3:]] == [expected(r) for r in requests[3:]]
    assert metrics["unreadable_answers"] == 3 and metrics["answers"] == 10


def test_the_gate_holds_the_batch_until_the_first_readable_answer_then_opens():
    """first_answers=2, concurrency 32, 50 ms per answer, the first answer unreadable: two questions go out, and
    the other 18 all at once as soon as the second is answered readably (not two at a time)."""
    requests = word_pairs(20)
    with JudgeServer(latency_s=0.05, keep_bodies=True) as server:
        server.queue = ["wrong_format"]
        judge = judge_for(server, concurrency=32, logprobs=False, retry=replace(FAST, reask=0, first_answers=2))
        verdicts = judge.compare(requests)
        arrivals = sorted(server.arrivals)
    first = arrivals[0]
    assert len([t for t in arrivals if t < first + 0.04]) == 2  # the rest waited for an answer
    assert arrivals[-1] < first + 0.25  # and then went together: two at a time would take 0.45 s more
    assert sum(v.p_first is None for v in verdicts) == 1
    assert all(v.p_first == expected(r) for r, v in zip(requests, verdicts) if v.error is None)


def test_first_answers_0_turns_the_watch_off():
    requests = word_pairs(30)
    with JudgeServer() as server:
        server.queue = ["wrong_format"] * 10
        judge = judge_for(server, logprobs=False, retry=replace(FAST, reask=0, first_answers=0))
        verdicts = judge.compare(requests)
    failed = [v for v in verdicts if v.p_first is None]
    assert len(failed) == 10 and all(v.error.startswith("unparseable_verdict") for v in failed)
    assert all(v.p_first == expected(r) for r, v in zip(requests, verdicts) if v.error is None)


@pytest.mark.parametrize("max_retries", [0, 8])
def test_transport_failures_do_not_hold_the_gate_shut(max_retries):
    """The first 12 requests hit a 500 (more than the 4 slots of the closed gate): without retries those
    questions fail and free their slots, with retries they are answered; either way the batch completes."""
    requests = word_pairs(30)
    with JudgeServer() as server:
        server.queue = ["server_error"] * 12
        judge = judge_for(server, logprobs=False, retry=replace(FAST, max_retries=max_retries))
        verdicts = in_time(lambda: judge.compare(requests))
    failed = [v for v in verdicts if v.p_first is None]
    assert len(failed) == (12 if max_retries == 0 else 0) and all(v.error.startswith("server_error") for v in failed)
    assert all(v.p_first == expected(r) for r, v in zip(requests, verdicts) if v.error is None)


# --- the probe ---------------------------------------------------------------------------------------------------


def test_the_probe_retries_a_server_error():
    requests = word_pairs(6)
    with JudgeServer(dialect="structured_outputs", keep_bodies=True) as server:
        server.queue = ["server_error"] * 2
        verdicts = judge_for(server, constrain="auto").compare(requests)
    assert server.stats["fault/server_error"] == 2 and server.stats["requests"] == 3 + len(requests)
    for body in answers(server, 3):
        assert_constrained(body, {"structured_outputs": {"regex": REGEX}})
    assert {v.form for v in verdicts} == {"reasoning/regex+soft"}


def test_a_server_failing_every_probe_is_unavailable_naming_the_way_around_it():
    with JudgeServer(fault_rate=1.0, fault_kinds=("server_error",)) as server:
        with pytest.raises(JudgeUnavailable, match=re.escape(server.url)) as err:
            judge_for(server, constrain="auto")
    assert type(err.value) is JudgeUnavailable  # the server is down, not unreadable
    assert "structured-output probe" in str(err.value) and "judge.constrain=off" in str(err.value)
    assert server.stats["requests"] == FAST.max_retries + 1


# --- extra_body over the spec ------------------------------------------------------------------------------------


def test_a_null_in_extra_body_removes_max_tokens_even_in_the_direct_form():
    requests = word_pairs(6)
    with JudgeServer(dialect="structured_outputs", keep_bodies=True) as server:
        verdicts = judge_for(server, constrain="auto", form="direct", extra_body={"max_tokens": None}).compare(requests)
    for body in answers(server, 1):
        assert "max_tokens" not in body and body["structured_outputs"] == {"choice": CHOICE}
    assert [v.p_first for v in verdicts] == pytest.approx([VALUE_SOFT[expected(r)] for r in requests], abs=1e-9)


def test_a_null_in_extra_body_removes_max_tokens_from_the_probe_too():
    with JudgeServer(dialect="structured_outputs", keep_bodies=True) as server:
        judge_for(server, constrain="auto", extra_body={"max_tokens": None})
    assert server.bodies and all("max_tokens" not in body for body in server.bodies)


# --- the pure functions of constrain.py --------------------------------------------------------------------------


def test_the_reasoning_regex_bounds_the_reasoning_line_so_the_verdict_fits():
    pattern = re.compile(regex("verdict", "reasoning", 256))
    assert pattern.pattern == REGEX
    assert pattern.fullmatch("Response A is funnier.\nVERDICT: A")
    assert pattern.fullmatch("x" * 240 + "\nVERDICT: TIE")
    assert not pattern.fullmatch("x" * 241 + "\nVERDICT: TIE")  # longer than max_tokens − 16
    assert not pattern.fullmatch("two\nlines\nVERDICT: A") and not pattern.fullmatch("x\nVERDICT: C")
    assert not pattern.fullmatch("VERDICT: A")  # a reasoning line comes first
    assert regex("verdict", "reasoning", 20) == r"[^\n]{1,16}\nVERDICT: (A|B|TIE)"  # never under 16 characters
    grade = re.compile(regex("score", "reasoning", 256))
    assert grade.fullmatch("Fine.\nSCORE: 10") and not grade.fullmatch("Fine.\nSCORE: 11")
    verdict, score = re.compile(regex("verdict", "direct", 256)), re.compile(regex("score", "direct", 256))
    assert verdict.fullmatch("TIE") and not verdict.fullmatch("AB") and not verdict.fullmatch("A.")
    assert score.fullmatch("7") and score.fullmatch("10") and not score.fullmatch("11")


@pytest.mark.parametrize(
    "text, value", [("A", 1.0), (" **B** ", 0.0), ("TIE.", 0.5), ("Verdict: A", 1.0), ("`tie`", 0.5), ("b\n", 0.0)]
)
def test_parse_direct_reads_a_verdict_alone_give_or_take_markdown(text, value):
    assert parse_direct(text, "verdict") == value


@pytest.mark.parametrize(
    "text, kind",
    [
        ("A joke", "unparseable_verdict"),
        ("A or B", "unparseable_verdict"),
        ("VERDICT: A\nB", "unparseable_verdict"),
        ("  ", "empty_content"),
    ],
)
def test_parse_direct_rejects_anything_but_the_verdict(text, kind):
    with pytest.raises(ParseError) as err:
        parse_direct(text, "verdict")
    assert err.value.kind == kind


def test_parse_direct_reads_grades():
    assert [parse_direct(text, "score") for text in ("7", " **10** ", "Score: 3", "8/10")] == [7.0, 10.0, 3.0, 8.0]
    for text in ("11", "seven", "7 points"):
        with pytest.raises(ParseError, match="an integer from 0 to 10"):
            parse_direct(text, "score")


def test_parse_json_reads_the_verdict_field_and_nothing_else():
    assert parse_json('{"verdict":"B"}', "verdict") == 0.0
    assert parse_json('{"reasoning": "x", "verdict": "TIE"}', "verdict") == 0.5
    assert parse_json('{"reasoning": "x", "score": 7}', "score") == 7.0
    for text, kind in [
        ('{"verdict":"C"}', "verdict"),
        ("VERDICT: A", "verdict"),
        ('["A"]', "verdict"),
        ('{"reasoning": "A"}', "verdict"),
        ('{"score": 11}', "score"),
        ('{"score": "7"}', "score"),
        ('{"score": true}', "score"),
    ]:
        with pytest.raises(ParseError) as err:
            parse_json(text, kind)
        assert err.value.kind == f"unparseable_{kind}", text


@pytest.mark.parametrize("kind, form", [(k, f) for k in ("verdict", "score") for f in ("reasoning", "direct")])
def test_schema_is_a_closed_json_schema_object(kind, form):
    value = schema(kind, form, 256)
    assert json.loads(json.dumps(value)) == value  # plain JSON, as it travels in the body
    assert value["type"] == "object" and value["additionalProperties"] is False
    assert value["required"] == list(value["properties"]) == (["reasoning", kind] if form == "reasoning" else [kind])
    answer = value["properties"][kind]
    assert answer == (
        {"type": "string", "enum": CHOICE} if kind == "verdict" else {"type": "integer", "enum": list(range(11))}
    )
    if form == "reasoning":
        assert value["properties"]["reasoning"] == {"type": "string", "maxLength": 208}


def test_fields_spell_each_constraint_in_each_dialect():
    assert fields("structured_outputs", "choice", CHOICE) == {"structured_outputs": {"choice": CHOICE}}
    assert fields("guided", "regex", REGEX) == {"guided_regex": REGEX}
    assert fields("sglang", "choice", ["A", "B", "T.E"]) == {"regex": r"(A|B|T\.E)"}  # choices escaped
    assert fields("structured_outputs", "json", SCHEMA) == {
        "structured_outputs": {"json": SCHEMA, "disable_any_whitespace": True}
    }
    assert fields("guided", "json", SCHEMA) == response_format(SCHEMA)
