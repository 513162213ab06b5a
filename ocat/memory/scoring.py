"""Relevance scores in [0, 1] from two signals: dense cosine similarity and lexical coverage.

Coverage is the IDF-weighted share of the query's terms that a record contains: asking
about "Jon's bakery" in a store that never mentions Jon caps every record's coverage.
The two signals are combined linearly and mapped through a logistic curve whose
parameters are fitted per embedding model on the dev set (docs/RETRIEVAL.md), so that
`similarity_threshold` means the same thing whatever the model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import AbstractSet, Any, Mapping, Sequence

from ocat.memory.lexical import idf
from ocat.memory.model_files import LOCAL_MODEL_NAME


@dataclass(frozen=True)
class Calibration:
    """z = cosine_weight * cosine + coverage_weight * coverage; relevance = sigmoid(scale * (z - center))."""

    cosine_weight: float
    coverage_weight: float
    center: float
    scale: float
    source: str = "default"

    def combine(self, cosine: float, coverage: float) -> float:
        """The uncalibrated fused score z of one record for one query."""
        return self.cosine_weight * cosine + self.coverage_weight * coverage

    def relevance_of(self, z: float) -> float:
        """A fused score mapped to a calibrated relevance in [0, 1]."""
        return 1.0 / (1.0 + math.exp(-self.scale * (z - self.center)))

    def to_metadata(self) -> dict[str, Any]:
        """Flat keys for a Chroma collection's metadata."""
        return {f"calibration_{k}": v for k, v in asdict(self).items()}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Calibration | None:
        """The calibration stored on a collection, if any."""
        try:
            return cls(**{k: metadata[f"calibration_{k}"] for k in cls.__dataclass_fields__})
        except KeyError:
            return None


# Fitted on ../shared/eval/locomo-dev.json with bench/recall.py (docs/RETRIEVAL.md): the
# fused score z = cosine + coverage that 90% of off-topic questions stay below (z* = 0.65)
# is mapped to relevance 0.65, the default threshold; scale 6 spreads the dev set's
# answerable questions (median z 1.08 -> 0.95) and off-topic ones (median 0.43 -> 0.29).
_MINILM = Calibration(cosine_weight=1.0, coverage_weight=1.0, center=0.547, scale=6.0, source="locomo-dev fit")
CALIBRATIONS: dict[str, Calibration] = {LOCAL_MODEL_NAME: _MINILM}
# A model without a fit of its own borrows MiniLM's (sentence embedding models put related
# text in a similar cosine range); stores record which calibration they use.
FALLBACK = Calibration(cosine_weight=1.0, coverage_weight=1.0, center=0.547, scale=6.0, source="fallback: MiniLM fit")


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
