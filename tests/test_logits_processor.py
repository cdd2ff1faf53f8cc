"""The transformers processor across generate calls and batch shapes, driven as generate drives it.

No model is needed to test what the processor reads: ``input_ids`` grows by one column a
step (rows of a batch item together), and ``scores`` is masked in place.
"""

from __future__ import annotations

import pytest

import constrain
from constrain.integrations.transformers import LogitsProcessor
from constrain.testing import tokenize_continuation

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def compiler(smollm2: object) -> constrain.Compiler:
    return constrain.Compiler(smollm2)


def _steps(processor: LogitsProcessor, prompt: list[list[int]], tokens: list[list[int]], width: int) -> list:
    """Call the processor as generate does: the prompt, then one more column a step."""
    ids = torch.tensor(prompt)
    allowed = []
    for column in [None, *zip(*tokens)]:
        if column is not None:
            ids = torch.cat([ids, torch.tensor(column).unsqueeze(1)], dim=1)
        scores = processor(ids, torch.zeros(ids.shape[0], width))
        allowed.append(torch.isfinite(scores))
    return allowed


def test_a_second_generate_call_starts_afresh(compiler: constrain.Compiler, smollm2: object) -> None:
    """Reused without reset(), the processor took the second prompt's tail for generated text."""
    guide = compiler.regex(r"[0-9]{2,4}")
    processor = LogitsProcessor(guide)
    width = guide.vocab_size
    digits = tokenize_continuation(smollm2, "1234")
    first = _steps(processor, [[7, 8, 9]], [digits], width)
    assert all(mask[0, t] for mask, t in zip(first, digits))
    second = _steps(processor, [[5, 6, 7, 8, 9, 10, 11]], [digits], width)  # another prompt, another length
    assert torch.equal(second[0], first[0])  # the initial state's mask again
    third = _steps(processor, [[1, 2, 3, 4]], [digits[:1]], width)  # one longer than the last: still new
    assert torch.equal(third[0], first[0])


def test_rows_per_guide_are_read_off_the_shapes(compiler: constrain.Compiler, smollm2: object) -> None:
    """Per-item guides with two beams each, num_beams not passed (was a bare IndexError)."""
    guides = [compiler.regex(r"[0-9]+"), compiler.regex(r"[a-z]+")]
    width = guides[0].vocab_size
    one, a = tokenize_continuation(smollm2, "1"), tokenize_continuation(smollm2, "a")
    rows = [one[:1], one[:1], a[:1], a[:1]]  # item 0's two beams, then item 1's
    masks = _steps(LogitsProcessor(guides), [[3, 4]] * 4, rows, width)
    for row in (0, 1):  # the digits guide, before and after a digit
        assert masks[0][row, one[0]] and not masks[0][row, a[0]]
        assert masks[1][row, one[0]] and not masks[1][row, a[0]]
    for row in (2, 3):  # the letters guide
        assert masks[0][row, a[0]] and not masks[0][row, one[0]]
        assert masks[1][row, a[0]] and not masks[1][row, one[0]]
    with pytest.raises(constrain.ConfigurationError, match="3 rows for 2 guides"):
        LogitsProcessor(guides)(torch.tensor([[1, 2]] * 3), torch.zeros(3, width))
    with pytest.raises(constrain.ConfigurationError, match="num_beams=3"):
        LogitsProcessor(guides, num_beams=3)(torch.tensor([[1, 2]] * 4), torch.zeros(4, width))
