"""setup.json's machine record: where a run ran (the same recipe builds another tiny policy on another CPU), read
back by tsrl-reproduce to name the machines of runs it will not compare; a /proc it cannot read costs the CPU's
name from /proc/cpuinfo only, never the run."""

from __future__ import annotations

import platform
from pathlib import Path

import torch

from tsrl.training import setup


def test_the_machine_record_names_the_cpu_torchs_kernels_version_threads_and_platform():
    machine = setup.machine_record()
    assert machine["cpu"] and machine["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert machine["torch"] == torch.__version__ and machine["threads"] == torch.get_num_threads()
    assert machine["platform"] == platform.machine()


def test_an_unreadable_proc_falls_back_to_the_platforms_processor(monkeypatch):
    read_text = Path.read_text

    def unreadable(path: Path, *args, **kwargs) -> str:
        if str(path) == "/proc/cpuinfo":
            raise PermissionError(13, "Permission denied", str(path))
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", unreadable)
    machine = setup.machine_record()
    assert machine["cpu"] == platform.processor() and machine["cpu_capability"]
