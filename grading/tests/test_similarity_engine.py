"""The similarity measure (grading.engine.similarity): normalising, winnowed fingerprints, the score. No database."""

from __future__ import annotations

import pytest

from grading.engine import similarity as sim

MODEL_TEST = '''
def test_refund_rows_are_subtracted(tmp_path):
    """A refund row carries negative cents and lowers the total."""
    csv_file = tmp_path / "refunds.csv"
    csv_file.write_text("cents\\n1000\\n-250\\n")  # one charge, one refund
    result = invoices.total(csv_file)
    assert result == 750, f"expected 750, got {result}"
'''

# The same code, every name changed, comments gone, laid out by another hand (a formatter's trailing comma too).
RENAMED = '''
def test_negative_amounts_reduce_sum(folder):
    """A refund row carries negative cents and lowers the total."""

    path = folder / "refunds.csv"
    path.write_text(
        'cents\\n1000\\n-250\\n',
    )
    got = invoices.total(path)   # the sum
    assert got == 750, f"expected 750, got {result}"
'''

OTHER_TEST = '''
@pytest.mark.parametrize("rows, expected", [(["500", "-200"], 300), (["-100"], -100)])
def test_total_keeps_the_sign_of_each_row(tmp_path, rows, expected):
    data = tmp_path / "s.csv"
    data.write_text("\\n".join(["cents", *rows]) + "\\n")
    assert invoices.total(data) == expected
'''


def test_names_become_one_placeholder_and_keywords_stay():
    assert sim.code_tokens("total = abs(value) if value else None") == [
        "V", "=", "V", "(", "V", ")", "if", "V", "else", "None",
    ]


@pytest.mark.parametrize("a, b", [
    ("x = 1  # one", "x = 1"),
    ("x=1\n\n\n", "x = 1"),
    ("f(a, b,)", "f(a, b)"),
    ("f(\n    a,\n    b,\n)", "f(a, b)"),
    ("s = 'a  b'", 's = "a b"'),
    ("def f(rows):\n    return rows", "def g(items):\n  return items"),
])
def test_whitespace_comments_trailing_commas_quotes_and_names_do_not_count(a, b):
    assert sim.code_tokens(a) == sim.code_tokens(b)


@pytest.mark.parametrize("a, b", [
    ("x = 1", "x = 2"),  # numbers are kept
    ("x = a + b", "x = a - b"),  # so are operators
    ("if x: pass", "while x: pass"),  # and keywords
    ("s = 'refund'", "s = 'charge'"),  # and what a string says
])
def test_what_code_does_is_kept(a, b):
    assert sim.code_tokens(a) != sim.code_tokens(b)


def test_a_hash_sign_inside_a_string_is_no_comment():
    assert sim.code_tokens("s = '# not a comment'") == ["V", "=", "S:# not a comment"]


def test_prose_is_words_lower_case_without_punctuation():
    assert sim.text_tokens("Dropping rows -- it CHANGES revenue!\n\n(Not a fix.)") == [
        "dropping", "rows", "it", "changes", "revenue", "not", "a", "fix",
    ]


def test_winnowing_keeps_the_smallest_hash_of_every_window():
    hashes = [77, 72, 42, 17, 98, 50, 17, 98, 8, 88, 67, 39, 23, 85]
    # windows of 4: 17 for the first five (the second 17 once the first is out of sight), 8 for the next
    # four, then 23; 39 is never the smallest of its window
    assert sim.winnow(hashes, 4) == {17, 8, 23}


def test_a_text_shorter_than_a_window_keeps_its_smallest_hash_and_none_keeps_none():
    assert sim.winnow([5, 3, 9], 4) == {3}
    assert sim.winnow([], 4) == frozenset()
    assert sim.kgram_hashes([], 5) == []
    assert len(sim.kgram_hashes(["a", "b"], 5)) == 1


def test_any_shared_run_of_k_plus_w_minus_1_tokens_shares_a_fingerprint():
    shared = [f"t{i}" for i in range(sim.CODE_K + sim.WINDOW - 1)]
    left = sim.winnow(sim.kgram_hashes(["a", "b", "c", *shared, "d"], sim.CODE_K))
    right = sim.winnow(sim.kgram_hashes(["x", *shared, "y", "z", "w"], sim.CODE_K))
    assert left & right


def test_renamed_and_reformatted_code_has_the_same_fingerprints():
    assert sim.code_fingerprints(MODEL_TEST) == sim.code_fingerprints(RENAMED)
    assert len(sim.code_fingerprints(MODEL_TEST)) >= sim.MIN_FINGERPRINTS


def test_a_different_answer_shares_few_fingerprints():
    a, b = sim.code_fingerprints(MODEL_TEST), sim.code_fingerprints(OTHER_TEST)
    assert sim.jaccard(len(a & b), len(a), len(b)) < sim.THRESHOLD


def test_added_lines_are_the_candidates_own_without_headers_or_context():
    diff = "--- a/t.py\n+++ b/t.py\n@@ -1,2 +1,3 @@\n import x\n-old = 1\n+new = 2\n+++counter\n"
    assert sim.added_lines(diff) == "new = 2\n++counter"


def evidence(test: str, prompt: str = "", refusal: str = "", production: str = "", red_log: str = "") -> dict:
    files = [{"path": "test_invoices.py", "is_test": True, "binary": False,
              "diff": "--- a/test_invoices.py\n+++ b/test_invoices.py\n@@ -1 +1,9 @@\n"
                      + "".join("+" + line + "\n" for line in test.splitlines())}]
    if production:
        files.append({"path": "invoices.py", "is_test": False, "binary": False,
                      "diff": "@@ -1 +1 @@\n" + "".join("+" + line + "\n" for line in production.splitlines())})
    return {"diff": {"files": files}, "texts": {"prompt.txt": prompt, "refuse.md": refusal, "red.log": red_log}}


REFUSAL = ("The model suggested filtering out every row whose cents are negative before summing. That hides "
           "refunds from the books: revenue would be overstated and the test would pass for the wrong reason.")


def test_two_copies_are_similar_in_the_channels_they_share_and_a_different_answer_is_not():
    a = sim.fingerprint_evidence(evidence(MODEL_TEST, refusal=REFUSAL))
    b = sim.fingerprint_evidence(evidence(RENAMED, refusal=REFUSAL.upper().replace(". ", ".\n\n")))
    c = sim.fingerprint_evidence(evidence(OTHER_TEST, refusal="Dropping rows changes revenue; I did not."))
    assert sim.compare(a, b) == {sim.TESTS: 1.0, sim.REFUSAL: 1.0}
    assert sim.compare(a, c) == {} and sim.compare(b, c) == {}


def test_what_the_packet_gives_everyone_is_left_out():
    fixture = {"invoices.py": MODEL_TEST.encode(), "data.bin": b"\xff\xfe"}
    base = sim.base_of(fixture, prompt=REFUSAL)
    prints = sim.fingerprint_evidence(evidence(MODEL_TEST, prompt=REFUSAL, refusal=REFUSAL), base)
    # the test copies the packet's own file, and the refusal its prompt: nothing of either is left to match
    assert prints[sim.TESTS] == frozenset() and prints[sim.REFUSAL] == frozenset()
    assert sim.compare(prints, prints) == {}


def test_a_red_log_pasted_into_the_prompt_is_not_a_match():
    log = "\n".join(f"FAILED test_invoices.py::test_{i} - assert {i} == {i + 1}" for i in range(20))
    a = sim.fingerprint_evidence(evidence("x = 1", prompt="Please fix this failure:\n" + log, red_log=log))
    b = sim.fingerprint_evidence(evidence("y = 2", prompt="What is wrong here?\n" + log, red_log=log))
    assert sim.compare(a, b) == {}


@pytest.mark.parametrize("shared, a, b, similar", [
    (4, 4, 4, True),  # the same, at the smallest size that counts
    (3, 3, 3, False),  # the same, but too short to prove anything
    (5, 10, 10, False),  # a third of the union
    (10, 12, 18, True),  # 10 / 20: at the threshold
    (9, 12, 18, False),  # 9 / 21
    (10, 12, 16, True),  # 10 / 18
])
def test_the_threshold(shared, a, b, similar):
    assert sim.is_similar(shared, a, b) is similar
