"""Pre-training helpers: unlabelled corpora and the masked-LM head used for data augmentation."""

from tinyplm.pretrain.corpus import read_corpus, split_holdout, strip_gutenberg
from tinyplm.pretrain.mlm_head import fit_mlm_head, has_mlm_head, load_mlm

__all__ = ["fit_mlm_head", "has_mlm_head", "load_mlm", "read_corpus", "split_holdout", "strip_gutenberg"]
