"""Relevance scores in [0, 1] from two signals: dense cosine similarity and lexical coverage.

Coverage is the IDF-weighted share of the query's terms that a record contains: asking
about "Jon's bakery" in a store that never mentions Jon caps every record's coverage.
The two signals are combined linearly and mapped through a logistic curve whose
parameters are fitted per embedding model on the dev set (docs/RETRIEVAL.md), so that
`similarity_threshold` means the same thing whatever the model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import AbstractSet, Any, Mapping, Sequence

from ocat.memory.storage.terms import idf
from ocat.memory.embedding.model_files import LOCAL_MODEL_NAME


@dataclass(frozen=True)
class Calibration:
    """z = cosine_weight * cosine + coverage_weight * coverage; relevance = sigmoid(scale * (z - center)).

    With `prompt_side`, an exchange's cosine is the better of its own vector's and its
    prompt's (ocat.memory.storage.prompt_vectors); without it (stores made before prompt vectors), its own.
    """

    cosine_weight: float
    coverage_weight: float
    center: float
    scale: float
    source: str = "default"
    prompt_side: bool = False

    def combine(self, cosine: float, coverage: float) -> float:
        """The uncalibrated fused score z of one record for one query."""
        return self.cosine_weight * cosine + self.coverage_weight * coverage

    def relevance_of(self, z: float) -> float:
        """A fused score mapped to a calibrated relevance in [0, 1]."""
        return 1.0 / (1.0 + math.exp(-self.scale * (z - self.center)))

    def raised(self, shift: float) -> Calibration:
        """This map asking `shift` more of every fused score (a store's floor: ocat.memory.retrieval.store_floor)."""
        return replace(self, center=self.center + shift) if shift else self

    def z_at(self, relevance: float) -> float:
        """The fused score that maps to `relevance` (the inverse of relevance_of)."""
        return self.center + math.log(relevance / (1.0 - relevance)) / self.scale

    def to_metadata(self) -> dict[str, Any]:
        """Flat keys for a Chroma collection's metadata."""
        return {f"calibration_{k}": v for k, v in asdict(self).items()}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Calibration | None:
        """The calibration stored on a collection, if any (a store made before `prompt_side`
        existed has none recorded: it scored without it)."""
        fields = {k: metadata[f"calibration_{k}"] for k in cls.__dataclass_fields__ if f"calibration_{k}" in metadata}
        try:
            return cls(**fields)
        except TypeError:  # a required number is missing
            return None

    def upgraded(self, shipped: Calibration) -> Calibration:
        """The calibration a store should use from now on: `shipped` if this one is a fit ocat
        shipped before (its stores get the prompt side and its fit), else this one (a fit the
        user made, kept)."""
        return shipped if (self.source, self.center, self.prompt_side) in _EARLIER_FITS else self


# Fitted on ../shared/eval/locomo-dev.json and chats-dev with bench/recall.py
# (docs/RETRIEVAL.md): the fused score z = max(cosine of the exchange, of its prompt, of its
# passages) + coverage at which the gate serves both sets best (z* = 0.70; the cross-validated
# fit of `bench/recall.py --folds` finds 0.71, within one step of its grid, and the point stays
# where users' scores and the document gate have it: docs/RETRIEVAL.md) is mapped to relevance 0.65,
# the default threshold (center = 0.70 - ln(0.65 / 0.35) / 6); scale 6 spreads answerable
# questions (median z about 1.1 -> 0.95) from off-topic ones (median about 0.5 -> 0.35).
_MINILM = Calibration(
    cosine_weight=1.0, coverage_weight=1.0, center=0.597, scale=6.0, source="dev fit, prompt side", prompt_side=True
)
CALIBRATIONS: dict[str, Calibration] = {LOCAL_MODEL_NAME: _MINILM}
# A model without a fit of its own borrows MiniLM's (sentence embedding models put related
# text in a similar cosine range); stores record which calibration they use.
FALLBACK = Calibration(
    cosine_weight=1.0, coverage_weight=1.0, center=0.597, scale=6.0, source="fallback: MiniLM fit", prompt_side=True
)
# Fits shipped before, recorded on older stores, that opening such a store replaces (after
# it has given every exchange its prompt vector): (source, center, prompt_side).
_EARLIER_FITS = {("locomo-dev fit", 0.547, False), ("fallback: MiniLM fit", 0.547, False)}


def calibration_for(model: str) -> Calibration:
    """The shipped calibration of an embedding model, or the conservative fallback."""
    return CALIBRATIONS.get(model, FALLBACK)


def coverage(
    query_terms: Sequence[str], record_terms: AbstractSet[str], doc_freqs: Mapping[str, int], total: int
) -> float:
    """IDF-weighted share of the (unique) query terms present in a record, in [0, 1]."""
    unique = list(dict.fromkeys(query_terms))
    if not unique:
        return 0.0
    weights = {t: idf(doc_freqs.get(t, 0), total) for t in unique}
    whole = sum(weights.values())
    return sum(w for t, w in weights.items() if t in record_terms) / whole if whole else 0.0
