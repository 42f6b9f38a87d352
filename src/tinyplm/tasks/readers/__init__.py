"""One reader per input format, for training, evaluation and prediction alike.

=============  ==============================================  =========================================
format         reader                                          read by
=============  ==============================================  =========================================
GLUE TSV, CSV  :func:`.table.read_table` (header or not)       GLUE, custom CSV, Goodreads CSV, TV Tropes
               -> :func:`.fields.sequence_rows`                and ``tinyplm predict`` (csv, tsv)
JSON lines     :func:`.jsonl.read_json_lines`                  custom JSONL and ``predict`` (jsonl)
               -> :func:`.fields.sequence_rows`
reviews        :func:`.jsonl.read_json_lines`                  ``goodreads_spoilers_reviews`` and
               -> :func:`.reviews.read_review`                 ``predict`` (reviews)
SQuAD JSON     :func:`tinyplm.tasks.squad.squad_articles`      SQuAD tasks and ``predict`` (squad)
CoNLL          :func:`tinyplm.tasks.conll.conll_rows`          CoNLL-2003 and ``predict`` (conll)
plain text     :func:`.plain.read_text_lines`                  ``predict`` (text)
scored pairs   :func:`.pairs.read_pair_rows`                   ``tinyplm embed-eval --pairs``
               (CSV/TSV with a header, or JSON lines)          (:func:`tinyplm.tasks.retrieval.read_pairs`)
BEIR folder    :func:`.beir.read_records`,                     ``tinyplm embed-eval --beir``
               :func:`.beir.read_judgments`                    (:func:`tinyplm.tasks.retrieval.read_beir`)
=============  ==============================================  =========================================

Every reader takes decoded lines (:func:`.rows.decoded_lines`: a file, stdin, any byte stream) and
yields :class:`.rows.Row` records in file order, a bad record as a row with its error (file:line
and what was expected). What differs between training and prediction is a
:class:`.rows.Policy`: training raises on the first bad row and requires labels; prediction skips
and records bad rows and reads labels only where present. What is done to a text before a model
sees it (spoiler markup gaps closed, the sentences around it as its context) is
:func:`.text.prepared`, called by both. :mod:`.formats` maps file suffixes to formats.
"""
