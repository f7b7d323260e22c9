"""judge=openai answering lists (`score_lists`) over real HTTP against the loopback judge server: every constraint
dialect and answer form, one request per list, the scores equal to the server's word counts, a malformed list
re-asked and then failed with its missing label named, renderings under their list labels, and usage counted
with a real tokenizer (`JudgeServer(tokenizer=...)`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tsrl.judging import JudgeUnreadable
from tsrl.judging.list_answers import list_regex, list_schema
from tsrl.remote.openai_config import OpenAIJudgeConfig
from tsrl.remote.openai_judge import OpenAIJudge
from tsrl.testing.judge_client import FAST, KEY_ENV, PROMPT, expected_scores, word_lists
from tsrl.testing.judge_server import JudgeServer
from tsrl.types import ListRequest, PairRequest

pytestmark = pytest.mark.usefixtures("api_key")

PNG = "data:image/png;base64,iVBORw0KGgo="


@pytest.fixture
def make_judge():
    """OpenAIJudge(OpenAIConfig on `server`, task 'number'), unwrapped: what the judge itself answers; closed after
    the test."""
    made: list[OpenAIJudge] = []

    def make(server: JudgeServer, **overrides) -> OpenAIJudge:
        settings = {"base_urls": [server.url], "api_key_env": KEY_ENV, "retry": FAST, "concurrency": 8, **overrides}
        made.append(OpenAIJudge(OpenAIJudgeConfig(**settings), "number"))
        return made[-1]

    yield make
    for judge in made:
        judge.close()


def constraint_value(body: dict, dialect: str) -> object:
    """The regex or JSON schema a body asks `dialect`'s server for (None when it asks none)."""
    spelled = {
        "structured_outputs": (body.get("structured_outputs") or {}).get("regex"),
        "guided": body.get("guided_regex"),
        "sglang": body.get("regex"),
        "response_format": (body.get("response_format") or {}).get("json_schema", {}).get("schema"),
    }
    return spelled.get(dialect)


# dialect → (judge.constrain, the constraint a list is asked with, probe requests at build)
DIALECTS = {
    "structured_outputs": ("auto", "regex", 1),
    "guided": ("auto", "regex", 2),
    "sglang": ("auto", "regex", 3),
    "response_format": ("auto", "json", 4),
    "none": ("off", "off", 0),
}


@pytest.mark.parametrize("form", ["reasoning", "direct"])
@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_every_dialect_and_form_scores_each_list_in_one_request(make_judge, dialect, form):
    """Lists of 2 and 5 in one batch: one request each (after the probes), asked with the constraint for its own
    length (the direct form's choice becomes the regex), max_tokens = base + 6·n, no log-probs; the scores are the
    server's word counts in slot order, and each answer records how it was asked."""
    constrain, used, probes = DIALECTS[dialect]
    requests = word_lists(3, 2) + word_lists(3, 5)
    with JudgeServer(dialect=dialect, keep_bodies=True) as server:
        judge = make_judge(server, constrain=constrain, form=form)
        answers = judge.score_lists(requests)
        metrics = judge.drain_metrics()
    assert [a.values for a in answers] == [expected_scores(r) for r in requests]
    assert [a.form for a in answers] == [f"{form}/{used}"] * len(requests) and not [a for a in answers if a.error]
    assert server.stats["requests"] == probes + len(requests) and metrics["calls"] == len(requests)
    base = 256 if form == "reasoning" else 8
    for body in server.bodies[probes:]:
        n = body["messages"][1]["content"].count("[[RESPONSE R")
        assert body["max_tokens"] == base + 6 * n and "logprobs" not in body
        wanted = {"regex": list_regex(form, n, 240), "json": list_schema(form, n, 208), "off": None}[used]
        assert constraint_value(body, dialect) == wanted
    assert judge.list_identity.startswith("judge|generic_listwise_v1" + ("+direct@" if form == "direct" else "@"))
    assert judge.list_identity not in (judge.identity, judge.score_identity)


def test_an_explicit_choice_asks_verdicts_by_choice_and_lists_by_regex(make_judge):
    with JudgeServer(dialect="guided", keep_bodies=True) as server:
        judge = make_judge(server, constrain="choice", form="direct")
        verdict = judge.compare([PairRequest(PROMPT, "a b", "c")])[0]
        listed = judge.score_lists(word_lists(1, 3))[0]
    pair_body, list_body = server.bodies[-2:]
    assert pair_body["guided_choice"] == ["A", "B", "TIE"] and verdict.p_first is not None
    assert list_body["guided_regex"] == list_regex("direct", 3, 240) and "guided_choice" not in list_body
    assert listed.form == "direct/regex" and listed.values == expected_scores(word_lists(1, 3)[0])


def test_a_malformed_list_is_asked_again_then_fails_naming_the_missing_label(make_judge):
    """list_missing=1: every unconstrained answer lacks its last score line: each list is asked twice (one re-ask)
    and then fails with unparseable_list naming the label it lacks; a constrained answer is unaffected."""
    requests = word_lists(3, 4)
    with JudgeServer(list_missing=1) as server:
        judge = make_judge(server, constrain="off", retry=replace(FAST, first_answers=0))
        answers = judge.score_lists(requests)
        metrics = judge.drain_metrics()
    assert [a.values for a in answers] == [None] * 3
    assert {a.error for a in answers} == {"unparseable_list: the answer scores R1, R2, R3 but not R4"}
    assert server.stats["requests"] == 6 and metrics["reasks"] == 3 and metrics["calls"] == 3
    assert metrics["attempt_errors/unparseable_list"] == 6 and metrics["errors/unparseable_list"] == 3
    with JudgeServer(list_missing=1, dialect="structured_outputs") as server:
        judge = make_judge(server, constrain="auto")
        assert [a.values for a in judge.score_lists(requests)] == [expected_scores(r) for r in requests]


def test_a_judge_that_never_scores_every_label_stops_the_run_at_once(make_judge):
    """The fail-fast watch knows lists: after its first 4 answers, one sentence saying what they must end with."""
    with JudgeServer(list_missing=2) as server:
        judge = make_judge(server, constrain="off")
        with pytest.raises(JudgeUnreadable) as caught:
            judge.score_lists(word_lists(12, 3))
    message = str(caught.value)
    assert "held a readable list of scores (unparseable_list ×4" in message
    assert "one line 'R<i>: <0-10>' per response" in message
    assert 4 <= server.stats["requests"] <= 8  # the first 4 lists, each re-asked at most once: not 12 lists × 2


def test_a_vision_judge_shows_each_rendering_under_its_list_label_and_empty_lists_cost_nothing(make_judge):
    request = ListRequest(PROMPT, ("one", "two two", "three three three"), (PNG, None, PNG))
    with JudgeServer(keep_bodies=True) as server:
        judge = make_judge(server, constrain="off", vision=True)
        empty, answer = judge.score_lists([ListRequest(PROMPT, ()), request])
    (body,) = server.bodies
    labels = [p["text"] for p in body["messages"][1]["content"] if p["type"] == "text"][1:]
    assert labels == ["Rendering of response R1:", "Rendering of response R3:"]
    assert answer.values == [1.0, 2.0, 3.0] and empty.values == [] and empty.error is None


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory) -> Path:
    """A small byte-level BPE tokenizer with a chat template, saved as a Hugging Face folder (any tokenizer
    folder works; the cost benchmark passes SmolLM2's)."""
    from tsrl.models.tiny import train_tokenizer

    corpus = ["Score each of the responses against these criteria.", "R1: 7", "w0x1 w1x2 the request"] * 20
    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(corpus, vocab_size=300).save_pretrained(folder)
    return folder


def test_usage_is_counted_with_the_given_tokenizer(make_judge, tokenizer_folder):
    """The prompt through the tokenizer's chat template, the answer as its own tokens: a list's tokens equal the
    counts of transformers itself, not characters / 4."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder, local_files_only=True)
    requests = word_lists(2, 3)
    with JudgeServer(tokenizer=str(tokenizer_folder), keep_bodies=True) as server:
        judge = make_judge(server, constrain="off", concurrency=1)  # bodies arrive in the order of the answers
        answers = judge.score_lists(requests)
    for body, answer in zip(server.bodies, answers):
        prompt = tokenizer.apply_chat_template(body["messages"], tokenize=True, add_generation_prompt=True)
        prompt_ids = prompt["input_ids"] if isinstance(prompt, dict) or hasattr(prompt, "keys") else prompt
        completion = len(tokenizer(answer.raw, add_special_tokens=False)["input_ids"])
        assert answer.tokens == len(prompt_ids) + completion
        assert answer.tokens != len(body["messages"][1]["content"]) // 4 + max(1, len(answer.raw) // 4)
