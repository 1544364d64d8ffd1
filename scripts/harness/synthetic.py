"""Synthetic data of each harness model's real shape (numpy only; train.py turns it into tensors).

Vision (one random batch, made once and reused, as the seeds' synthetic modes do):
    classification  images float32 [B, 3, S, S] ~ N(0, 1), labels int64 [B] in [0, classes)
    deeplabv3p      images as above, labels int64 [B, S, S] in [0, classes) with ~5 % void pixels (255)
    cyclegan        real_a, real_b float32 [B, 3, S, S] ~ U(-1, 1) (the generators' tanh range)

NLP (seed 003: samples differ in length, so the runs are timed over whole epochs of a fixed corpus): a corpus
of variable-length samples drawn from a fixed seed, cut into batches once; every epoch runs the same batches.
    bert         sentence pairs "[CLS] A [SEP] B [SEP]" with the length profile of BERT's
                 create_pretraining_data (90 % fill 90-100 % of max_len, 10 % are short: 8..max_len),
                 15 % of the word tokens masked (80 % [MASK], 10 % random, 10 % kept), a random NSP label;
                 B sequences per batch, padded to the batch's longest.
                 arrays: input_ids, token_type_ids, input_mask, masked_positions, masked_labels, nsp_labels
    transformer  sentence pairs with WMT-like lengths (source ~ log-normal, median 25 tokens; target = source
                 x U(0.8, 1.25)), ending in <eos>; sorted by length and cut into batches of at most B tokens
                 (padded source or target, the larger) as Paddle's reader does (token batching), batch order
                 shuffled. arrays: src_ids, trg_ids (<bos> + target), trg_labels (target + <eos>); id 0 pads.
With several ranks one global batch (B per rank x ranks) is drawn and rank r takes its rows, so every rank
knows the global count of sequences and tokens. A batch's ``tokens``: BERT, the real (non-padding) tokens;
Transformer, the target tokens (the loss's tokens, Paddle's "token_num").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from catalogue import ADVERSARIAL

VOID = 255
PAD, CLS, SEP, MASK = 0, 1, 2, 3  # BERT's special ids in this synthetic vocabulary
BOS, EOS = 1, 2  # Transformer's (PAD is 0 too)
FIRST_WORD = 5
MASK_RATE = 0.15
SHORT_SEQUENCE_RATE = 0.1
MIN_BERT_LENGTH = 8
TRANSFORMER_MEDIAN_LENGTH = 25


@dataclass(frozen=True)
class Batch:
    arrays: tuple  # this rank's model inputs
    sequences: int  # global: sequences (BERT) or sentence pairs (Transformer) in the step
    tokens: int  # global: see the module docstring


def vision_batch(model: str, batch: int, size: int, classes: int, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    if model in ADVERSARIAL:  # paired inputs: a batch of each domain
        shape = (batch, 3, size, size)
        return (rng.uniform(-1.0, 1.0, shape).astype(np.float32), rng.uniform(-1.0, 1.0, shape).astype(np.float32))
    images = rng.standard_normal((batch, 3, size, size), dtype=np.float32)
    if model == "deeplabv3p":
        labels = rng.integers(0, classes, size=(batch, size, size), dtype=np.int64)
        labels[rng.random((batch, size, size)) < 0.05] = VOID
        return images, labels
    return images, rng.integers(0, classes, size=(batch,), dtype=np.int64)


def bert_lengths(count: int, max_len: int, rng: np.random.Generator) -> np.ndarray:
    low = max(MIN_BERT_LENGTH, int(max_len * 0.9))
    lengths = rng.integers(low, max_len + 1, size=count)
    short = rng.random(count) < SHORT_SEQUENCE_RATE
    lengths[short] = rng.integers(min(MIN_BERT_LENGTH, max_len), max_len + 1, size=int(short.sum()))
    return lengths


def bert_corpus(sequences: int, batch: int, max_len: int, vocab: int, seed: int, rank: int = 0,
                world: int = 1) -> list[Batch]:
    """BERT pre-training batches over a corpus of SEQUENCES sequences (the tail short of a batch is dropped)."""
    if max_len < MIN_BERT_LENGTH:
        raise ValueError(f"bert: sequence length must be >= {MIN_BERT_LENGTH}, got {max_len}")
    if vocab <= FIRST_WORD:
        raise ValueError(f"bert: vocabulary of {vocab} is too small")
    rng = np.random.default_rng(seed)
    global_batch = batch * world
    if sequences < global_batch:
        raise ValueError(f"bert: a corpus of {sequences} sequences is smaller than one global batch ({global_batch})")
    lengths = bert_lengths(sequences, max_len, rng)
    out = []
    for start in range(0, sequences - global_batch + 1, global_batch):
        lens = lengths[start:start + global_batch]
        width = int(lens.max())
        ids = np.zeros((global_batch, width), dtype=np.int64)
        types = np.zeros((global_batch, width), dtype=np.int64)
        mask = np.zeros((global_batch, width), dtype=np.float32)
        positions, labels = [], []
        for row, n in enumerate(lens):
            n = int(n)
            words = n - 3
            a = int(rng.integers(1, words)) if words > 1 else 1
            seq = rng.integers(FIRST_WORD, vocab, size=n)
            seq[0], seq[a + 1], seq[n - 1] = CLS, SEP, SEP
            types[row, a + 2:n] = 1
            mask[row, :n] = 1.0
            candidates = np.array([i for i in range(1, n - 1) if i != a + 1])
            chosen = np.sort(rng.choice(candidates, size=max(1, round(len(candidates) * MASK_RATE)), replace=False))
            labels.append(seq[chosen].copy())
            fate = rng.random(len(chosen))
            seq[chosen[fate < 0.8]] = MASK
            random_ones = chosen[(fate >= 0.8) & (fate < 0.9)]
            seq[random_ones] = rng.integers(FIRST_WORD, vocab, size=len(random_ones))
            ids[row, :n] = seq
            positions.append(chosen)
        nsp = rng.integers(0, 2, size=global_batch, dtype=np.int64)
        rows = slice(rank * batch, (rank + 1) * batch)
        local_positions = np.concatenate([positions[r] + (r - rank * batch) * width
                                          for r in range(rank * batch, (rank + 1) * batch)]).astype(np.int64)
        local_labels = np.concatenate(labels[rank * batch:(rank + 1) * batch]).astype(np.int64)
        arrays = (ids[rows].copy(), types[rows].copy(), mask[rows].copy(), local_positions, local_labels,
                  nsp[rows].copy())
        out.append(Batch(arrays, global_batch, int(lens.sum())))
    return out


def translation_lengths(count: int, max_len: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Source and target lengths (words, before <eos>/<bos>) of COUNT sentence pairs, at most max_len - 1."""
    src = np.rint(rng.lognormal(np.log(TRANSFORMER_MEDIAN_LENGTH), 0.6, size=count)).astype(np.int64)
    trg = np.rint(src * rng.uniform(0.8, 1.25, size=count)).astype(np.int64)
    return np.clip(src, 1, max_len - 1), np.clip(trg, 1, max_len - 1)


def transformer_corpus(pairs: int, batch_tokens: int, max_len: int, vocab: int, seed: int, rank: int = 0,
                       world: int = 1) -> list[Batch]:
    """Token-batched translation batches over PAIRS sentence pairs: each global batch holds at most
    batch_tokens x world padded tokens and a multiple of world pairs (rank r takes every world-th pair)."""
    if vocab <= FIRST_WORD:
        raise ValueError(f"transformer: vocabulary of {vocab} is too small")
    rng = np.random.default_rng(seed)
    src_len, trg_len = translation_lengths(pairs, max_len, rng)
    src_len, trg_len = src_len + 1, trg_len + 1  # + <eos> (source, labels) / <bos> (decoder input)
    order = np.lexsort((trg_len, src_len))
    if max(src_len.max(), trg_len.max()) * world > batch_tokens * world:
        raise ValueError(f"transformer: batch of {batch_tokens} tokens is shorter than the longest sentence "
                         f"({int(max(src_len.max(), trg_len.max()))} tokens)")
    budget = batch_tokens * world
    groups, current, longest = [], [], 0
    for index in order:
        width = max(longest, int(src_len[index]), int(trg_len[index]))
        if current and width * (len(current) + 1) > budget:
            keep = len(current) // world * world
            if keep:
                groups.append(current[:keep])
            current, longest = current[keep:], max((max(int(src_len[i]), int(trg_len[i])) for i in current[keep:]),
                                                   default=0)
            width = max(longest, int(src_len[index]), int(trg_len[index]))
        current.append(int(index))
        longest = width
    keep = len(current) // world * world
    if keep:
        groups.append(current[:keep])
    if not groups:
        raise ValueError(f"transformer: {pairs} sentence pairs give no batch for {world} rank(s)")
    words = [rng.integers(FIRST_WORD, vocab, size=int(max(s, t))) for s, t in zip(src_len, trg_len, strict=True)]
    targets = [rng.integers(FIRST_WORD, vocab, size=int(t) - 1) for t in trg_len]
    out = []
    for g in rng.permutation(len(groups)):
        members = groups[g][rank::world]
        s_width = int(max(src_len[i] for i in members))
        t_width = int(max(trg_len[i] for i in members))
        src = np.zeros((len(members), s_width), dtype=np.int64)
        trg = np.zeros((len(members), t_width), dtype=np.int64)
        lab = np.zeros((len(members), t_width), dtype=np.int64)
        for row, i in enumerate(members):
            n = int(src_len[i])
            src[row, :n - 1], src[row, n - 1] = words[i][:n - 1], EOS
            y = targets[i]
            trg[row, 0], trg[row, 1:len(y) + 1] = BOS, y
            lab[row, :len(y)], lab[row, len(y)] = y, EOS
        tokens = int(sum(int(trg_len[i]) for i in groups[g]))
        out.append(Batch((src, trg, lab), len(groups[g]), tokens))
    return out
