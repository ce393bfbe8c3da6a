"""``pdd_core.units``: BCR in good requests per $, the one conversion pages and planner share."""

from __future__ import annotations

import math

from frontend import units as page_units
from pdd_core.units import BCR_UNIT, bcr_figure, bcr_per_dollar


def test_bcr_reads_in_good_requests_per_dollar_and_never_as_nan() -> None:
    # 0.0268 req/s per $/h x 3,600 s/h = 96.48 good requests per $.
    assert [bcr_figure(v) for v in (0.0268, 0.03471, 0.0)] == ["96.5", "125", "0"]
    assert bcr_figure(math.nan) == "not measured"
    assert page_units.bcr_text(math.nan) == page_units.NO_FIGURE  # pages: the en dash
    # One home: the pages' unit and conversion are these.
    assert (page_units.BCR_UNIT, page_units.bcr_per_dollar) == (BCR_UNIT, bcr_per_dollar)
