"""tinyplm: pretrained language models on low resources.

Fine-tune a BERT-family teacher, distil it into smaller students, compress them and measure the
trade-off side by side. The stages live in one folder each (see ``../shared/DESIGN.md``)::

    config <- tasks <- models <- distill <- evaluate <- report <- run <- cli
"""

__version__ = "0.1.0"
