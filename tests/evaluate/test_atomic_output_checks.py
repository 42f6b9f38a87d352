"""The early output checks of the commands that write their file atomically (`embed-eval --out`,
`evaluate --predictions`): a stream, which predict writes into, is refused there before any work."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from helpers_cli import assert_bad_input, cli
from tinyplm.errors import TinyplmError
from tinyplm.predict.predict import writable


def test_a_stream_is_refused_first_where_the_file_is_written_atomically(tmp_path: Path) -> None:
    """embed-eval --out and evaluate --predictions write with write_json_atomic, which refuses a
    device or pipe: /dev/null passed their early check, and the refusal came after all the work."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sentence1,sentence2,score\na film,a movie,4.5\na cat,the tax,0.5\n", encoding="utf-8")
    result = cli(["embed-eval", tmp_path / "no-model", "--no-stsb", "--no-squad", "--pairs", pairs,
                  "--out", "/dev/null"], cwd=tmp_path)
    assert_bad_input(result, "--out /dev/null: not a file", "name a file")
    result = cli(["evaluate", tmp_path / "no-model", "--task", "squad", "--predictions", fifo], cwd=tmp_path)
    assert_bad_input(result, f"--predictions {fifo}: not a file", "name a file")
    for path in ("/dev/null", str(fifo), "/dev/stdout"):
        writable(path, "--output")  # predict writes into it
        with pytest.raises(TinyplmError, match=f"--out {re.escape(path)}: not a file"):
            writable(path, "--out", streams=False)
