"""The ``tinyplm`` command line: the app and its shared options (``cli.app``) and one module per
command, named for it (``tinyplm fit-mlm-head``: cli/fit_mlm_head.py; ``tinyplm tokenizer train``:
cli/tokenizer.py). Importing this package registers every command, in the order ``--help`` lists
them; ``main`` is the entry point."""

# The import order is the order of the commands in --help.
# isort: off
from tinyplm.cli import (  # noqa: F401
    run, finetune, distill, evaluate, embed, bench, report, tasks, probe, heads, fit_mlm_head, augment, tokenizer,
    pretrain, export, predict, serve, sweep,
)
# isort: on
from tinyplm.cli.app import app, main

__all__ = ["app", "main"]
