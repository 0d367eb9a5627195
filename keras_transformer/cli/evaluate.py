"""kt-evaluate: translate a test set and score it with sacrebleu (BLEU and chrF, with signatures).

    kt-evaluate --model=saved_models/multi30k_en_de --source=test.en.gz --reference=test.de.gz [--json]
    kt-evaluate --model=saved_models/multi30k_en_de --split=test_2016_flickr   # a split of the data directory
    kt-evaluate --hypothesis_file=hyp.de --reference=test.de            # score a file, no model

Default scores are on detokenized, cased text (sacrebleu's defaults, tok:13a).
--tokenized_bleu gives the lower-cased, tokenized variant older papers report
(tokenize=intl, lowercase; see keras_transformer.tasks.translation.metric). With --json the
last line is one JSON object with bleu, chrf and signature.
"""

from __future__ import annotations

import json
import time

from absl import flags

from keras_transformer.cli import common, decode_flags

decode_flags.define_model_flags(required=False, ensemble=True)
decode_flags.define_decode_flags()
flags.DEFINE_string("split", None,
                    "Evaluate on a split of the data directory instead of --source/--reference: a Multi30k split "
                    "(test_2016_flickr, val) or newstest2013/newstest2014 (English to German).")
flags.DEFINE_string("source", None, "Source sentences, one per line (plain or .gz).")
flags.DEFINE_string("reference", None, "Reference translations, aligned with --source (plain or .gz).")
flags.DEFINE_string("hypotheses", None, "Also write the model's translations to this file.")
flags.DEFINE_string("hypothesis_file", None, "Score this existing file of translations instead of running a model.")
flags.DEFINE_boolean("tokenized_bleu", False,
                     "Lower-cased, tokenized BLEU/chrF (tok:intl, case:lc) as in older papers.")
flags.DEFINE_boolean("json", False, "End with one line of JSON: bleu, chrf, signature, ...")
FLAGS = flags.FLAGS


def _split_files():
    """Sets --source/--reference to the files of --split in the data directory."""
    from keras_transformer.config import DataConfig
    from keras_transformer.data import corpora

    if FLAGS.source or FLAGS.reference:
        common.fail("--split: names the test set; do not also give --source/--reference")
    try:
        source, reference = corpora.split_files(DataConfig(), FLAGS.split, corpora.resolve_data_dir(FLAGS.data_dir))
    except (ValueError, FileNotFoundError) as e:
        common.fail(f"--split: {e}")
    FLAGS.reference = str(reference)
    if not FLAGS.hypothesis_file:
        FLAGS.source = str(source)


def main(argv):
    del argv
    decode_flags.check_decode_flags()
    if FLAGS.split:
        _split_files()
    from keras_transformer.tasks.translation import metric

    common.check_output_flag("hypotheses")
    references = common.read_text_flag("reference")
    extra = {}
    if FLAGS.hypothesis_file:
        if FLAGS.model or FLAGS.source:
            common.fail("--hypothesis_file: scores an existing file; do not also give --model/--source")
        hypotheses = common.read_text_flag("hypothesis_file")
    else:
        sources = common.read_text_flag("source")
        if len(sources) != len(references):
            common.fail(f"--reference: {len(references)} lines but --source has {len(sources)}")
        translator = decode_flags.load_model("translation")
        cut = decode_flags.check_long_lines(translator, sources, "translated")
        start = time.time()
        hypotheses = decode_flags.decode(translator, sources).outputs
        extra = dict(model=translator.description, seconds=round(time.time() - start, 2), truncated=cut)
        if FLAGS.hypotheses:
            common.write_output_flag("hypotheses", hypotheses)
    try:
        scores = metric.score(hypotheses, references, lowercase_tokenized=FLAGS.tokenized_bleu)
    except ValueError as e:
        common.fail(f"--{'hypothesis_file' if FLAGS.hypothesis_file else 'reference'}: {e}")
    for line in metric.format_scores(scores):
        print(line)
    if FLAGS.json:
        print(json.dumps(dict(scores, **extra), sort_keys=True))


def run():
    common.run(main, decoding=True)


if __name__ == "__main__":
    run()
