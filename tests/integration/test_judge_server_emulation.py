"""The loopback judge server's emulation of constrained decoding, over plain HTTP: each dialect obeys its own
fields and ignores the rest, probes are answered as a server that obeys them answers, constrained answers
always conform, a weak model rambles only when unconstrained, and log-probs sit where a grammar mask puts them."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tsrl.testing.judge_server import DIALECTS, JudgeServer

PAIR = (
    "[[RESPONSE A 0a1b]]\nthree words here\n[[END RESPONSE A 0a1b]]\n\n"
    "[[RESPONSE B 0a1b]]\ntwo words\n[[END RESPONSE B 0a1b]]\n\nWhich is better?"
)  # A wins on word count
POINT = "[[RESPONSE A 0a1b]]\nfour words are here\n[[END RESPONSE A 0a1b]]\n\nGrade it."  # grade 4
PROBE_SCHEMA = {
    "type": "object",
    "properties": {"probe": {"type": "string", "enum": ["zqx-probe"]}},
    "required": ["probe"],
    "additionalProperties": False,
}
PROBES = {  # each dialect's spelling of "answer exactly zqx-probe"
    "structured_outputs": {"structured_outputs": {"regex": r"zqx\-probe"}},
    "guided": {"guided_regex": r"zqx\-probe"},
    "sglang": {"regex": r"zqx\-probe"},
    "response_format": {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "probe", "schema": PROBE_SCHEMA, "strict": True},
        }
    },
}
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "maxLength": 24},
        "verdict": {"type": "string", "enum": ["A", "B", "TIE"]},
    },
    "required": ["reasoning", "verdict"],
    "additionalProperties": False,
}


def ask(server: JudgeServer, fields: dict, user: str = PAIR, **extra) -> tuple[int, dict]:
    """(status, JSON body) of one chat completion with `fields` added to the request body."""
    body = {"model": "judge", "messages": [{"role": "user", "content": user}], "max_tokens": 64, **extra, **fields}
    request = urllib.request.Request(
        f"{server.url}/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def content(server: JudgeServer, fields: dict, user: str = PAIR) -> str:
    status, reply = ask(server, fields, user)
    assert status == 200, reply
    return reply["choices"][0]["message"]["content"]


def obeys_probe(answer: str) -> bool:
    return answer == "zqx-probe" or answer == json.dumps({"probe": "zqx-probe"})


@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_dialect_obeys_its_own_fields_and_ignores_the_others(dialect):
    """vLLM dialects and SGLang also obey response_format; an ignored field leaves the template's answer."""
    obeyed = {d for d in PROBES if d == dialect or (d == "response_format" and dialect != "none")}
    with JudgeServer(dialect=dialect) as server:
        answers = {spelling: content(server, fields, "Answer zqx-probe.") for spelling, fields in PROBES.items()}
        stats = dict(server.stats)
    assert {spelling for spelling, answer in answers.items() if obeys_probe(answer)} == obeyed
    for spelling in set(PROBES) - obeyed:
        assert answers[spelling].endswith("\nVERDICT: ?")  # no fences: the scripted verdict is '?'
    assert stats.get("constrained/regex", 0) == (dialect in ("structured_outputs", "guided", "sglang"))
    assert stats.get("constrained/json", 0) == (dialect != "none")


def test_probes_and_choices_are_answered_conformantly():
    """A literal regex (escaped or not) is answered with itself, a choice list with the scripted verdict when it
    holds it (else its first choice), a JSON enum with the value the schema allows."""
    with JudgeServer(dialect="structured_outputs") as server:
        assert content(server, {"structured_outputs": {"regex": r"zqx\-probe"}}) == "zqx-probe"
        assert content(server, {"structured_outputs": {"regex": "zqx-probe"}}) == "zqx-probe"
        assert content(server, {"structured_outputs": {"choice": ["zqx-probe"]}}) == "zqx-probe"
        assert content(server, {"structured_outputs": {"choice": ["B", "A", "TIE"]}}) == "A"
        assert content(server, {"structured_outputs": {"choice": ["B", "TIE"]}}) == "B"
        assert json.loads(content(server, {"structured_outputs": {"json": PROBE_SCHEMA}})) == {"probe": "zqx-probe"}
        assert server.stats["constrained/choice"] == 3 and server.stats["constrained/json"] == 1


def test_constrained_answers_hold_the_scripted_verdict_or_grade_in_the_asked_form():
    reasoning = r"[^\n]{1,16}\nVERDICT: (A|B|TIE)"  # too short a line for the long reasoning: the short one fits
    with JudgeServer(dialect="guided") as server:
        assert content(server, {"guided_regex": reasoning}) == "Compared.\nVERDICT: A"
        assert content(server, {"guided_regex": "(A|B|TIE)"}) == "A"
        assert (
            content(server, {"guided_regex": r"[^\n]{1,64}\nSCORE: ([0-9]|10)"}, POINT)
            == "The response was graded on the criteria.\nSCORE: 4"
        )
        assert content(server, {"guided_choice": [str(g) for g in range(11)]}, POINT) == "4"
        assert json.loads(content(server, {"guided_json": VERDICT_SCHEMA})) == {
            "reasoning": "Response A and response B"[:24],
            "verdict": "A",
        }
        score = {"type": "object", "properties": {"score": {"type": "integer", "enum": list(range(11))}}}
        assert json.loads(content(server, {"guided_json": score}, POINT)) == {"score": 4}


def test_a_constraint_no_answer_can_meet_is_refused_with_a_400():
    with JudgeServer(dialect="sglang") as server:
        status, reply = ask(server, {"regex": "x+y"})
        unknown = {"type": "object", "properties": {"winner": {"type": "string"}}, "required": ["winner"]}
        refused_json = ask(server, {"response_format": {"type": "json_schema", "json_schema": {"schema": unknown}}})
        assert status == 400 and "regex" in reply["error"]["message"] and refused_json[0] == 400
        assert server.stats["rejected"] == 2 and server.stats["requests"] == 2


def test_a_weak_model_rambles_unconstrained_and_still_obeys_a_constraint():
    with JudgeServer(dialect="structured_outputs", free_text=True) as server:
        status, reply = ask(server, {}, max_tokens=200)
        choice = reply["choices"][0]
        assert choice["finish_reason"] == "length" and reply["usage"]["completion_tokens"] == 200
        assert not any(word in choice["message"]["content"] for word in ("VERDICT", "SCORE"))
        assert content(server, {"structured_outputs": {"choice": ["A", "B", "TIE"]}}) == "A"
        assert content(server, {"structured_outputs": {"regex": r"[^\n]{1,64}\nVERDICT: (A|B|TIE)"}}).endswith(
            "\nVERDICT: A"
        )


def test_without_a_dialect_the_answer_is_the_template_s_reasoning_form():
    """dialect=none (the default) ignores every constraint field; the completion tokens follow the answer's length
    (len // 4), so a direct answer, asked for by the closing instruction, costs one token."""
    fields = {**PROBES["structured_outputs"], **PROBES["guided"], **PROBES["response_format"]}
    with JudgeServer() as server:
        status, reply = ask(server, fields)
        direct_status, direct = ask(server, {}, PAIR + "\nAnswer A, B or TIE. Write nothing else.")
        assert dict(server.stats) == {"requests": 2}
    text = reply["choices"][0]["message"]["content"]
    assert text == "Response A and response B were compared on the criteria.\nVERDICT: A"
    assert reply["usage"]["completion_tokens"] == len(text) // 4
    assert direct["choices"][0]["message"]["content"] == "A" and direct["usage"]["completion_tokens"] == 1


def alternatives(token: dict) -> dict[str, float]:
    return {alt["token"]: math.exp(alt["logprob"]) for alt in token["top_logprobs"]}


def test_log_probs_sit_at_the_token_that_holds_the_value():
    """Direct: the first token, over the allowed choices (TIE's first piece is 'T'), the answer at 0.9 and the rest
    sharing 0.1; JSON: the value's token; reasoning: the last token, as before."""
    tie = PAIR.replace("three words here", "two words")
    logprobs = {"logprobs": True, "top_logprobs": 5}
    with JudgeServer(dialect="structured_outputs") as server:
        choose = {"structured_outputs": {"choice": ["A", "B", "TIE"]}, **logprobs}
        first = ask(server, choose)[1]["choices"][0]["logprobs"]["content"]
        tied = ask(server, choose, tie)[1]["choices"][0]["logprobs"]["content"]
        grades = {"structured_outputs": {"choice": [str(g) for g in range(11)]}, **logprobs}
        graded = ask(server, grades, POINT)[1]["choices"][0]["logprobs"]["content"]
        in_json = ask(server, {"structured_outputs": {"json": VERDICT_SCHEMA}, **logprobs})[1]
        reasoned = ask(server, logprobs)[1]["choices"][0]["logprobs"]["content"]
    assert [t["token"] for t in first] == ["A"]
    assert alternatives(first[0]) == pytest.approx({"A": 0.9, "B": 0.05, "T": 0.05})
    assert [t["token"] for t in tied] == ["T", "IE"] and alternatives(tied[0])["T"] == pytest.approx(0.9)
    assert graded[0]["token"] == "4" and len(graded[0]["top_logprobs"]) == 5  # top_logprobs=5 of the 11 grades
    assert alternatives(graded[0])["4"] == pytest.approx(0.9)
    tokens = in_json["choices"][0]["logprobs"]["content"]
    assert "".join(t["token"] for t in tokens) == in_json["choices"][0]["message"]["content"]
    assert [t["token"] for t in tokens[1:]] == ["A", '"}'] and tokens[0]["token"].endswith('"verdict": "')
    assert alternatives(tokens[1]) == pytest.approx({"A": 0.9, "B": 0.05, "T": 0.05})
    assert [t["token"] for t in reasoned] == ["VERDICT", ":", " A"]
    assert alternatives(reasoned[-1]) == pytest.approx({" A": 0.9, " B": 0.08, " T": 0.02})


def test_run_as_a_module_it_serves_the_named_model_and_prints_the_run_that_uses_it(tmp_path):
    """What a user starts to try the paid-judge path: the URL and model name printed, the model listed under
    /models, and the tsrl-train line pointing judge=openai at that URL."""
    command = [sys.executable, "-m", "tsrl.testing.judge_server", "--model", "m1", "--port-file", str(tmp_path / "url")]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as server:
        try:
            first, second = server.stdout.readline(), server.stdout.readline()
            url = (tmp_path / "url").read_text()
            with urllib.request.urlopen(f"{url}/models", timeout=10) as answer:
                listed = json.loads(answer.read())
        finally:
            server.terminate()
    assert first.startswith(f"serving model 'm1' at {url} ")
    assert f"tsrl-train judge=openai judge.model=m1 'judge.base_urls=[{url}]'" in second
    assert [entry["id"] for entry in listed["data"]] == ["m1"]
