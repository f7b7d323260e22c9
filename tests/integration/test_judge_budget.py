"""judge.budget's run caps against the loopback OpenAI-compatible server, counted by the server itself: a run whose
estimate passes a cap (calls or dollars) is refused before its first request (and before building its policy, which
its estimate names), a run within its cap sends exactly the calls it reports (held-out evaluation included), and with
judge.budget.allow_partial a cap stops the run where the evaluation's calls spend it."""

from __future__ import annotations

import json
import re

import pytest

from tsrl.testing.cli import TINY, printed_spend, read_metrics
from tsrl.testing.judge_client import KEY_ENV
from tsrl.testing.judge_server import JudgeServer

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("api_key")]

PRICED = ["judge.price_in_per_m=1.0", "judge.price_out_per_m=1.0"]  # $1 per million tokens either way


@pytest.fixture
def train(cli, cache_dir, tmp_path):
    """tsrl-train on the tiny policy with the openai judge on `server`: one step of an in-batch round-robin (no
    ladder to rank first) and two held-out evaluations of 4 prompts; extra overrides win."""

    def call(server: JudgeServer, name: str, *overrides: str):
        return cli(
            [
                *TINY,
                f"model.cache_dir={cache_dir / 'models'}",
                "trainer.eval.max_prompts=4",
                "judge=openai",
                f"judge.base_urls=[{server.url}]",
                f"judge.api_key_env={KEY_ENV}",
                "judge.constrain=off",  # no structured-output probe: every request is a judge call
                "reward=in_batch",
                "trainer.max_steps=1",
                f"run_dir={tmp_path / name}",
                *overrides,
            ],
            tmp_path,
        )

    return call


def reported_calls(run) -> float:
    """Every judge call the run reports: setup, its training steps and its held-out evaluations."""
    setup = json.loads((run / "setup.json").read_text())["judge_calls_setup"]
    evaluations = json.loads((run / "eval.json").read_text())["history"]
    return setup + sum(r["judge/calls"] for r in read_metrics(run)) + sum(e["judge_calls"] for e in evaluations)


def test_a_run_over_a_call_cap_is_refused_unasked_and_one_within_it_sends_what_it_reports(train, tmp_path):
    with JudgeServer() as server:
        unbuilt = f"model.cache_dir={tmp_path / 'unbuilt'}"  # the estimate says the build it refuses before
        refused = train(server, "refused", "judge.budget.max_calls_per_run=50", unbuilt)
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert server.stats["requests"] == 0 and server.stats["models_requests"] == 0  # not even the preflight
        assert (
            "to build first: the tiny policy for task=humor" in refused.stdout and not (tmp_path / "unbuilt").exists()
        )
        estimate = printed_spend(refused.stdout)["run"][1]
        message = refused.stderr.strip().splitlines()[-1]
        assert f"an estimate of {estimate:,} calls against judge.budget.max_calls_per_run=50" in message
        assert "judge.budget.allow_partial=true" in message and "Traceback" not in refused.stderr
        assert "evaluation" in refused.stdout.split("caps:")[1].splitlines()[0]  # the start message says it counts
        within = train(server, "within", f"judge.budget.max_calls_per_run={estimate}")
        assert within.returncode == 0, within.stderr[-3000:]
        assert server.stats["requests"] == reported_calls(tmp_path / "within") == estimate


def test_evaluation_calls_count_against_the_cap_of_a_partial_run(train, tmp_path):
    """A cap one call short of the estimate, allowed to start: the training step fits, the final evaluation does
    not; the stop names the calls made, evaluation included, which are the server's."""
    with JudgeServer() as server:
        whole = train(server, "whole")
        assert whole.returncode == 0, whole.stderr[-3000:]
        estimate = printed_spend(whole.stdout)["run"][1]
        server.stats.clear()
        cap = [f"judge.budget.max_calls_per_run={estimate - 1}", "judge.budget.allow_partial=true"]
        partial = train(server, "partial", *cap)
        assert partial.returncode == 2, partial.stderr[-3000:]
        made = re.search(r"Judge budget spent: (\d+) calls made", partial.stderr)
        assert made and int(made.group(1)) == server.stats["requests"] < estimate
        assert [r["step"] for r in read_metrics(tmp_path / "partial")] == [1]


def test_a_money_cap_refuses_an_estimate_over_it_and_stops_a_partial_run_once_spent(train, tmp_path):
    with JudgeServer() as server:
        refused = train(server, "refused", *PRICED, "judge.budget.max_usd_per_run=0.01")
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert server.stats["requests"] == 0
        assert re.search(r"an estimate of \$0\.\d\d against judge\.budget\.max_usd_per_run=0\.01", refused.stderr)
        partial = train(
            server, "partial", *PRICED, "judge.budget.max_usd_per_run=0.0001", "judge.budget.allow_partial=true"
        )
        assert partial.returncode == 2, partial.stderr[-3000:]
        assert "judge.budget.max_usd_per_run=0.0001" in partial.stderr.strip().splitlines()[-1]
        assert 0 < server.stats["requests"] < printed_spend(partial.stdout)["run"][1]
        unpriced = train(server, "unpriced", "judge.budget.max_usd_per_run=5")
        assert unpriced.returncode == 2 and "set judge.price_in_per_m and judge.price_out_per_m" in unpriced.stderr
