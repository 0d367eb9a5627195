"""The translator an export serves (§6.1): raw strings or subword ids in, translations and their n-best out.

    Translator(model, tokenizer, recipe, with_text=True, parallel_searches=2)

Signatures (TF signatures cannot have optional inputs, so the decoding options come in two flavours: fixed
at the recipe's §6.1 values — beam 4, α = 0.6, max output = source length + 50 — or given as scalar tensors):

    serving_default             inputs [B] string
        -> translations [B] string (best hypothesis, detokenized), scores [B] float32,
           truncated [B] bool (the input was longer than the model reads: translated from its first subwords)
    translate_with_options      inputs [B] string, beam_size [] int32, alpha [] float32, extra_length [] int32
        -> translations, scores, truncated, and nbest_translations [B, K] string, nbest_scores [B, K] float32
           (best first)
    translate_ids               source_ids [B, S] int32 -> sequences [B, K, T] int32, scores [B, K] float32
    translate_ids_with_options  source_ids, beam_size, alpha, extra_length -> the same outputs
    sample_with_options         inputs [B] string, num_samples [] int32 (K), top_k [] int32, top_p [] float32,
                                temperature [] float32, seed [] int32, alpha [] float32, extra_length [] int32
        -> translate_with_options' outputs, the K draws of each input in the n-best slots, in draw order
           (``decoding.sampling``; for back-translation)
    translate_with_prefix       inputs [B] string, target_prefix [B] string, beam_size, alpha, extra_length
        -> translate_with_options' outputs, every hypothesis starting with its input's prefix
    sample_with_prefix          inputs, target_prefix, then sample_with_options' options -> its outputs, prefixed
    translate_with_constraints  inputs [B] string, constraints [B] string, beam_size, alpha, extra_length
        -> translate_with_options' outputs, every hypothesis containing each of its input's constraints
    translate_with_alignment    inputs, beam_size, alpha, extra_length, alignment_layer [] int32, alignment_head []
                                int32 -> translate_with_options' outputs, and alignment [B] string: the best
                                hypothesis' word alignment to its input, Pharaoh "i-j ..." (``alignment``)
    align                       inputs [B] string, translations [B] string, alignment_layer, alignment_head
        -> alignment [B] string: each given pair's word alignment (the translation teacher-forced)
    translate_to                inputs [B] string, target_lang [B] string, beam_size, alpha, extra_length
        -> translate_with_options' outputs, each input translated into its language (a model trained with
           several target languages only: ``data/multilingual.py``; an unknown language is refused)

An alignment reads one decoder layer's cross-attention (``alignment_layer``: -L ... L-1, negative from the last;
kt-translate's default -2, the penultimate) with its heads averaged (``alignment_head`` -1) or one head; the
translation of ``align`` is tokenized as the targets are and may hold at most the model's max_length subwords
(EOS included): a longer one is refused, "translations: must have at most ...".

A target prefix (``decoding.prefix``) is text in the target language, tokenized as the targets are; the search
goes on from its subwords and the outputs include it. "" forces nothing. Its subwords must be fewer than the
input's output may hold (source subwords + EOS + extra_length, at most the model's max_length): a longer one is
refused with an InvalidArgumentError "target_prefix: must be shorter ...". Scores count the prefix's tokens:
log P of the whole output (``kt-score`` of it gives the same number).

A constraint (``decoding.constraints``: dynamic beam allocation) is a word or phrase in the target language,
tokenized as the targets are, and met where the output holds its subwords (so as words of their own: "Hund" is
not met inside "Seehund"); an input's constraints are one string, separated by tabs ("" or blank ones: none). Their
subwords and EOS must fit in the input's output (source subwords + EOS + extra_length, at most the model's
max_length): else an InvalidArgumentError "constraints: too long ...".

A blank input (empty or whitespace only) is not translated: "" with score 0 (``serving.module``).
``source_ids`` are what the model reads: subword ids, then EOS, PAD (0) after. ``sequences`` hold no BOS,
include EOS and are PAD after it. Scores are log P(Y|X) / lp(Y) (``keras_transformer.decoding``). The text
signatures and the in-graph checks come from ``serving.module.ServingModule``; an ids-only translator
(``with_text=False``, ``kt-export --ids_only``) has the two ids signatures alone and no tensorflow-text op.

The K n-best slots are full: the search goes on until each input has K finished hypotheses that no
unfinished one can beat (which never changes the best). Only an input that reaches its maximum output length
(source + 50) with fewer than K finished ones has empty slots, after them: an empty string with score -1e9;
an input with none finished gets its K unfinished hypotheses instead, scored at that length.
``serving_default`` returns the best alone, so its search stops an input as soon as no unfinished hypothesis
can beat its best finished one (``num_hypotheses`` 1 in ``decoding.beam_search``): the same translations and
scores as ``translate_with_options``, in fewer steps. A recipe whose ``decode.stop_rule`` is "heuristic"
(``kt-export --stop_rule=heuristic``) stops every search sooner, by a rule that may change translations.

With ``xla`` (``kt-export --jit_compile``) a request decoded with the export's beam size and an
extra_length no larger than its own runs the static-shape search compiled by XLA
(``decoding.static_beam_search``), each of its ``parallel_searches`` parts padded to the ``XlaBuckets``
shapes; any other request (another beam size, a longer extra_length, a batch larger than the buckets) runs
the default search. The results are the same. ``warmup_requests`` are one ``translate_ids`` request per
bucket, which TF Serving replays at load time (``assets.extra/tf_serving_warmup_requests``) so that every
compilation happens before the first request.

With ``StepCompile`` (``kt-export --step_compile``) a request decoded with the export's beam size runs the
default search's shrinking loop around an XLA-compiled step (``decoding.hybrid_beam_search``), any batch size
and extra_length; another beam size runs the default search. Its warm-up requests are one ``translate_ids``
request per ``StepCompile.batch_sizes`` rows (per search part) of max_source_length tokens: they compile the
steps their searches meet; a shape first met later compiles then, once per process.
"""

from __future__ import annotations

import functools
from typing import Union

import numpy as np
import tensorflow as tf

from keras_transformer import EOS_ID, PAD_ID
from keras_transformer.config import StepCompile, XlaBuckets
from keras_transformer.data import multilingual
from keras_transformer.data.tokenizer import append_eos
from keras_transformer.decoding import translate_ids as beam_translate_ids
from keras_transformer.decoding import hybrid_beam_search
from keras_transformer.decoding.ensemble import ensemble_translate_ids
from keras_transformer.decoding.parallel import in_parallel
from keras_transformer.decoding.sampling import sample_translate_ids
from keras_transformer.decoding.static_beam_search import bucketed_translate_ids
from keras_transformer.serving import checks
from keras_transformer.serving.module import EnsembleMembers, ServingModule
from keras_transformer.tasks.translation.alignment import alignment as word_alignment

IDS_SIGNATURES = ("translate_ids", "translate_ids_with_options")
SAMPLE_SIGNATURE = "sample_with_options"
PREFIX_SIGNATURES = ("translate_with_prefix", "sample_with_prefix")  # beam search, sampling
ALIGNMENT_SIGNATURES = ("translate_with_alignment", "align")  # the best translation's alignment, a given pair's
CONSTRAINT_SIGNATURE = "translate_with_constraints"
XLA_SERVING = "tensorflow_model_server --xla_cpu_compilation_enabled=true (without it: 'XLA compilation disabled')"
TARGET_SIGNATURE = "translate_to"  # a multi-target model's (data/multilingual.py)
TEXT_SIGNATURES = (SAMPLE_SIGNATURE, *PREFIX_SIGNATURES, *ALIGNMENT_SIGNATURES, CONSTRAINT_SIGNATURE)  # beside the
# two of every task


class Translator(ServingModule):
    """Beam-search translation of raw strings or ids with one model and its tokenizer (§6.1)."""

    OPTIONS_SIGNATURE = "translate_with_options"

    def __init__(self, model, tokenizer, recipe, with_text: bool = True, name: str = "translator",
                 xla: Union[XlaBuckets, StepCompile, None] = None, **kwargs):
        super().__init__(model, tokenizer, recipe, with_text, name, **kwargs)
        self._vocab_size = recipe.model.vocab_size
        self._xla = xla
        self.translate_ids_with_options = tf.function(self._ids_with_options,
                                                      input_signature=[checks.IDS, *checks.OPTIONS], autograph=False)
        self.translate_ids = tf.function(self._ids_with_defaults, input_signature=[checks.IDS], autograph=False)
        if with_text:
            self.sample_with_options = tf.function(
                self._sample_text, input_signature=[checks.STRINGS, *checks.SAMPLING, *checks.OPTIONS[1:]],
                autograph=False)
            self.translate_with_prefix = tf.function(
                self._prefixed_text, input_signature=[checks.STRINGS, checks.PREFIXES, *checks.OPTIONS],
                autograph=False)
            self.sample_with_prefix = tf.function(
                self._sample_prefixed, input_signature=[checks.STRINGS, checks.PREFIXES, *checks.SAMPLING,
                                                        *checks.OPTIONS[1:]], autograph=False)
            self.translate_with_alignment = tf.function(
                self._aligned_text, input_signature=[checks.STRINGS, *checks.OPTIONS, *checks.ALIGNMENT],
                autograph=False)
            self.align = tf.function(self._align_text, input_signature=[checks.STRINGS, checks.TRANSLATIONS,
                                                                        *checks.ALIGNMENT], autograph=False)
            self.translate_with_constraints = tf.function(
                self._constrained_text, input_signature=[checks.STRINGS, checks.CONSTRAINTS, *checks.OPTIONS],
                autograph=False)
            if recipe.data.target_langs:
                self.translate_to = tf.function(
                    self._text_to, input_signature=[checks.STRINGS, checks.TARGET_LANGS, *checks.OPTIONS],
                    autograph=False)

    def text_signatures(self):
        if self.tokenizer is None:
            return super().text_signatures()
        return super().text_signatures() + TEXT_SIGNATURES + ((TARGET_SIGNATURE,) if self.recipe.data.target_langs
                                                              else ())

    def _text_to(self, inputs, target_lang, beam_size, alpha, extra_length):
        """translate_to (module docstring): each input tagged with its target language's piece, then
        translate_with_options; a language the model was not trained for is refused."""
        inputs = checks.checked_rank(inputs, "inputs")
        target_lang = checks.checked_prefixes(target_lang, inputs, "target_lang")
        langs = self.recipe.data.target_langs
        found = tf.equal(target_lang[:, None], tf.constant(langs)[None, :])  # [B, L]
        known = tf.debugging.Assert(tf.reduce_all(tf.reduce_any(found, axis=1)), [
            f"target_lang: each must be a target language of this model ({', '.join(langs)}), got", target_lang])
        with tf.control_dependencies([known]):
            tags = tf.gather(tf.constant([multilingual.tag(lang) for lang in langs]), tf.argmax(found, axis=1))
        tagged = tf.where(checks.blank(inputs), inputs, tf.strings.join([tags, inputs], " "))  # [B]
        return self._text_with_options(tagged, beam_size, alpha, extra_length)

    def signatures(self) -> dict:
        return {name: getattr(self, name) for name in self.text_signatures() + IDS_SIGNATURES}

    def _sample_text(self, inputs, num_samples, top_k, top_p, temperature, seed, alpha, extra_length,
                     target_prefix=None):
        """The sampling signatures (module docstring): the options checked in the graph, blank inputs not decoded."""
        inputs = checks.checked_rank(inputs, "inputs")
        aligned = () if target_prefix is None else (checks.checked_prefixes(target_prefix, inputs),)
        sampling = checks.checked_sampling(num_samples, top_k, top_p, temperature, seed)
        _, alpha, extra_length = checks.checked_options(1, alpha, extra_length)

        def decode(kept, *prefix):
            source_ids, truncated = self.encode(kept)  # [B, S], [B]
            sequences, scores = sample_translate_ids(self.model, source_ids, *sampling, alpha, extra_length,
                                                     *self._prefix_ids(prefix))
            return self._texts(sequences, scores, truncated, nbest=True)

        return self.nonblank(inputs, decode, *aligned)

    def _sample_prefixed(self, inputs, target_prefix, *options):
        return self._sample_text(inputs, *options, target_prefix=target_prefix)

    def _prefixed_text(self, inputs, target_prefix, beam_size, alpha, extra_length):
        """translate_with_prefix (module docstring): the default search (never the XLA one), each output forced to
        start with its prefix."""
        return self._guided_text(inputs, target_prefix, "target_prefix", beam_size, alpha, extra_length)

    def _constrained_text(self, inputs, constraints, beam_size, alpha, extra_length):
        """translate_with_constraints (module docstring): the default search (never the XLA one) with dynamic beam
        allocation, every output holding each of its input's constraints."""
        return self._guided_text(inputs, constraints, "constraints", beam_size, alpha, extra_length)

    def _guided_text(self, inputs, guide, name, beam_size, alpha, extra_length):
        """The default search of ``inputs`` [B], guided by ``guide`` [B] string: a target prefix or constraints."""
        inputs = checks.checked_rank(inputs, "inputs")
        guide = checks.checked_prefixes(guide, inputs, name)
        beam_size, alpha, extra_length = checks.checked_options(beam_size, alpha, extra_length)
        to_ids = self._prefix_ids if name == "target_prefix" else self._constraint_ids

        def decode(kept, texts):
            source_ids, truncated = self.encode(kept)  # [B, S], [B]
            sequences, scores = beam_translate_ids(
                self.model, source_ids, beam_size, alpha, extra_length, self.parallel_searches,
                stop_rule=self.recipe.decode.stop_rule, **{name: to_ids((texts,))[0]})
            return self._texts(sequences, scores, truncated, nbest=True)

        return self.nonblank(inputs, decode, guide)

    def _aligned_text(self, inputs, beam_size, alpha, extra_length, layer, head):
        """translate_with_alignment (module docstring): translate_with_options' search, then the best hypothesis'
        alignment from its own subwords."""
        inputs = checks.checked_rank(inputs, "inputs")
        options = checks.checked_options(beam_size, alpha, extra_length)
        layer, head = self._checked_alignment(layer, head)

        def decode(kept):
            source_ids, truncated = self.encode(kept)  # [B, S], [B]
            result = self._search(source_ids, *options)
            out = self._texts(result["sequences"], result["scores"], truncated, nbest=True)
            best = result["sequences"][:, 0, :]  # [B, T]
            return dict(out, alignment=word_alignment(self.model, self.tokenizer, source_ids, best, layer, head))

        return self.nonblank(inputs, decode)

    def _align_text(self, inputs, translations, layer, head):
        """align (module docstring): each translation teacher-forced after its input, its alignment read."""
        inputs = checks.checked_rank(inputs, "inputs")
        translations = checks.checked_prefixes(translations, inputs, "translations")
        layer, head = self._checked_alignment(layer, head)
        most = self.recipe.model.max_length

        def decode(kept, targets):
            source_ids, _ = self.encode(kept)  # [B, S]
            target_ids = append_eos(self.tokenizer.target.tokenize(targets))  # [B, (T)]
            longest = tf.reduce_max(target_ids.row_lengths())
            fits = tf.debugging.Assert(longest <= most, [f"translations: must have at most {most} subwords (EOS "
                                                         "included) for this model, got", longest])
            with tf.control_dependencies([fits]):
                target_ids = target_ids.to_tensor(PAD_ID)  # [B, T]
            return {"alignment": word_alignment(self.model, self.tokenizer, source_ids, target_ids, layer, head)}

        return self.nonblank(inputs, decode, translations)

    def _checked_alignment(self, layer, head):
        config = self.recipe.model
        return checks.checked_alignment(layer, head, config.num_decoder_layers, config.num_heads)

    def _prefix_ids(self, prefix):
        """() or (prefixes [B] string,) -> () or (their target subwords [B, P] int32, PAD after,)."""
        return tuple(self.tokenizer.target.tokenize(p).to_tensor(PAD_ID) for p in prefix)

    def _constraint_ids(self, constraints):
        """(constraints [B] string, tab-separated,) -> (their target subwords [B, C, L] int32, PAD after,): the C
        phrases of each input that are not blank, tokenized one by one."""
        phrases = tf.strings.split(constraints[0], "\t")  # [B, (C)]
        phrases = tf.ragged.boolean_mask(phrases, ~tf.ragged.map_flat_values(checks.blank, phrases))
        ids = self.tokenizer.target.tokenize(phrases.flat_values)  # [sum C, (L)]
        return (tf.RaggedTensor.from_row_splits(ids, phrases.row_splits).to_tensor(PAD_ID),)

    # The ids signatures: each checks its inputs in the graph (rank, ids, the options' rules), then translates.
    def _ids_with_options(self, source_ids, beam_size, alpha, extra_length):
        return self._translate_ids(checks.checked_source_ids(source_ids, self._vocab_size),
                                   *checks.checked_options(beam_size, alpha, extra_length))

    def _ids_with_defaults(self, source_ids):
        return self._translate_ids(checks.checked_source_ids(source_ids, self._vocab_size), *self.defaults)

    def _translate_ids(self, source_ids, beam_size, alpha, extra_length):
        return self._search(checks.truncate_source(source_ids, self.max_source_length), beam_size, alpha,
                            extra_length)

    def _search(self, source_ids, beam_size, alpha, extra_length, num_hypotheses=None):
        """source_ids [B, S], already truncated -> {"sequences" [B, K, T], "scores" [B, K]}; num_hypotheses N
        (default K): the hypotheses final when an item stops."""
        def default():
            return beam_translate_ids(self.model, source_ids, beam_size, alpha, extra_length, self.parallel_searches,
                                      num_hypotheses, self.recipe.decode.stop_rule)

        if self._xla is None:
            sequences, scores = default()
        elif isinstance(self._xla, StepCompile):
            sequences, scores = tf.cond(tf.equal(beam_size, self.defaults[0]),
                                        lambda: self._hybrid_search(source_ids, alpha, extra_length, num_hypotheses),
                                        default)
        else:
            k, _, most = self.defaults
            fits = (tf.equal(beam_size, k) & (extra_length <= most)
                    & (tf.shape(source_ids)[0] <= self.parallel_searches * self._xla.batch_sizes[-1]))
            sequences, scores = tf.cond(fits, lambda: self._xla_search(source_ids, alpha, extra_length, num_hypotheses),
                                        default)
        return {"sequences": sequences, "scores": scores}

    def _xla_search(self, source_ids, alpha, extra_length, num_hypotheses):
        """The XLA-compiled search of source_ids [B, S], dealt to ``parallel_searches`` parts (module docstring)."""
        k, _, most = self.defaults
        search = functools.partial(bucketed_translate_ids, self.model, alpha=alpha, extra_length=extra_length,
                                   beam_size=k, max_extra_length=most, batch_sizes=self._xla.batch_sizes,
                                   source_lengths=self._xla.for_source(self.max_source_length),
                                   num_hypotheses=num_hypotheses, stop_rule=self.recipe.decode.stop_rule)
        return in_parallel(search, source_ids, self.parallel_searches)

    def _hybrid_search(self, source_ids, alpha, extra_length, num_hypotheses):
        """The shrinking loop around the XLA-compiled step for source_ids [B, S], dealt to ``parallel_searches``
        parts (module docstring)."""
        search = functools.partial(hybrid_beam_search.translate_ids, self.model, beam_size=self.defaults[0],
                                   alpha=alpha, extra_length=extra_length, num_hypotheses=num_hypotheses,
                                   stop_rule=self.recipe.decode.stop_rule, source_positions=self.max_source_length)
        return in_parallel(search, source_ids, self.parallel_searches)

    def extra_info(self) -> dict:
        if self._xla is None:
            return {}
        k, _, most = self.defaults
        if isinstance(self._xla, StepCompile):
            return {"step_compile": {"beam_size": k, "source_positions": self.max_source_length,
                                     "cache_positions": hybrid_beam_search.FIRST_POSITIONS,
                                     "batch_sizes": list(self._xla.batch_sizes), "serving": XLA_SERVING}}
        return {"xla": {"batch_sizes": list(self._xla.batch_sizes),
                        "source_lengths": list(self._xla.for_source(self.max_source_length)),
                        "beam_size": k, "max_extra_length": most,
                        "serving": XLA_SERVING}}

    def warmup_requests(self):
        """[(signature, {input: array})]: one translate_ids request per (batch size, source length) bucket (with
        ``StepCompile``: per batch size, max_source_length tokens), each part of ``parallel_searches`` getting that
        many rows of that many tokens (EOS last)."""
        if self._xla is None:
            return []
        requests = []
        for rows in self._xla.batch_sizes:
            for columns in (self._xla.for_source(self.max_source_length) if isinstance(self._xla, XlaBuckets)
                            else (self.max_source_length,)):
                ids = np.full([rows * self.parallel_searches, columns], EOS_ID + 1, np.int32)  # any ordinary id
                ids[:, -1] = EOS_ID
                requests.append(("translate_ids", {"source_ids": ids}))
        return requests

    def _decode_text(self, inputs, beam_size, alpha, extra_length, nbest):
        source_ids, truncated = self.encode(inputs)  # [B, S], [B]
        result = self._search(source_ids, beam_size, alpha, extra_length, None if nbest else 1)
        return self._texts(result["sequences"], result["scores"], truncated, nbest)

    def _texts(self, sequences, scores, truncated, nbest):
        """sequences [B, K, T], scores [B, K], truncated [B] -> the text signatures' outputs (the best alone
        unless ``nbest``)."""
        if not nbest:
            best = self.tokenizer.target.detokenize(sequences[:, 0, :])  # [B]
            return {"translations": best, "scores": scores[:, 0], "truncated": truncated}
        shape = tf.shape(sequences)
        flat = tf.reshape(sequences, [shape[0] * shape[1], shape[2]])  # [B*K, T]
        texts = tf.reshape(self.tokenizer.target.detokenize(flat), shape[:2])  # [B, K]
        return {"translations": texts[:, 0], "scores": scores[:, 0], "nbest_translations": texts,
                "nbest_scores": scores, "truncated": truncated}


class EnsembleTranslator(EnsembleMembers, Translator):
    """``Translator``'s text signatures serving_default and translate_with_options over an ensemble of models of
    one vocabulary (``decoding.ensemble``: log-probabilities averaged per step), the first model's recipe and
    tokenizer; no sampling, prefix or XLA search (they would run one model alone)."""

    def __init__(self, models, tokenizer, recipe, weights=None, **kwargs):
        super().__init__(models[0], tokenizer, recipe, **kwargs)
        self.hold_members(models, weights)
        for name in TEXT_SIGNATURES:
            setattr(self, name, None)

    def text_signatures(self):
        return ServingModule.text_signatures(self)

    def _search(self, source_ids, beam_size, alpha, extra_length, num_hypotheses=None):
        sequences, scores = ensemble_translate_ids(self._ensemble, source_ids, beam_size, alpha, extra_length,
                                                   self.parallel_searches, num_hypotheses)
        return {"sequences": sequences, "scores": scores}
