"""Inference (§6.1): batched beam search with a length penalty, and greedy decoding.

    translate_ids(model, source_ids [B, S], beam_size=4, alpha=0.6, extra_length=50)
        -> (sequences [B, K, T] int32, scores [B, K] float32)
    greedy_translate_ids(model, source_ids, alpha=0.6, extra_length=50) -> ([B, 1, T], [B, 1])
    beam_search(step_fn, initial_cache, beam_size, max_lengths, alpha) -> SearchResult
    greedy_search(step_fn, initial_cache, max_lengths, alpha=0.0)      -> SearchResult

Sequences hold no BOS, include EOS and are PAD after it; scores are log P / lp, best first.
"""

from keras_transformer.decoding.beam_search import SearchResult, beam_search, length_penalty, translate_ids
from keras_transformer.decoding.greedy import greedy_search, greedy_translate_ids
from keras_transformer.decoding.model_step import NEG_INF

__all__ = [
    "NEG_INF",
    "SearchResult",
    "beam_search",
    "greedy_search",
    "greedy_translate_ids",
    "length_penalty",
    "translate_ids",
]
