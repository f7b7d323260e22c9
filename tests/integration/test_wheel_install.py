"""A wheel of the project, installed into a fresh venv, runs `tsrl-train` from an unrelated directory.

The venv sees this environment's dependencies through a .pth file naming its site-packages folders (plain
path lines: the .pth files in them, the editable install's finder among them, are not run), so nothing is
downloaded and the tsrl it imports is the wheel's. configs/ and recipes/ must come with the wheel.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tsrl.testing.cli import TINY, cli_env

pytestmark = pytest.mark.slow
pytest.importorskip("setuptools", reason="the wheel is built without build isolation, from this environment")

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """A command with the test environment minus anything that would point it back at the source tree."""
    env = {k: v for k, v in cli_env().items() if k not in ("PYTHONPATH", "TSRL_RECIPES_ROOT", "VIRTUAL_ENV")}
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, (result.args, result.stdout[-2000:], result.stderr[-3000:])
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the project (a build leaves build/ and egg-info in the tree it reads)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("tsrl", "configs", "recipes"):
        shutil.copytree(ROOT / name, src / name, ignore=skip)
    ok(
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "-w",
                str(tmp / "dist"),
                str(src),
            ],
            tmp,
        )
    )
    (built,) = (tmp / "dist").glob("tsrl-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv holding only the wheel; dependencies come from this environment's site-packages."""
    venv = tmp_path_factory.mktemp("install") / "venv"
    ok(run([sys.executable, "-m", "venv", str(venv)], venv.parent))
    python = str(venv / "bin" / "python")
    site = ok(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], venv)).stdout
    ours = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    (Path(site.strip()) / "tsrl_test_dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    ok(
        run(
            [
                python,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                "-c",
                str(ROOT / "constraints.txt"),
                str(wheel),
            ],
            venv,
        )
    )
    return venv


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A working directory with no configs/ or recipes/ in it or above it."""
    return tmp_path


def test_wheel_holds_every_module_data_file_config_and_recipe(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tsrl").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    expected |= {"tsrl/" + p.relative_to(ROOT).as_posix() for p in (ROOT / "configs").rglob("*.yaml")}
    expected |= {"tsrl/configs/" + p.relative_to(ROOT).as_posix() for p in (ROOT / "recipes").rglob("*.yaml")}
    missing = sorted(expected - names)
    assert not missing, f"not in the wheel (list the package in pyproject's [tool.setuptools]): {missing}"
    assert not any(n.startswith(("configs/", "recipes/", "conf/")) for n in names)


def test_the_venv_imports_the_wheel_not_the_source_tree(venv, elsewhere):
    code = "import tsrl.configs; print(tsrl.__file__)"
    where = ok(run([str(venv / "bin" / "python"), "-c", code], elsewhere))
    assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve()), where.stdout


def test_config_and_recipe_compose_from_another_directory(venv, elsewhere):
    train = str(venv / "bin" / "tsrl-train")
    plain = ok(run([train, "--cfg", "job"], elsewhere)).stdout
    assert "reward:" in plain and "trainer:" in plain and "mask_truncated: false" in plain
    demo = ok(run([train, "recipes=cpu_demo", "--cfg", "job"], elsewhere)).stdout
    assert "mask_truncated: true" in demo


def test_misspelled_recipe_fails_in_one_sentence(venv, elsewhere):
    result = run([str(venv / "bin" / "tsrl-train"), "recipes=cpu_dmeo", "--cfg", "job"], elsewhere)
    assert result.returncode == 2, result.stderr
    recipes = next(venv.rglob("site-packages/tsrl/configs/recipes"))
    shipped = ", ".join(sorted(p.stem for p in (ROOT / "recipes").glob("*.yaml")))
    assert result.stderr.strip() == (
        f"tsrl: error: recipes=cpu_dmeo is not a recipe; the recipes are: {shipped} (from {recipes})."
    )


def test_config_dir_adds_the_users_recipes(venv, elsewhere):
    mine = elsewhere / "myconf" / "recipes"
    mine.mkdir(parents=True)
    (mine / "short.yaml").write_text("# @package _global_\ntrainer:\n  max_steps: 7\n")
    train = str(venv / "bin" / "tsrl-train")
    composed = ok(run([train, "--config-dir", "myconf", "recipes=short", "--cfg", "job"], elsewhere)).stdout
    assert "max_steps: 7" in composed
    assert (
        "mask_truncated: true"
        in ok(run([train, "-cd", "myconf", "recipes=cpu_demo", "--cfg", "job"], elsewhere)).stdout
    )
    wrong = run([train, "--config-dir", "myconf", "recipes=shrot", "--cfg", "job"], elsewhere)
    assert wrong.returncode == 2 and "the recipes are: short (from " in wrong.stderr, wrong.stderr
    assert "cpu_demo, smollm2_humor (from " in wrong.stderr and "Traceback" not in wrong.stderr


def test_two_training_steps_from_the_wheel(venv, elsewhere):
    small = [
        f"model.cache_dir={elsewhere / 'models'}",
        *TINY,
        f"reward.ladder_dir={elsewhere / 'ladders'}",
        "trainer.max_steps=2",
        "trainer.eval.max_prompts=2",
        f"run_dir={elsewhere / 'run'}",
    ]
    result = ok(run([str(venv / "bin" / "tsrl-train"), "recipes=cpu_demo", *small], elsewhere))
    metrics = (elsewhere / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in metrics] == [1, 2]
    assert "held-out win-rate vs reference anchors" in result.stdout


def test_launcher_files_resolve_to_the_installed_package(venv, elsewhere):
    """`tsrl-configs NAME` from another directory: an accelerate file whose DeepSpeed JSON is the wheel's."""
    command = [str(venv / "bin" / "tsrl-configs"), "accelerate/gpu8_zero3.yaml"]
    printed = ok(run(["env", f"XDG_CACHE_HOME={elsewhere / 'cache'}", *command], elsewhere)).stdout.strip()
    assert Path(printed) == elsewhere / "cache" / "tsrl" / "configs" / "accelerate" / "gpu8_zero3.yaml"
    (line,) = [line for line in Path(printed).read_text().splitlines() if "deepspeed_config_file:" in line]
    json_file = Path(json.loads(line.split(":", 1)[1]))
    assert json_file == next(venv.rglob("site-packages/tsrl/configs/deepspeed/zero3_bf16.json"))
    listed = ok(run([command[0]], elsewhere)).stdout
    assert "deepspeed/zero3_bf16.json" in listed and str(json_file.parents[1]) in listed
