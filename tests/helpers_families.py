"""Tiny random models of every encoder family in the role table, with tiny tokenizers of the kind
each family ships (WordPiece, byte-level BPE, SentencePiece-style Unigram), built from config
classes and the ``tokenizers`` library alone: nothing is downloaded.

Every tokenizer puts its specials first in RoBERTa's order (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2,
``<unk>`` 3, ``<mask>`` 4): MPNet's embeddings assume padding id 1, and the others read theirs
from the config, which is set to match.
"""

from __future__ import annotations

import string
from pathlib import Path

from conftest import WORDS, tiny_sentiment_rows

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
#: family (config.model_type) -> the kind of tokenizer it ships.
TOKENIZER_KIND = {"distilbert": "wordpiece", "electra": "wordpiece", "mpnet": "wordpiece", "xlm-roberta": "unigram",
                  "camembert": "unigram", "albert": "unigram", "modernbert": "bpe"}
FAMILIES = tuple(TOKENIZER_KIND)
#: The shape of every tiny model (ELECTRA and ALBERT: embedding size 16 < hidden 32).
HIDDEN, HEADS, FFN, LAYERS, EMBED = 32, 4, 37, 3, 16


def _texts() -> list[str]:
    return [t for t, _ in tiny_sentiment_rows(200, 5)] + [" ".join(WORDS)]


def tiny_tokenizer(kind: str):
    """A fast tokenizer of ``kind`` (wordpiece, bpe, unigram) trained on (or listing) the toy words,
    adding ``<s> A </s>`` and ``<s> A </s> B </s>``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "wordpiece":
        vocab = list(dict.fromkeys(SPECIALS + WORDS + list(string.ascii_lowercase)
                                   + ["##" + c for c in string.ascii_lowercase] + list(".,!?'-")))
        tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="<unk>"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
    elif kind == "bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(_texts(), trainers.BpeTrainer(
            vocab_size=330, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    elif kind == "unigram":
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        tok.train_from_iterator(_texts(), trainers.UnigramTrainer(vocab_size=120, special_tokens=SPECIALS,
                                                                  unk_token="<unk>"))
    else:
        raise ValueError(kind)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1", special_tokens=[("<s>", 0), ("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", cls_token="<s>",
                                   sep_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")


def tiny_config(family: str, vocab_size: int, num_labels: int = 2):
    """A tiny config of ``family`` (hidden 32, 3 layers, 4 heads, FFN 37) for ``vocab_size`` pieces."""
    import transformers as tf

    ids = {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "num_labels": num_labels}
    common = {"vocab_size": vocab_size, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "intermediate_size": FFN, "max_position_embeddings": 66, **ids}
    if family == "distilbert":
        return tf.DistilBertConfig(vocab_size=vocab_size, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN,
                                   max_position_embeddings=64, **ids)
    if family == "modernbert":  # layers 0 and 2 global, 1 local (window 8)
        return tf.ModernBertConfig(**common, global_attn_every_n_layers=2, local_attention=8, cls_token_id=0,
                                   sep_token_id=2)
    extra = {"electra": {"embedding_size": EMBED}, "albert": {"embedding_size": EMBED, "num_hidden_groups": 1}}
    classes = {"mpnet": tf.MPNetConfig, "electra": tf.ElectraConfig, "xlm-roberta": tf.XLMRobertaConfig,
               "camembert": tf.CamembertConfig, "albert": tf.AlbertConfig}
    return classes[family](**common, **extra.get(family, {}))


def make_family_dir(path: Path, family: str, seed: int = 0) -> Path:
    """Save a tiny random ``family`` sequence classifier (2 labels) and its tokenizer in HF format."""
    import torch
    from transformers import AutoModelForSequenceClassification

    tok = tiny_tokenizer(TOKENIZER_KIND[family])
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(tiny_config(family, len(tok)))
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
