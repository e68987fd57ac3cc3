"""The four rubric cells, defined once: their ids, their one order, and their default words.

Every page, form, export and check reads the cells from here, in the order
the review page reads the evidence: the red log, the stamp (the model
waited), the refusal note, then the diff (the test). A packet version words
each cell its own way and says what passes and what fails it; these are the
defaults, taken from the article the product comes from. Plain Python, no
Django: the grading core and the models both import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class CellDefault:
    key: str  # stored in the database (marks, tallies, packet versions): never rename one
    section: str  # the review page's section the cell sits beside
    label: str
    definition: str  # what passes and what fails the cell


RED_LOG = CellDefault(
    "red_log",
    "red-log",
    "Red log is a real pytest failure",
    "Pass: red.log is a real pytest run that shows FAILED, written before the model stamp. "
    "Fail: it is missing, empty, already green, or written by hand.",
)
MODEL_WAITED = CellDefault(
    "model_waited",
    "stamp",
    "Model waited",
    "Pass: model_allowed.at comes after the red log, so the model was asked only once the bug was seen. "
    "Fail: a patch arrived with no stamp, or the stamp comes before the red log.",
)
# The second cell of a take-home that uses no model (its policy "none"): there is no stamp, only red then green.
PATCH_WAITED = CellDefault(
    "model_waited",
    "stamp",
    "The patch waited for red",
    "Pass: green.log comes after the red log, so the code was changed only once the bug was seen. "
    "Fail: there is no red log, or it comes after the fix.",
)
REFUSAL_SPECIFIC = CellDefault(
    "refusal_specific",
    "refusal",
    "Refusal is specific",
    "Pass: refuse.md names one concrete harmful patch (one that hides the bug, drops data or weakens a test) "
    "and why it is wrong. Fail: it is missing, or says only something like \u201cI would be careful\u201d with "
    "no example.",
)
TEST_NAMES_BUG = CellDefault(
    "test_names_bug",
    "diff",
    "Test names the bug",
    "Pass: a test's name or assertion says the case that breaks in plain words (the input and what it should give). "
    "Fail: only variables were renamed, or the expectation was changed to match the bug.",
)

# The one order, everywhere.
CELLS: tuple[CellDefault, ...] = (RED_LOG, MODEL_WAITED, REFUSAL_SPECIFIC, TEST_NAMES_BUG)
KEYS: tuple[str, ...] = tuple(c.key for c in CELLS)
# The cells a reviewer scores before the diff unfolds (the article's reading order).
BEFORE_DIFF: tuple[str, ...] = KEYS[:3]

DEFAULT_LABELS: dict[str, str] = {c.key: c.label for c in CELLS}
DEFAULT_DEFINITIONS: dict[str, str] = {c.key: c.definition for c in CELLS}

LABEL_MAX = 200
DEFINITION_MAX = 1000


@dataclass(frozen=True)
class RubricCell:
    """One cell as a packet version words it."""

    key: str
    section: str
    label: str
    definition: str
    number: int  # 1 to 4, in the one order


def cells(
    labels: Mapping[str, str] | None = None, definitions: Mapping[str, str] | None = None, *, no_model: bool = False
) -> tuple[RubricCell, ...]:
    """The four cells in order, in a packet's words; an empty or missing word falls back to the default.

    ``no_model``: the take-home uses no model, so the second cell's default is
    PATCH_WAITED, and MODEL_WAITED's words (a form's untouched initial value) count as none given.
    """
    labels, definitions = labels or {}, definitions or {}

    def word(given: str | None, default: str, with_model: str) -> str:
        return default if not given or (no_model and given == with_model) else given

    defaults = (PATCH_WAITED if no_model and c is MODEL_WAITED else c for c in CELLS)
    return tuple(
        RubricCell(
            c.key,
            c.section,
            word(labels.get(c.key), d.label, c.label),
            word(definitions.get(c.key), d.definition, c.definition),
            n,
        )
        for n, (c, d) in enumerate(zip(CELLS, defaults), start=1)
    )
