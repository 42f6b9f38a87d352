"""``python -m tinyplm``: the command line."""

from tinyplm.cli import main

main()
