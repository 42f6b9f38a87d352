"""``python -m tinyplm.cli``: the command line."""

from tinyplm.cli import main

main()
