"""The Makefile's pytest-xdist options keep a test file on one worker, so a module's fixtures
(a run trained once for a file's tests) are built once. Under pytest 9, ``--dist loadgroup`` with a
group per file no longer did: pytest-xdist 3.8 suffixes ``item._nodeid`` with the group, which
pytest 9 no longer reads, and every worker built every file's module fixtures."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MODULE = '''
import os
import pytest

@pytest.fixture(scope="module")
def built():
    with open(os.environ["SETUPS"], "a", encoding="utf-8") as log:
        log.write(f"{__name__} {os.environ.get('PYTEST_XDIST_WORKER')}\\n")
    return 1

@pytest.mark.parametrize("i", range(6))
def test_case(built, i):
    assert built == 1 and i >= 0
'''


def _make_options(workers: str) -> list[str]:
    """The Makefile's ``XDIST`` options, with its worker count set to ``workers``."""
    line = re.search(r"^XDIST := (.+)$", (REPO / "Makefile").read_text(encoding="utf-8"), re.M)
    assert line, "the Makefile defines no XDIST"
    return shlex.split(line.group(1).replace("$(TEST_WORKERS)", workers))


def test_the_makefiles_workers_build_a_files_module_fixtures_once(tmp_path: Path) -> None:
    for name in ("test_one.py", "test_two.py"):
        (tmp_path / name).write_text(MODULE, encoding="utf-8")
    setups = tmp_path / "setups.txt"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_make_options("2"),
                           "--rootdir", str(tmp_path), str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "SETUPS": str(setups)}, timeout=300)
    assert done.returncode == 0 and "12 passed" in done.stdout, done.stdout + done.stderr
    lines = setups.read_text(encoding="utf-8").splitlines()
    assert sorted(line.split()[0] for line in lines) == ["test_one", "test_two"], lines
