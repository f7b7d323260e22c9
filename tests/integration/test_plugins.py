"""A new regime, judge and loss are one module and one YAML file each: registered from a module outside tsrl
(TSRL_PLUGINS) with YAML files in the user's own config directory (--config-dir), they train through the
real CLI without any other file changing."""

import json
import textwrap

import pytest

from tsrl.testing.cli import TINY, TRAIN, cli_env, read_metrics

pytestmark = pytest.mark.slow

PLUGIN = '''
"""Throwaway components: a regime, a judge and a loss."""
from dataclasses import dataclass

import numpy as np
import torch

from tsrl.algo import AlgoConfig
from tsrl.judging import JudgePolicyConfig, JudgeCounters
from tsrl.registry import ALGOS, JUDGES, REWARDS
from tsrl.types import Count, RewardBatch, Score, Verdict


@dataclass
class LengthConfig:
    """Reward `length_bonus`: longer is better, up to `cap` characters."""

    cap: float = 40.0
    """Characters that earn the full reward."""


class LengthRegime:
    def __init__(self, cfg, ctx):
        self.cfg = cfg

    def score(self, groups):
        lengths = np.array([[len(r.text) for r in g.rollouts] for g in groups], dtype=float)
        rewards = np.minimum(lengths / self.cfg.cap, 1.0)
        return RewardBatch(rewards, {"reward/comparisons_per_sample": 0.0, "length/mean": float(lengths.mean()),
                                     "length/capped": Count((lengths >= self.cfg.cap).sum())})


@dataclass
class ShorterConfig(JudgePolicyConfig):
    """Judge `shorter`: the shorter response wins."""

    margin: int = 0
    """Length difference below which it is a tie."""


class ShorterJudge:
    def __init__(self, cfg):
        self.cfg, self.counters = cfg, JudgeCounters()

    def compare(self, requests):
        out = []
        for r in requests:
            gap = len(r.second) - len(r.first)
            out.append(Verdict(0.5 if abs(gap) <= self.cfg.margin else float(gap > 0)))
        self.counters.record(out)
        return out

    def score(self, requests):
        return [Score(5.0) for _ in requests]

    def drain_metrics(self):
        return self.counters.drain()


@dataclass
class ReinforceConfig(AlgoConfig):
    """Algo `reinforce`: −A·log π per token (no ratio, no clip)."""

    advantage_scale: float = 1.0
    """Multiplies every advantage."""


def reinforce(inp, cfg):
    per_token = -cfg.advantage_scale * inp.advantages.unsqueeze(1) * inp.logprobs
    return per_token, torch.zeros_like(per_token)


REWARDS.register("length_bonus", LengthConfig, LengthRegime)
JUDGES.register("shorter", ShorterConfig, lambda cfg, task: ShorterJudge(cfg))
ALGOS.register("reinforce", ReinforceConfig, reinforce)
'''

YAML = {
    "reward/length_bonus.yaml": "defaults:\n  - length_bonus_schema\ncap: 30\n",
    "judge/shorter.yaml": "defaults:\n  - shorter_schema\n",
    "algo/reinforce.yaml": "defaults:\n  - reinforce_schema\nadvantage_scale: 2.0\n",
}


def test_new_regime_judge_and_loss_train_through_the_cli(cache_dir, tmp_path):
    import subprocess

    (tmp_path / "my_components.py").write_text(textwrap.dedent(PLUGIN))
    for name, text in YAML.items():
        (tmp_path / "conf" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / name).write_text(text)
    env = {**cli_env(), "TSRL_PLUGINS": "my_components", "PYTHONPATH": str(tmp_path)}
    common = [f"model.cache_dir={cache_dir / 'models'}", *TINY, "trainer.max_steps=2", "trainer.eval.max_prompts=2"]

    def run(run_dir, *overrides):
        result = subprocess.run(
            [TRAIN, "--config-dir", str(tmp_path / "conf"), *common, f"run_dir={run_dir}", *overrides],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return read_metrics(run_dir)

    rows = run(tmp_path / "a", "reward=length_bonus", "algo=reinforce")
    assert all("length/mean" in r and 0.0 <= r["reward/mean"] <= 1.0 for r in rows)
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["reward"]["cap"] == 30 and config["algo"]["advantage_scale"] == 2.0

    rows = run(tmp_path / "b", "judge=shorter", "reward=in_batch")
    assert all(r["judge/calls"] == 2 * 4 * 3 / 2 for r in rows)  # 2 groups x C(4,2) pairs, one call each
    evaluation = json.loads((tmp_path / "b" / "eval.json").read_text())
    assert evaluation["judge"]["kind"] == "shorter"


def test_an_unimportable_plugin_is_one_sentence(cache_dir, tmp_path):
    import subprocess

    env = {**cli_env(), "TSRL_PLUGINS": "no_such_module_here"}
    result = subprocess.run([TRAIN, "--cfg", "job"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 2
    assert "tsrl plugin module 'no_such_module_here' could not be imported" in result.stderr
    assert "Traceback" not in result.stderr
