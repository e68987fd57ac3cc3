"""Three answers to the sample packet for the similar-submissions tests: one model's answer, the same answer
with every name changed and laid out anew, and a different honest answer (the corpus' own)."""

from __future__ import annotations

from grading.tests import corpus
from grading.tests.reviewing import ideal_evidence

MODEL_TEST = b'''from pathlib import Path

import invoices

FIXTURE = Path(__file__).parent / "sample.csv"


def test_refund_rows_lower_the_total(tmp_path):
    """A refund is a row with negative cents: it must be subtracted, not added."""
    ledger = tmp_path / "ledger.csv"
    ledger.write_text("cents\\n1000\\n-250\\n")  # one charge and one refund
    amount = invoices.total(ledger)
    assert amount == 750, f"expected 750 cents, got {amount}"


def test_sample_file_total_counts_its_refund():
    assert invoices.total(FIXTURE) == 1300
'''

# The same answer pasted by another candidate: every name changed, the comments gone, another layout.
RENAMED_TEST = b'''from pathlib import Path
import invoices
SAMPLE = Path(__file__).parent / 'sample.csv'

def test_negative_cents_are_refunds(tmp_path):
    """A refund is a row with negative cents: it must be subtracted, not added."""

    f = tmp_path / 'ledger.csv'
    f.write_text(
        'cents\\n1000\\n-250\\n',
    )
    got = invoices.total(
        f,
    )
    assert got == 750, f'expected 750 cents, got {amount}'

def test_the_given_csv():
    assert invoices.total(SAMPLE) == 1300
'''

MODEL_REFUSAL = (b"The model also proposed skipping every row whose cents are negative before summing. That would "
                 b"hide refunds from the books: revenue would be overstated and the test would pass for the wrong "
                 b"reason, so I did not apply it.\n")
# The same refusal, rewrapped and with other capitals.
REFLOWED_REFUSAL = (b"The model also proposed SKIPPING every row whose cents are negative\nbefore summing.\n\n"
                    b"That would hide refunds from the books:\nrevenue would be overstated and the test would pass "
                    b"for the wrong reason, so I did not apply it.")
MODEL_PROMPT = b"Here is invoices.py and a failing test. Why is the total too high when a row is a refund?\n"
OTHER_PROMPT = b"My CSV total ignores negative amounts. Suggest the smallest change to invoices.py.\n"


def model_files() -> dict[str, bytes]:
    return corpus.honest_files(**{"test_invoices.py": MODEL_TEST, "artifacts/refuse.md": MODEL_REFUSAL,
                                  "artifacts/prompt.txt": MODEL_PROMPT})


def renamed_files() -> dict[str, bytes]:
    return corpus.honest_files(**{"test_invoices.py": RENAMED_TEST, "artifacts/refuse.md": REFLOWED_REFUSAL,
                                  "artifacts/prompt.txt": OTHER_PROMPT})


def honest_files() -> dict[str, bytes]:
    return corpus.honest_files()


def _test_diff(test: bytes) -> str:
    return "--- a/test_invoices.py\n+++ b/test_invoices.py\n@@ -1,9 +1,18 @@\n" + "".join(
        "+" + line + "\n" for line in test.decode().splitlines())


def evidence_of(test: bytes, refusal: bytes, prompt: bytes) -> dict:
    """The ideal evidence with this test diff, refuse.md and prompt.txt, as grading would have stored them."""
    data = ideal_evidence()
    data["diff"]["files"] = [{"path": "test_invoices.py", "status": "modified", "is_test": True, "binary": False,
                              "diff": _test_diff(test)}]
    data["texts"]["refuse.md"] = refusal.decode()
    data["texts"]["prompt.txt"] = prompt.decode()
    return data


def model_evidence() -> dict:
    return evidence_of(MODEL_TEST, MODEL_REFUSAL, MODEL_PROMPT)


def renamed_evidence() -> dict:
    return evidence_of(RENAMED_TEST, REFLOWED_REFUSAL, OTHER_PROMPT)


def honest_evidence() -> dict:
    return evidence_of(corpus.HONEST_TEST, corpus.REFUSE, corpus.PROMPT)
