"""Exact money arithmetic for invoices, in ``Decimal``; no floats anywhere on this path.

Rounding rule (documented in the README and the schema):

- a component amount is ``tokens x price_per_mtok / 10^6``, computed exactly, then quantized to
  ``AMOUNT_QUANTUM`` (0.000001 of the currency unit) with ``ROUND_HALF_EVEN`` (banker's rounding,
  so rounding errors do not drift one way over many lines);
- a line amount is the sum of its three rounded component amounts (miss input, hit input,
  output), and the invoice total is the sum of its rounded line amounts, exactly;
- the cache-hit saving of a line is ``hit_tokens x (miss price - hit price) / 10^6``, rounded
  the same way.

Payment systems that charge in the currency's minor unit round the total once, at payment.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal

AMOUNT_QUANTUM = Decimal("0.000001")
PER_MILLION = Decimal(1_000_000)
# Enough digits for 10^15 tokens at any price with 6 decimals, so nothing rounds before quantize.
_CONTEXT = Context(prec=60, rounding=ROUND_HALF_EVEN)


@dataclass(frozen=True)
class Prices:
    """Per-million-token prices of one price-book version."""

    miss_input_per_mtok: Decimal
    hit_input_per_mtok: Decimal
    output_per_mtok: Decimal


@dataclass(frozen=True)
class LineAmounts:
    miss_amount: Decimal
    hit_amount: Decimal
    output_amount: Decimal
    amount: Decimal
    saving: Decimal


def component_amount(tokens: int, price_per_mtok: Decimal) -> Decimal:
    """``tokens x price / 10^6`` rounded half-even to ``AMOUNT_QUANTUM``."""
    if tokens < 0:
        raise ValueError("tokens must not be negative")
    exact = _CONTEXT.divide(_CONTEXT.multiply(Decimal(tokens), price_per_mtok), PER_MILLION)
    return exact.quantize(AMOUNT_QUANTUM, rounding=ROUND_HALF_EVEN, context=_CONTEXT)


def line_amounts(
    prices: Prices, *, miss_tokens: int, hit_tokens: int, output_tokens: int
) -> LineAmounts:
    """The rounded amounts of one invoice line; ``amount`` is the exact sum of the components."""
    miss = component_amount(miss_tokens, prices.miss_input_per_mtok)
    hit = component_amount(hit_tokens, prices.hit_input_per_mtok)
    output = component_amount(output_tokens, prices.output_per_mtok)
    discount = prices.miss_input_per_mtok - prices.hit_input_per_mtok
    saving = component_amount(hit_tokens, discount) if discount > 0 else Decimal("0.000000")
    return LineAmounts(
        miss_amount=miss,
        hit_amount=hit,
        output_amount=output,
        amount=miss + hit + output,
        saving=saving,
    )


def total_of(amounts: list[Decimal]) -> Decimal:
    """The exact sum of already rounded amounts (no further rounding)."""
    return sum(amounts, Decimal("0.000000"))


def attainment_pct(met: int, requests: int) -> Decimal | None:
    """SLA attainment in percent with two decimals, or None when there were no requests."""
    if requests == 0:
        return None
    return (Decimal(100 * met) / Decimal(requests)).quantize(
        Decimal("0.01"), rounding=ROUND_HALF_EVEN
    )
