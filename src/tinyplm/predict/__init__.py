"""``tinyplm predict``: prediction over files (CSV/TSV, JSON lines, SQuAD JSON, CoNLL, reviews,
plain text or stdin), read (``inputs``, ``sources``, ``fields``), predicted in windows through the
:class:`~tinyplm.inference.predictor.Predictor` (``predict``) and written out (``writers``)."""
