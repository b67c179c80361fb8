"""The local endpoint's model: a real ranking model, not an echo.

A factorisation machine (Rendle 2010) over 39 categorical fields, as in the TF-Serving ranking case
from the seeds: per row, 39 feature ids and 39 feature values give a click probability. Weights are
drawn from a fixed seed, so every process (and every test) computes the same outputs. Compute grows
linearly with the rows per request, so bigger requests cost the endpoint more, as on a real model.
"""

from __future__ import annotations

import numpy as np

from sm_locust.serializers.ranking import NUM_FIELDS

VOCAB_SIZE = 100_000
EMBEDDING_DIM = 16
SEED = 20240401


class RankingModel:
    """p(click) = sigmoid(w0 + sum_i w[id_i] x_i + 0.5 * sum_f ((sum_i v[id_i,f] x_i)^2 - sum_i v[id_i,f]^2 x_i^2))."""

    def __init__(self, vocab_size: int = VOCAB_SIZE, dim: int = EMBEDDING_DIM, seed: int = SEED):
        rng = np.random.default_rng(seed)
        self.vocab_size = vocab_size
        self.bias = np.float32(rng.normal(0.0, 0.1))
        self.linear = rng.normal(0.0, 0.05, size=vocab_size).astype(np.float32)
        self.factors = rng.normal(0.0, 0.05, size=(vocab_size, dim)).astype(np.float32)

    def predict(self, feat_ids: np.ndarray, feat_vals: np.ndarray) -> np.ndarray:
        """Probabilities (float32 [N]) for feat_ids int [N,39] and feat_vals float [N,39]."""
        ids = np.mod(feat_ids.astype(np.int64, copy=False), self.vocab_size)
        x = feat_vals.astype(np.float32, copy=False)
        linear = (self.linear[ids] * x).sum(axis=1)
        v = self.factors[ids] * x[:, :, None]  # [N, 39, dim]
        interactions = 0.5 * ((v.sum(axis=1) ** 2) - (v**2).sum(axis=1)).sum(axis=1)
        logits = self.bias + linear + interactions
        return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)


def sample_rows(rows: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic example inputs: ids in the vocabulary, values in [0, 1)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB_SIZE, size=(rows, NUM_FIELDS), dtype=np.int64)
    vals = rng.random(size=(rows, NUM_FIELDS), dtype=np.float32)
    return ids, vals
