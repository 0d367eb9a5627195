"""Constituency parsing (§6.3) on the free ~5% WSJ sample, sized for a 2-core CPU.

3,669 training trees (files wsj_0001-0179; dev 0180-0189, test 0190-0199),
about a tenth of the paper's WSJ-only set. The shape follows §6.3 (4 layers)
at d_model 256: 8.6M parameters for 226k target tokens.

Three departures from the paper, all chosen on dev (docs/parsing.md): the
leaves of the linearized tree are the words' POS tags (``tree_leaves="tag"``,
"(S (NP @NNP @NNP ) (VP @VBZ ) @. )", as tensor2tensor's WSJ problem writes
them), and the decoder input at each step also gets the encoder output of the
next word to bracket (``align_words``): without it the decoder counts words
against the input, and the same model and budget scored F1 14; with it, the
encoder outputs at the last piece of that word and of the word before it
(``word_span``, the gap where brackets close and open) added 3-4 dev F1 at
equal steps. Attention dropout 0.1 with dropout 0.2 scored 46.6 dev F1 at step
250 against 37.0 for 0.3 and 0.2 (60 dev trees, post-LN); with pre-LN over the
whole 55-minute budget, dropout 0.3 ended at 71.20 dev F1 (averaged) against
0.2's 70.93, its dev perplexity 1.77 against 1.90. Third, LayerNorm before
each sub-layer (``norm="pre"``) with warmup 400: 62.1 dev F1 at step 250 and
67.5 after 14 minutes, against 50.0 and 63.2 for the paper's post-LN with
warmup 800 (post-LN with warmup 400 stalled near 15).

Dev F1 is measured at every checkpoint on all 127 dev trees; the 5 best
checkpoints by it are averaged (§6.1 averages the last 5) and α is chosen on
dev. Dev F1 is flat near 70 from minute ~30 at Eq. 3's still high rate; taking
the rate linearly to 0 over the last 40% of the budget (``cooldown``) lifted
the averaged dev F1 from 71.20 to 72.26 (docs/parsing.md). Reading each
source piece as UNK with probability 0.2 in training (``source_token_dropout``,
word dropout) lifted it to 75.17: dev perplexity stayed near 1.5 where it had
climbed from 1.6 to 1.8, and single checkpoints reached 74.8 where they had
stayed near 70-72. Probability 0.3 scored 75.18 averaged, its single
checkpoints ahead of 0.2's at 8 of 11 equal steps (75.08 at step 2,250);
probability 0.4 scored 75.41 (75.31 at step 2,000, dev perplexity 1.44 at
the end against 1.47). Reading each decoder-input piece (tags and brackets)
as UNK with probability 0.2 as well (``target_token_dropout``; the alignment
still counts the real leaves) scored 76.86: single checkpoints 75.4-76.2 from
step 2,000 on, where word dropout alone stayed at 72.9-75.3.
With both, word dropout 0.5 scored 76.62 against 0.4's 76.86 (behind at 11 of 12 equal steps), and
decoder-input dropout 0.3 75.68 against 76.57 for this recipe rerun on the same (other) CPU, and word
dropout by piece frequency (``source_token_dropout_alpha`` 50 in place of 0.4) 75.43 there, 6 encoder and
2 decoder layers 76.01 (4,591 faster steps), and BPE-dropout 0.1 was behind at 7 of 8 checkpoints (stopped).
Seeds 1, 2, 3 and 4 of this recipe on that CPU scored 76.57, 76.52, 77.36 and 77.65 on dev (81.90, 80.89, 81.79
and 82.56 on test): differences under ~0.8 dev F1 are within a rerun's. The shipped parser is seed 4's
(``--seed=4``). The best single checkpoint by dev F1 instead of the average of the 5 best led by 0.24 over
seven runs on halves of dev that did not choose it (-1.06 to +1.51; bench/checkpoint_choice.py), within the
noise, so the average stays.
An auxiliary tag loss on the encoder (``--tag_loss=1.0``) moved dev F1 by +0.54, +0.06 and -0.65 against seeds
1, 3 and 2 without it (77.11, 77.42, 75.87; test 82.59, 80.98, 81.76), so it stays off.
Decoding is the paper's: beam 21, output up to input + 300 tokens.

Time: a step of 4,096 tokens takes 0.9-1.1 s on a 2-core Zen 4 (bfloat16), so
the 55-minute budget gives ~2,850-3,300 steps (~50-60 passes) with the dev F1
of each checkpoint.
"""

from keras_transformer.config import DataConfig, DecodeConfig, ModelConfig, Recipe, TrainConfig

RECIPE = Recipe(
    name="ptb_sample",
    task="parsing",  # §6.3
    description="Constituency parsing (§6.3) on the WSJ sample, 4+4 layers, d_model 256, for a 2-core CPU",
    model=ModelConfig(
        vocab_size=4000,  # 3,669 sentences: 1.58 source pieces per word; every tree token is one piece anyway
        d_model=256,
        d_ff=1024,
        num_heads=4,
        num_encoder_layers=4,  # §6.3: a 4-layer Transformer
        num_decoder_layers=4,
        dropout=0.3,  # 55-min pre-LN run: dev F1 71.20 against 0.2's 70.93 (dev perplexity 1.77 against 1.90)
        attention_dropout=0.1,  # 0.2 (the WSJ run's) with dropout 0.3 trained slower
        source_token_dropout=0.4,  # word dropout on the sentence: dev F1 75.41 (0.3: 75.18; none: 72.26; docstring)
        target_token_dropout=0.2,  # ... and on the decoder input: dev F1 76.86 (none: 75.41; docstring)
        norm="pre",  # pre-LN with warmup 400: +4.3 dev F1 at 14 minutes over post-LN (module docstring)
        align_words=True,  # the decoder is told which word comes next (module docstring)
        word_span=True,  # ... and the last pieces of that word and of the one before it (module docstring)
        max_length=1024,  # positions: the longest tree of the sample is 573 tokens, outputs may reach input + 300
    ),
    data=DataConfig(
        corpus="ptb",
        source_lang="en",
        target_lang="tree",
        train_split="train",
        eval_split="dev",
        test_split="test",
        max_length=384,  # keeps all but the longest training trees (a 249-word sentence: 573 tokens)
        tokens_per_batch=4096,  # as multi30k: ~60 updates per pass over the 226k target tokens
        shuffle_buffer=4000,  # the whole training split
        tokenizer_sample_lines=10000,  # all 7,338 sentences and trees
        tree_leaves="tag",  # POS tags as leaves (module docstring)
    ),
    train=TrainConfig(
        train_steps=6000,  # more than the time budget buys: the budget ends the run
        max_train_minutes=55,  # the compute budget on a 2-core CPU; the run stops and checkpoints there
        warmup_steps=400,  # peak learning rate 3.1e-3 (Eq. 3 with d_model 256); post-LN stalled at this peak
        learning_rate_scale=1.0,
        cooldown=0.4,  # the rate linearly to 0 over the last 22 minutes: dev F1 72.26 against 71.20 (docstring)
        checkpoint_every=250,  # ~4 passes; each checkpoint parses the dev trees (bleu_samples)
        keep_checkpoints=5,
        eval_batches=0,  # the 127 dev trees in full
        bleu_samples=127,  # dev F1 of every checkpoint, on all 127 dev trees (val_f1)
        keep_best_by="val_f1",
        keep_best=5,  # the 5 best by dev F1 are averaged (pipeline.train_and_average)
        mixed_precision=True,  # bf16 where the hardware has it (1.4x float32 on AMX; precision.py)
    ),
    decode=DecodeConfig(beam_size=21, alpha=0.3, extra_length=300, average_checkpoints=5,  # §6.3
                        alpha_grid=(0.0, 0.3, 0.6, 1.0)),  # α chosen by dev F1 (kt-pipeline)
)
