"""Properties of the money arithmetic: exact totals, discounts never raise a bill, linearity."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from controlplane.billing.pricing import (
    AMOUNT_QUANTUM,
    Prices,
    attainment_pct,
    component_amount,
    line_amounts,
    total_of,
)

tokens = st.integers(min_value=0, max_value=10**12)
price = st.decimals(min_value=0, max_value=1000, places=6, allow_nan=False, allow_infinity=False)


@st.composite
def prices(draw: st.DrawFn) -> Prices:
    miss = draw(price)
    hit = draw(st.decimals(min_value=0, max_value=miss, places=6))
    return Prices(miss, hit, draw(price))


def test_rounding_is_half_even_to_a_millionth() -> None:
    # 1 token at 0.5 per million is exactly 0.0000005: ties go to the even neighbour
    assert component_amount(1, Decimal("0.5")) == Decimal("0.000000")
    assert component_amount(3, Decimal("0.5")) == Decimal("0.000002")
    assert component_amount(1_000_000, Decimal("2.00")) == Decimal("2.000000")


@given(st.lists(st.tuples(prices(), tokens, tokens, tokens), max_size=20))
def test_invoice_total_is_exactly_the_sum_of_lines(
    rows: list[tuple[Prices, int, int, int]],
) -> None:
    lines = [line_amounts(p, miss_tokens=m, hit_tokens=h, output_tokens=o) for p, m, h, o in rows]

    total = total_of([line.amount for line in lines])

    assert total == sum((line.amount for line in lines), Decimal(0))
    assert total.as_tuple().exponent == -6
    for line in lines:
        assert line.amount == line.miss_amount + line.hit_amount + line.output_amount


@given(prices(), tokens, tokens, tokens, st.data())
def test_hit_discount_never_raises_a_bill(
    p: Prices, miss: int, hit: int, output: int, data: st.DataObject
) -> None:
    moved = data.draw(st.integers(min_value=0, max_value=miss))

    before = line_amounts(p, miss_tokens=miss, hit_tokens=hit, output_tokens=output)
    after = line_amounts(p, miss_tokens=miss - moved, hit_tokens=hit + moved, output_tokens=output)

    # rounding of two components can add at most one quantum each way
    assert after.amount <= before.amount + 2 * AMOUNT_QUANTUM
    assert after.saving >= before.saving - 2 * AMOUNT_QUANTUM


@given(prices(), tokens)
def test_all_hits_cost_no_more_than_all_misses(p: Prices, n: int) -> None:
    all_miss = line_amounts(p, miss_tokens=n, hit_tokens=0, output_tokens=0)
    all_hit = line_amounts(p, miss_tokens=0, hit_tokens=n, output_tokens=0)

    assert all_hit.amount <= all_miss.amount
    assert all_hit.amount + all_hit.saving - all_miss.amount in {
        -AMOUNT_QUANTUM,
        Decimal(0),
        AMOUNT_QUANTUM,
    }


@given(price, tokens, tokens)
def test_linear_in_tokens_up_to_rounding(unit: Decimal, a: int, b: int) -> None:
    together = component_amount(a + b, unit)
    apart = component_amount(a, unit) + component_amount(b, unit)

    assert abs(together - apart) <= AMOUNT_QUANTUM
    assert abs(together - Decimal(a + b) * unit / Decimal(10**6)) <= AMOUNT_QUANTUM / 2


def test_attainment_percent() -> None:
    assert attainment_pct(2, 3) == Decimal("66.67")
    assert attainment_pct(0, 0) is None
