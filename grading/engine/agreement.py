"""How much two reviewers agree on one rubric cell: percent agreement and Cohen's kappa.

Pure: no Django. The figures describe the reviewers, never a candidate. Each
cell is pass/fail, so two reviewers' marks over the submissions they both
scored fit a 2x2 table; everything here works on that table.

Cohen's kappa corrects the raw agreement for the agreement two reviewers
would reach by chance given how often each of them says "pass":

    kappa = (p_o - p_e) / (1 - p_e)

where p_o is the share of submissions they agree on and p_e the chance
agreement. When p_e is 1 (both said the same thing on every submission, so
there is no variation to agree about) kappa is undefined and we return None
rather than a number that would look meaningful.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """Counts of (reviewer a's mark, reviewer b's mark) over the submissions both scored."""

    both_pass: int = 0
    a_pass_b_fail: int = 0
    a_fail_b_pass: int = 0
    both_fail: int = 0

    @property
    def n(self) -> int:
        return self.both_pass + self.a_pass_b_fail + self.a_fail_b_pass + self.both_fail

    @property
    def agreed(self) -> int:
        return self.both_pass + self.both_fail

    def add(self, a_passed: bool, b_passed: bool, count: int = 1) -> Table:
        """A new table with `count` more submissions marked (a_passed, b_passed)."""
        fields = {
            (True, True): "both_pass",
            (True, False): "a_pass_b_fail",
            (False, True): "a_fail_b_pass",
            (False, False): "both_fail",
        }
        name = fields[(bool(a_passed), bool(b_passed))]
        return Table(**{**self.__dict__, name: getattr(self, name) + count})


def pair_tables(
    reviewer: int, marks: dict[str, bool], others: Iterable[tuple[int, str, bool]]
) -> dict[tuple[int, int, str], Table]:
    """The tables one newly submitted review adds: one per other reviewer and cell both marked.

    `marks` is the new review's {cell: passed}; `others` the (reviewer, cell,
    passed) marks of the other submitted reviews of the same upload. Each pair
    is keyed (lower reviewer id, higher reviewer id, cell), its marks turned to
    match, so a pair counts once whichever of the two submitted first.
    """
    tables: dict[tuple[int, int, str], Table] = {}
    for other, cell, passed in others:
        if other == reviewer or cell not in marks:
            continue
        if reviewer < other:
            key, a_passed, b_passed = (reviewer, other, cell), marks[cell], passed
        else:
            key, a_passed, b_passed = (other, reviewer, cell), passed, marks[cell]
        tables[key] = tables.get(key, Table()).add(a_passed, b_passed)
    return tables


def table_from_pairs(pairs: Iterable[tuple[bool, bool]]) -> Table:
    """Build the table from (a_passed, b_passed) pairs, one per submission both scored."""
    table = Table()
    for a, b in pairs:
        table = table.add(a, b)
    return table


def percent_agreement(table: Table) -> float | None:
    """Share of shared submissions on which the two agree, 0 to 100; None with nothing shared."""
    if table.n == 0:
        return None
    return 100.0 * table.agreed / table.n


def cohens_kappa(table: Table) -> float | None:
    """Cohen's kappa for the table; None with nothing shared or no variation at all."""
    n = table.n
    if n == 0:
        return None
    p_o = table.agreed / n
    a_pass = (table.both_pass + table.a_pass_b_fail) / n
    b_pass = (table.both_pass + table.a_fail_b_pass) / n
    p_e = a_pass * b_pass + (1 - a_pass) * (1 - b_pass)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1 - p_e)


@dataclass(frozen=True)
class PairAgreement:
    """The agreement of one pair of reviewers on one cell."""

    reviewer_a: str
    reviewer_b: str
    cell: str
    table: Table

    @property
    def n(self) -> int:
        return self.table.n

    @property
    def percent(self) -> float | None:
        return percent_agreement(self.table)

    @property
    def kappa(self) -> float | None:
        return cohens_kappa(self.table)


def describe_kappa(kappa: float | None) -> str:
    """Landis and Koch's words for a kappa value (a reading aid, not a verdict)."""
    if kappa is None:
        return "undefined"
    if kappa < 0:
        return "poor"
    for bound, words in ((0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if kappa <= bound:
            return words
    return "almost perfect"
