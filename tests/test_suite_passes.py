"""How ``make test``'s bf16-off pass picks its tests from what the first pass logged (tests/conftest.py):
one per file, the quickest there, every case of the precision file, none of the files it leaves out."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import PRECISION_FILES, SECOND_PASS_SKIPPED, _one_per_file, _timed


def test_the_second_pass_runs_the_quickest_listed_test_of_each_file() -> None:
    precision = PRECISION_FILES[0]
    lines = ["tests/a.py::test_slow\t9.500", "tests/a.py::test_quick\t0.250", "tests/b.py::test_only\t3.000",
             f"{precision}::test_x[on]\t2.000", f"{precision}::test_x[off]\t1.000",
             f"{SECOND_PASS_SKIPPED[0]}::test_real\t0.100", "tests/c.py::test_unknown_time"]
    collected = ["tests/a.py::test_slow", "tests/a.py::test_unlisted", "tests/a.py::test_quick",
                 "tests/b.py::test_only", f"{precision}::test_x[on]", f"{precision}::test_x[off]",
                 f"{SECOND_PASS_SKIPPED[0]}::test_real", "tests/c.py::test_unknown_time", "tests/d.py::test_unlisted"]
    wanted = dict(_timed(line) for line in lines)
    kept = _one_per_file(wanted, [SimpleNamespace(nodeid=n) for n in collected])
    assert kept == {"tests/a.py::test_quick", "tests/b.py::test_only", f"{precision}::test_x[on]",
                    f"{precision}::test_x[off]", "tests/c.py::test_unknown_time"}
    assert _timed("tests/a.py::test_y[a b]\t1.5") == ("tests/a.py::test_y[a b]", 1.5)
