"""The classic models (pre-transformer language models), as students measured beside the transformers.

TF-IDF + logistic regression (:mod:`.tfidf`), LSTM/BiLSTM classifiers over word embeddings that
are random, word2vec or GloVe (:mod:`.lstm`, :mod:`.vectors`), a BiLSTM over a frozen
transformer's last hidden layers (:mod:`.features`), and static students over the teacher's word
pieces, a weighted bag or a 1-D CNN over a table made from the teacher (:mod:`.static`,
:mod:`.static_init`). Each takes word (or n-gram) ids from its own :class:`~.words.WordTokenizer`
(the feature-based and static ones: the transformer's tokenizer), answers
``model(input_ids, attention_mask, token_type_ids).logits`` like a ``transformers`` classifier,
and saves as config.json + model.safetensors + its vocabulary (:mod:`.io`).
"""

from tinyplm.models.classic.config import ARCHS, MODEL_TYPE, FamilyConfig, family_shape
from tinyplm.models.classic.io import build_module, is_family, is_family_dir, load_family, save_family
from tinyplm.models.classic.words import WordTokenizer

__all__ = ["ARCHS", "MODEL_TYPE", "FamilyConfig", "WordTokenizer", "build_module", "family_shape", "is_family",
           "is_family_dir", "load_family", "save_family"]
