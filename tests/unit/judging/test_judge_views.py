"""What a judge sees: every task's pointwise grade uses its pairwise criteria (one file per task), a web page is
graded on its screenshot, no template or prompt states a simulator feature, and judging a reasoning trace
never reads the answer key."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tsrl.judging.prompting import (
    GENERIC_CRITERIA,
    PROMPTS_DIR,
    criteria_text,
    included_criteria,
    load_template,
    resolve_template,
)
from tsrl.judging.rendering_judge import RenderingJudge
from tsrl.judging.simulated import RubricSimConfig, SimulatedJudge
from tsrl.remote.openai_judge import OpenAIJudge, OpenAIJudgeConfig
from tsrl.rendering import Rendering, extract_page
from tsrl.rewards.base import RegimeContext
from tsrl.rewards.rubric import RLAIFConfig, RubricConfig, RubricRegime
from tsrl.rewards.verified import AdaptiveConfig, AdaptiveRegime
from tsrl.tasks import build_task
from tsrl.tasks.aime import AimeConfig
from tsrl.tasks.counseling import CounselingConfig
from tsrl.tasks.gpqa import GpqaConfig
from tsrl.tasks.humor import HumorConfig
from tsrl.tasks.stories import StoriesConfig
from tsrl.tasks.web import WebConfig
from tsrl.types import Group, PairRequest, Prompt, Rollout, Score, ScoreRequest, Verdict

TASKS = {
    "humor": HumorConfig,
    "stories": StoriesConfig,
    "web": WebConfig,
    "counseling": CounselingConfig,
    "aime": AimeConfig,
    "gpqa": GpqaConfig,
}
KINDS = ("pairwise", "pointwise")
TEMPLATES = sorted(p for kind in KINDS for p in PROMPTS_DIR.glob(f"*_{kind}_v*.txt"))
# a length or count the simulators use ("12 to 28 words", "80–220 words", "600–4,000 characters")
LENGTH = re.compile(
    r"\b\d[\d,]*\s*(?:(?:-|–|to)\s*\d[\d,]*\s*)?(?:words?|characters?|sentences?|lines?|paragraphs?"
    r"|tokens?)\b",
    re.IGNORECASE,
)
# observable features the simulated qualities score (tsrl/tasks/*.py docstrings) that no task asks for
SIMULATOR_FEATURES = (
    "punchline",
    "setup",
    "repetition",
    "distinct",
    "dialogue",
    "paragraph",
    "roughly",
    "concise",
    "open question",
    "structural",
    "\\boxed",
    "shows work",
)


class RecordingTransport:
    """The openai judge's transport, answering on the spot: "SCORE: 7" to a grade, "VERDICT: A" to a pair;
    every request body is kept."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def post(self, index: int, body: dict) -> dict:
        self.bodies.append(json.loads(json.dumps(body)))
        user = body["messages"][-1]["content"]
        answer = "SCORE: 7" if "SCORE:" in json.dumps(user) else "VERDICT: A"
        return {"choices": [{"message": {"content": f"Fine.\n{answer}"}}], "usage": {}}

    async def models(self, index: int, timeout_s: float) -> dict:
        return {"data": [{"id": "judge"}]}

    async def close(self) -> None:
        return None

    def user_texts(self) -> list[str]:
        return [json.dumps(b["messages"][-1]["content"]) for b in self.bodies]


@pytest.fixture
def model_judge():
    """A real openai judge whose requests land in a RecordingTransport; yields (build(task), transports)."""
    built: list[OpenAIJudge] = []

    def build(task: str) -> tuple[OpenAIJudge, RecordingTransport]:
        judge = OpenAIJudge(OpenAIJudgeConfig(api_key_env="", preflight=False, logprobs=False, constrain="off"), task)
        judge.transport = RecordingTransport()
        built.append(judge)
        return judge, judge.transport

    yield build
    for judge in built:
        judge.close()


def group(prompt: Prompt, *texts: str) -> Group:
    return Group(prompt, [1], [Rollout(t, [1], [0.0], False) for t in texts])


# --- item 3: pointwise grades on equal terms -----------------------------------------------------------------


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_grades_against_the_criteria_of_its_verdicts(task: str) -> None:
    """`auto` finds <task>_pointwise_v1 (not the generic one), and both templates of the task include the same
    criteria file, so a grade and a verdict are asked against the same words."""
    paths = {kind: resolve_template("auto", task, kind) for kind in KINDS}
    assert {kind: path.name for kind, path in paths.items()} == {kind: f"{task}_{kind}_v1.txt" for kind in KINDS}
    pairwise, pointwise = (included_criteria(paths[kind]) for kind in KINDS)
    assert pairwise == pointwise == [f"{task}_criteria_v1"]
    criteria = criteria_text(f"{task}_criteria_v1")
    for kind in KINDS:
        assert criteria in load_template(paths[kind]).user


def test_every_shipped_task_template_takes_its_criteria_from_one_file() -> None:
    """No task template writes criteria of its own: each includes exactly one criteria file, and every
    criteria file is used by a pairwise and a pointwise template."""
    used: dict[str, set[str]] = {}
    for path in TEMPLATES:
        task, kind = path.stem.split("_")[:2]
        if task == "generic":
            assert included_criteria(path) == [] and "$criteria" in path.read_text()
            continue
        (name,) = included_criteria(path)
        used.setdefault(name, set()).add(kind)
    assert used == {p.stem: set(KINDS) for p in PROMPTS_DIR.glob("*_criteria_v*.txt")}


def test_editing_a_criteria_file_changes_the_template_identity(tmp_path, monkeypatch) -> None:
    """The cache key covers the criteria: the same template file with other criteria is another template."""
    import tsrl.judging.prompting as prompting

    path = tmp_path / "humor_pointwise_v1.txt"
    path.write_text(resolve_template("auto", "humor", "pointwise").read_text())
    before = load_template(path)
    (tmp_path / "humor_criteria_v1.txt").write_text("1. Shorter wins.\n")
    monkeypatch.setattr(prompting, "PROMPTS_DIR", tmp_path)
    after = load_template(path)
    assert "1. Shorter wins." in after.user and after.name == before.name and after.digest != before.digest


def test_a_missing_criteria_file_names_the_shipped_ones(tmp_path) -> None:
    from tsrl.errors import ConfigError

    own = tmp_path / "mine.txt"
    own.write_text("Judge.\n---user---\n$prompt\n{{nowhere_criteria_v9}}\n$response_a\n")
    with pytest.raises(ConfigError, match=r"nowhere_criteria_v9.*humor_criteria_v1"):
        load_template(own)
    own.write_text("Judge.\n---user---\nCost: $5.\n{{humor_criteria_v1}}\n")
    assert criteria_text("humor_criteria_v1") in load_template(own).user  # shipped criteria reach a user's template


POINTWISE_REGIMES = [("rubric", task) for task in ("humor", "stories", "web", "counseling")] + [
    (regime, task) for regime in ("rlaif", "adaptive_pointwise") for task in ("aime", "gpqa")
]


@pytest.mark.parametrize("regime, task", POINTWISE_REGIMES)
def test_pointwise_regimes_ask_the_model_judge_with_the_task_criteria(model_judge, regime: str, task: str) -> None:
    """Rubric, RLAIF and Adaptive Pointwise grade through the judge's `auto` pointwise template: the request the
    model judge receives holds the task's criteria (the same as its verdicts'), not the generic ones."""
    judge, transport = model_judge(task)
    prompt = build_task(TASKS[task]()).prompts("train")[0]
    ctx = RegimeContext(build_task(TASKS[task]()), judge, "j", None)
    made = {
        "rubric": lambda: RubricRegime(RubricConfig(), ctx),
        "rlaif": lambda: RubricRegime(RLAIFConfig(), ctx),
        "adaptive_pointwise": lambda: AdaptiveRegime(AdaptiveConfig(tournament="pointwise"), ctx),
    }[regime]()
    batch = made.score([group(prompt, "first try", "second try")])  # neither passes a verifier: graded
    assert np.allclose(batch.rewards, 0.7)
    criteria = json.dumps(criteria_text(f"{task}_criteria_v1"))[1:-1]
    assert len(transport.bodies) == 2
    assert all(criteria in text and json.dumps(GENERIC_CRITERIA)[1:-1] not in text for text in transport.user_texts())


class TableRenderer:
    """Screenshots from a table (page → Rendering); records each batch it is asked to render."""

    def __init__(self, table: dict[str, Rendering]) -> None:
        self.table, self.batches = table, []

    def render_many(self, pages: Sequence[str]) -> list[Rendering]:
        self.batches.append(list(pages))
        return [self.table[p] for p in pages]

    def close(self) -> None:
        pass


class GradingJudge:
    """Grades 6, records the grade requests."""

    def __init__(self) -> None:
        self.requests: list[ScoreRequest] = []

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        raise AssertionError("grading only")

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        self.requests += requests
        return [Score(6.0) for _ in requests]

    def drain_metrics(self) -> dict[str, float]:
        return {}


def test_a_web_page_is_graded_on_its_screenshot_and_a_broken_one_gets_zero() -> None:
    """As a verdict does: the page is rendered (once however often it is graded), the judge is asked with the
    extracted page and its screenshot, and a page that fails to render gets 0 without a call, reason kept."""
    shots = {
        "<p>a</p>": Rendering("/shots/a.png", None, 1.0),
        "<p>slow</p>": Rendering(None, "timeout: no screenshot after 20 s", 20.0),
    }
    inner, renderer = GradingJudge(), TableRenderer(shots)
    judge = RenderingJudge(inner, extract_page, renderer)
    prompt = Prompt("p", "A page.")
    grades = judge.score(
        [ScoreRequest(prompt, f"```html\n{page}\n```") for page in ("<p>a</p>", "<p>slow</p>", "<p>a</p>")]
    )
    assert renderer.batches == [["<p>a</p>", "<p>slow</p>"]]
    assert [g.value for g in grades] == [6.0, 0.0, 6.0] and grades[1].error is None
    assert grades[1].raw == "render failed: timeout: no screenshot after 20 s"
    assert [r.response for r in inner.requests] == ["<p>a</p>", "<p>a</p>"]
    assert [r.image for r in inner.requests] == ["/shots/a.png"] * 2
    metrics = judge.drain_metrics()
    assert metrics["render/pages"] == 2 and metrics["render/failures/timeout"] == 1


def test_a_vision_judge_receives_the_screenshot_of_the_graded_page() -> None:
    """judge=openai with vision=true sends a grade's screenshot as an image part, as it does a pair's; without
    vision the grade request is text only (a text judge reads the HTML)."""
    shot = "data:image/png;base64,iVBORw0KGgo="
    for vision, parts in ((True, 1), (False, 0)):
        judge = OpenAIJudge(
            OpenAIJudgeConfig(api_key_env="", preflight=False, logprobs=False, vision=vision, constrain="off"), "web"
        )
        judge.transport = transport = RecordingTransport()
        try:
            assert judge.score([ScoreRequest(Prompt("p", "A page."), "<p>a</p>", image=shot)])[0].value == 7.0
        finally:
            judge.close()
        content = transport.bodies[0]["messages"][-1]["content"]
        images = [p for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []
        assert len(images) == parts and all(p["image_url"]["url"] == shot for p in images)


# --- item 5: no simulator feature in what the judge or the policy reads ------------------------------------


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_no_shipped_template_states_a_simulator_feature(path: Path) -> None:
    """The criteria come from the tasks (a joke using two words, a story for a premise, a page for a
    description, a counseling reply, sound reasoning), never from the simulated qualities' features."""
    template = load_template(path)
    text = f"{template.system}\n{template.user}"
    assert not LENGTH.search(text), LENGTH.search(text)
    assert not [f for f in SIMULATOR_FEATURES if f in text.lower()]


@pytest.mark.parametrize("task", sorted(TASKS))
def test_no_shipped_prompt_tells_the_policy_a_length(task: str) -> None:
    loaded = build_task(TASKS[task]())
    found = [
        (p.id, m.group())
        for split in ("train", "eval")
        for p in loaded.prompts(split)
        for m in [LENGTH.search(p.text)]
        if m
    ]
    assert not found, found[:3]


# --- item 6: reasoning traces, judged without the answer key ---------------------------------------------

TRACES = [
    "Let n be the count. Since 6 divides n, n = 6k, so k = 19. The answer is \\boxed{114}.",
    "We guess. The answer is \\boxed{114}.",
    "Try small cases: 1, 2, 3. Hence the pattern holds, therefore the answer is (C).\n\\boxed{C}",
    "Because the field is uniform, E = V/d = 5. So the answer is \\boxed{B}.",
    "I am not sure.",
]


@pytest.mark.parametrize("task, wrong", [("aime", 0), ("aime", 114), ("gpqa", "A"), ("gpqa", "C")])
def test_the_simulated_judge_of_a_trace_never_reads_the_answer_key(task: str, wrong: Any) -> None:
    """Verdicts and grades are the same whatever answer the prompt stores (right, or changed to another); only
    the verifier reads it."""
    loaded = build_task(TASKS[task]())
    judge = SimulatedJudge(RubricSimConfig(), loaded.quality)
    for prompt in loaded.prompts("train")[:8]:
        keyed = [prompt, replace(prompt, fields={**prompt.fields, "answer": wrong})]
        pairs = [
            [PairRequest(p, a, b) for a in TRACES for b in TRACES if a != b]
            + [PairRequest(p, prompt.anchors[0].text, t) for t in TRACES]
            for p in keyed
        ]
        verdicts = [[v.p_first for v in judge.compare(batch)] for batch in pairs]
        grades = [
            [s.value for s in judge.score([ScoreRequest(p, t) for t in [*TRACES, prompt.anchors[0].text]])]
            for p in keyed
        ]
        assert verdicts[0] == verdicts[1] and grades[0] == grades[1]
        assert [loaded.quality(keyed[0], t) for t in TRACES] == [loaded.quality(keyed[1], t) for t in TRACES]


@pytest.mark.parametrize("task", ["aime", "gpqa"])
def test_the_reasoning_templates_judge_reasoning_and_hold_no_answer(model_judge, task: str) -> None:
    """What the model judge reads for a pair and for a grade: the task's reasoning criteria, no answer key and
    no criterion that the final answer be right."""
    judge, transport = model_judge(task)
    key = "KEY-737"  # a stored answer no template, prompt or response could contain by chance
    prompt = Prompt("p", "Find the number of widgets.", fields={"answer": key})
    first, second = "Since w = 3, w + 4 = 7.", "Because w is odd, w = 3."
    judge.compare([PairRequest(prompt, first, second)])
    judge.score([ScoreRequest(prompt, first)])
    texts = [json.dumps(b["messages"]) for b in transport.bodies]
    assert len(texts) == 2 and not [t for t in texts if key in t]
    for kind in KINDS:
        user = load_template(resolve_template("auto", task, kind)).user.lower()
        assert "reasoning" in user and "no answer key" in user
        criteria = [line for line in user.splitlines() if re.match(r"\d+\. ", line)]
        assert len(criteria) >= 2 and not [
            line
            for line in criteria
            if re.search(  # no "the final answer is right"
                r"(?:answer|option|letter|choice)\b[^.\n]*\b(?:is|are) (?:right|correct)\b", line
            )
        ]
