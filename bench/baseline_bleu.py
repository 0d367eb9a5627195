"""Score translations the way the published Multi30k baseline was scored, to compare with its 41.02.

    python bench/baseline_bleu.py --hypotheses=test.hyp.de [--reference=.../test_2016_flickr.de.gz]
    python bench/baseline_bleu.py --hypotheses=test.hyp.fr --lang=fr

The fairseq `transformer_tiny` baseline of issue #12 (Wu et al., ACL 2021; LividWo/Revisit-MMT,
README-baseline.md) reports fairseq-generate's BLEU4 on its own preprocessed test text: lower-cased and
Moses-tokenized, with no hyphen splitting (its log's reference length, 12,103 tokens, is exactly
test_2016_flickr.de lower-cased and tokenized so; with aggressive hyphen splitting it is 12,243, sacreBLEU's
tok:intl 12,248). fairseq's BLEU4 is plain corpus BLEU on whitespace tokens, which is sacreBLEU with
``tokenize="none"`` on the tokenized text. Prints that score beside kt-evaluate's two (13a cased, intl
lower-cased). Needs sacremoses (``pip install -e ".[bench]"``).
"""

from __future__ import annotations

import sacrebleu
from absl import app, flags
from sacremoses import MosesTokenizer

from keras_transformer.config import DataConfig
from keras_transformer.data import corpora
from keras_transformer.data.files import read_text
from keras_transformer.tasks.translation.metric import TOKENIZED_BLEU

FLAGS = flags.FLAGS


def define_flags():
    """Defined when run as a script only, so that importing the module (its test) defines no flag."""
    flags.DEFINE_string("hypotheses", None, "Translations, one per line (kt-evaluate --hypotheses=...).", required=True)
    flags.DEFINE_string("reference", None, "References (plain or .gz); default: test_2016_flickr.<lang> of the data "
                        "dir.")
    flags.DEFINE_string("lang", "de", "Moses tokenizer language (the target's).")


def moses_lowercase(lines, lang="de"):
    """Lower-cased, Moses-tokenized lines (no aggressive hyphen splitting, no XML escaping)."""
    tokenizer = MosesTokenizer(lang=lang)
    return [tokenizer.tokenize(line.lower(), escape=False, return_str=True) for line in lines]


def baseline_bleu(hypotheses, references, lang="de"):
    """fairseq-generate's BLEU4 on lower-cased Moses tokens: sacrebleu's BLEU object (score, precisions, bp)."""
    return sacrebleu.corpus_bleu(moses_lowercase(hypotheses, lang), [moses_lowercase(references, lang)],
                                 tokenize="none", force=True)


def main(argv):
    del argv
    reference = FLAGS.reference or corpora.split_files(DataConfig(target_lang=FLAGS.lang), "test_2016_flickr",
                                                       corpora.resolve_data_dir())[1]
    hypotheses, references = read_text(FLAGS.hypotheses), read_text(reference)
    if len(hypotheses) != len(references):
        raise app.UsageError(f"--hypotheses: {len(hypotheses)} lines, {reference}: {len(references)}")
    print("baseline (Moses, lower-cased)", baseline_bleu(hypotheses, references, FLAGS.lang))
    print("tok:intl, lower-cased        ", sacrebleu.corpus_bleu(hypotheses, [references], **TOKENIZED_BLEU))
    print("tok:13a, cased               ", sacrebleu.corpus_bleu(hypotheses, [references]))


if __name__ == "__main__":
    define_flags()
    app.run(main)
