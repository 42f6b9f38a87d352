"""tinyplm: pretrained language models on low resources.

Fine-tune a BERT-family teacher, distil it into smaller students, compress them and measure the
trade-off side by side. The stages live in one folder each (see ``../shared/DESIGN.md``); which
package may import which is the table in ``tests/test_layering.py``, and nowhere else.
"""

__version__ = "0.1.0"
