"""`tsrl-configs` (tsrl/commands/configs.py): launcher files usable from any directory.

accelerate reads `--config_file` itself, but hands `deepspeed_config_file` on as a string that each process opens
relative to its working directory (transformers' HfDeepSpeedConfig); these tests open the files the same way,
from a directory that holds no configs/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from accelerate.commands.config.config_args import load_config_from_file
from transformers.integrations import HfDeepSpeedConfig

from tsrl.commands.configs import (
    absolute_references,
    configs_root,
    launcher_files,
    listing,
    main,
    usable_path,
)

ROOT = Path(__file__).resolve().parents[3]
ACCELERATE_FILES = sorted(p.relative_to(ROOT / "configs").as_posix() for p in (ROOT / "configs/accelerate").glob("*"))


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with no configs/ folder in it."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def deepspeed_stage(accelerate_file: Path) -> int | None:
    """The ZeRO stage of the DeepSpeed JSON an accelerate file names, opened as the launched processes open it."""
    config = load_config_from_file(str(accelerate_file))
    name = (config.deepspeed_config or {}).get("deepspeed_config_file")
    return None if name is None else HfDeepSpeedConfig(name).config["zero_optimization"]["stage"]


def test_the_shipped_files_name_their_deepspeed_json_relative_to_the_repository_root(elsewhere: Path) -> None:
    """Why the command exists: from another directory the installed gpu8_zero3.yaml cannot be used as it is."""
    with pytest.raises(ValueError, match="existing deepspeed config"):
        deepspeed_stage(configs_root() / "accelerate" / "gpu8_zero3.yaml")


@pytest.mark.parametrize("name", ACCELERATE_FILES)
def test_every_accelerate_file_resolves_from_any_directory(name: str, elsewhere: Path, tmp_path: Path) -> None:
    path = usable_path(name, configs_root(), tmp_path / "cache")
    assert path.is_absolute() and path.is_file()
    names_deepspeed = "deepspeed_config_file" in (ROOT / "configs" / name).read_text()
    assert deepspeed_stage(path) == (3 if names_deepspeed else None)
    if not names_deepspeed:  # nothing to rewrite: the installed file itself
        assert path == configs_root() / name


def test_a_resolved_copy_keeps_every_other_line_and_is_rewritten_only_when_it_changes(tmp_path: Path) -> None:
    root, cache = tmp_path / "configs", tmp_path / "cache"
    (root / "accelerate").mkdir(parents=True)
    (root / "deepspeed").mkdir()
    (root / "deepspeed" / "z.json").write_text('{"zero_optimization": {"stage": 3}}')
    source = root / "accelerate" / "a.yaml"
    source.write_text("# A.\ndeepspeed_config:\n  deepspeed_config_file: configs/deepspeed/z.json  # the JSON\n")
    copy = usable_path("accelerate/a.yaml", root, cache)
    assert copy == cache / "accelerate" / "a.yaml"
    assert copy.read_text().splitlines()[1:] == [
        "# A.",
        "deepspeed_config:",
        f'  deepspeed_config_file: "{root}/deepspeed/z.json"  # the JSON',
    ]
    stamp = copy.stat().st_mtime_ns
    assert usable_path("accelerate/a.yaml", root, cache) == copy and copy.stat().st_mtime_ns == stamp
    source.write_text(source.read_text().replace("z.json", "y.json"))
    assert "y.json" in usable_path("accelerate/a.yaml", root, cache).read_text()


def test_only_repository_relative_configs_paths_are_rewritten(tmp_path: Path) -> None:
    text = (
        "a:\n  deepspeed_config_file: 'configs/deepspeed/z.json'\n"
        "b:\n  deepspeed_config_file: /abs/z.json\n"
        "c:\n  deepspeed_config_file: mine/z.json\n"
    )
    assert absolute_references(text, tmp_path).splitlines() == [
        "a:",
        f'  deepspeed_config_file: "{tmp_path}/deepspeed/z.json"',
        "b:",
        "  deepspeed_config_file: /abs/z.json",
        "c:",
        "  deepspeed_config_file: mine/z.json",
    ]


def test_without_a_name_it_lists_every_launcher_file_with_what_it_is_for(capsys: pytest.CaptureFixture) -> None:
    main([])
    lines = capsys.readouterr().out.splitlines()
    assert lines == listing(configs_root())
    assert launcher_files(configs_root()) == [*ACCELERATE_FILES, "deepspeed/zero3_bf16.json"]
    gpu8 = next(line.split() for line in lines if "gpu8_zero3" in line)
    assert gpu8[0] == "accelerate/gpu8_zero3.yaml" and " ".join(gpu8[1:]) == (
        "Eight GPUs of one machine, DeepSpeed ZeRO-3 in bf16."
    )


def test_an_unknown_name_is_one_sentence_and_exit_status_2(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["accelerate/gpu8.yaml"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("tsrl: error: accelerate/gpu8.yaml is not a launcher file; the files are: accelerate/cpu_ddp")
    assert err.count("\n") == 1
