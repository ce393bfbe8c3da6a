"""The gateway's merge of RLD and MD streams never repeats, skips or reorders a token."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pdd_core.agent.gateway.types import StreamMerge

Frames = list[tuple[int, list[int], str, bool]]


@st.composite
def handoff_streams(draw: st.DrawFn) -> tuple[list[int], int, Frames]:
    tokens = draw(st.lists(st.integers(0, 257), min_size=1, max_size=40))
    handed = draw(st.integers(1, len(tokens)))  # RLD emits [0, handed), MD the rest
    frames: Frames = []
    for source, start, stop in (("rld", 0, handed), ("md", handed, len(tokens))):
        position = start
        while position < stop:
            size = draw(st.integers(1, 4))
            chunk = tokens[position : min(stop, position + size)]
            last = source == "md" and position + len(chunk) == len(tokens)
            frames.append((position, chunk, source, last))
            position += len(chunk)
    if handed == len(tokens):  # RLD finished it alone
        index, chunk, source, _ = frames[-1]
        frames[-1] = (index, chunk, source, True)
    duplicates = draw(st.lists(st.sampled_from(frames), max_size=3))
    order = draw(st.permutations(frames + duplicates))
    return tokens, handed, list(order)


@given(handoff_streams())
def test_any_arrival_order_yields_each_position_once_in_order(
    case: tuple[list[int], int, Frames],
) -> None:
    tokens, handed, frames = case
    merge = StreamMerge()
    out: list[tuple[int, str]] = []
    for index, chunk, source, last in frames:
        out.extend(merge.add(index, chunk, source, last=last))

    assert [t for t, _ in out] == tokens
    assert [s for _, s in out] == ["rld"] * handed + ["md"] * (len(tokens) - handed)
    assert merge.complete


def test_a_gap_holds_back_later_tokens_until_it_is_filled() -> None:
    merge = StreamMerge()

    assert merge.add(2, [30, 40], "md", last=True) == []
    assert merge.add(0, [10], "rld", last=False) == [(10, "rld")]
    assert not merge.complete
    assert merge.add(1, [20], "rld", last=False) == [(20, "rld"), (30, "md"), (40, "md")]
    assert merge.complete
    assert merge.add(1, [99], "rld", last=False) == []  # a late duplicate is ignored
