"""Translation (§6.1-6.2): parallel text in, sentences out, scored by BLEU and chrF (sacreBLEU)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from keras_transformer.config import STOP_RULES
from keras_transformer.data import corpora, multilingual
from keras_transformer.tasks.base import Decoded, Task
from keras_transformer.tasks.translation import lines, metric
from keras_transformer.tasks.translation.dev import DevBleu
from keras_transformer.tasks.translation.module import EnsembleTranslator, Translator


class TranslationTask(Task):
    name = "translation"
    metric = "bleu"  # cased sacreBLEU (13a) on detokenized text
    corpus = corpora.TEXT
    module_class = Translator
    nbest = True
    xla_search = True  # kt-export --jit_compile (decoding.static_beam_search)
    stop_rules = STOP_RULES  # kt-export --stop_rule
    sample_sentences = (
        "A man in an orange hat starring at something.",
        "Two young children are playing soccer on a field.",
        "A woman with a red umbrella walks down the street.",
    )

    def ensemble_module(self, models, tokenizer, recipe, weights=None, **kwargs):
        return EnsembleTranslator(models, tokenizer, recipe, weights, **kwargs)

    def read_split(self, recipe, split, data_dir):
        """(sources, references) of a split; with several target languages each direction's in turn of
        ``target_langs``, its sources tagged (``data/multilingual.py``)."""
        if recipe.data.target_langs:
            sources, references = [], []
            for lang in recipe.data.target_langs:
                one = dataclasses.replace(recipe, data=multilingual.direction(recipe.data, lang))
                more_sources, more_references = self.read_split(one, split, data_dir)
                sources += [multilingual.tagged(lang, line) for line in more_sources]
                references += more_references
            return sources, references
        source_file, reference_file = corpora.split_files(recipe.data, split, Path(data_dir))
        sources, references, _ = corpora.read_parallel_files(source_file, reference_file)
        return sources, references


    def decode(self, loaded, lines_, batch_size=32, beam_size=None, alpha=None, extra_length=None):
        translations, scores = lines.translate_lines(loaded, lines_, batch_size, beam_size, alpha, extra_length)
        return Decoded(translations, [float(s) for s in scores])

    def score(self, outputs, references):
        cased = metric.score(outputs, references)
        tokenized = metric.score(outputs, references, lowercase_tokenized=True)
        return dict(cased, bleu_tokenized_lowercase=tokenized["bleu"],
                    signature_tokenized_lowercase=tokenized["signature"])

    def format_scores(self, scores):
        return (f"BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}  ({scores['signature']}); "
                f"tokenized lower-cased BLEU {scores['bleu_tokenized_lowercase']:.2f}")

    def results(self, scores):
        return {"bleu": round(scores["bleu"], 2), "chrf": round(scores["chrf"], 2),
                "signature": scores["signature"], "chrf_signature": scores["chrf_signature"],
                "bleu_tokenized_lowercase": round(scores["bleu_tokenized_lowercase"], 2),
                "signature_tokenized_lowercase": scores["signature_tokenized_lowercase"]}

    def dev_callback(self, recipe, tokenizer, logdir, num_samples, data_dir=None):
        return DevBleu.from_eval_split(recipe, tokenizer, logdir, num_samples, data_dir)
