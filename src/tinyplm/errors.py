"""Error types a user can act on.

Every error raised for bad input (a file, a line, a recipe key, a model directory) is a
:class:`TinyplmError`. The CLI prints its message without a traceback and exits with code 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TinyplmError(ValueError):
    """Bad input: the message names the file, line or key and what was expected."""


class DataError(TinyplmError):
    """A data file is missing, empty or malformed (message names file and line)."""


class RecipeError(TinyplmError):
    """A recipe key is unknown, misspelled or has a value of the wrong type."""


class ModelError(TinyplmError):
    """A model or tokenizer directory cannot be used (missing config or weights, vocab mismatch)."""


class RunDirError(TinyplmError):
    """A run directory already holds a finished (or unfinished) run."""


class Interrupted(Exception):
    """Training stopped on SIGINT or SIGTERM after writing a checkpoint; ``--resume`` continues
    from it. Not a ``TinyplmError``: the input was fine. ``exit_code`` is 128 + the signal number
    (130 for SIGINT, 143 for SIGTERM), as a shell reports a process killed by that signal."""

    def __init__(self, signum: int, step: int, checkpoint: str | None) -> None:
        import signal

        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        name = signal.Signals(signum).name
        where = f"checkpoint {checkpoint}" if checkpoint else "no checkpoint (nothing trained yet)"
        super().__init__(f"{name} at step {step}; saved {where}; continue with --resume")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """Return the closest match to ``word`` among ``choices`` (or None when nothing is close)."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A short suffix for error messages: "; did you mean 'x'?" or "" when nothing is close."""
    best = nearest(word, choices)
    return f"; did you mean '{best}'?" if best else ""
