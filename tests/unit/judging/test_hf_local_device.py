"""judge=hf_local is built before the accelerator sets each process's GPU: its device must be the process's own
(LOCAL_RANK modulo the visible GPUs, as accelerate places the policy), not GPU 0 for every process."""

import pytest

from tsrl.judging.hf_local import judge_device


@pytest.mark.parametrize(
    "setting, env, gpus, expected",
    [
        ("auto", {"LOCAL_RANK": "3"}, 8, "cuda:3"),
        ("auto", {"LOCAL_RANK": "1"}, 2, "cuda:1"),
        ("auto", {"LOCAL_RANK": "5"}, 4, "cuda:1"),  # more processes than visible GPUs: accelerate's modulo
        ("auto", {"LOCAL_RANK": "2"}, 1, "cuda:0"),  # one GPU made visible to each process
        ("auto", {}, 8, "cuda:0"),  # one process, no launcher
        ("cuda", {"LOCAL_RANK": "3"}, 8, "cuda:3"),
        ("auto", {"LOCAL_RANK": "3"}, 0, "cpu"),
        ("cpu", {"LOCAL_RANK": "3"}, 8, "cpu"),
        ("cuda:5", {"LOCAL_RANK": "3"}, 8, "cuda:5"),  # an explicit GPU is kept
    ],
)
def test_each_process_judges_on_its_own_device(setting, env, gpus, expected):
    assert judge_device(setting, env, gpus) == expected
