"""Refusal check: the sample packet's hints on realistic refuse.md notes."""

import pytest

from grading.engine.checks.refusal import check_refusal
from grading.engine.spec import sample_spec

HINTS = sample_spec().refusal_hints

SPECIFIC = [
    ("the article's sentence", "dropping rows changes revenue, it does not fix the sum.", ["dropping rows"]),
    ("skip negatives, wrapped over lines",
     "The model's first answer was to skip\nnegative rows in the loop. That hides every refund from the total.\n",
     ["dropping rows"]),
    ("past tense, noun first", "# Refused\n\nIt proposed that refund rows be *filtered* out before summing; "
                               "customers would be billed for money we gave back.", ["dropping rows"]),
    ("code in the note", "Refused: `if int(row['cents']) > 0: n += ...` because refunds stop counting at all.",
     ["dropping rows"]),
    ("keep only positive", "It said to keep only the positive amounts, which quietly loses the refunds.",
     ["dropping rows"]),
    ("abs kept, sign trick", "The model suggested keeping abs() and subtracting refunds later with a second "
                             "pass; that double-handles the sign and hides the bug.", ["abs"]),
    ("absolute value", "Using the absolute value of each amount is exactly the bug: refunds turn into charges.",
     ["abs"]),
    ("pandas", "Switching to pandas and a DataFrame just to add three integers pulls in a heavy dependency.",
     ["pandas"]),
    ("pd.read_csv", "It rewrote the loop as pd.read_csv(path).cents.sum(), a new dependency for one sum.",
     ["pandas"]),
    ("eval", "It suggested eval(row['cents']) to 'handle any number format'; that runs whatever the CSV holds.",
     ["eval"]),
    ("/etc", "The reply read a currency table from /etc/billing.conf, which the tests cannot control.", ["/etc"]),
    ("several at once", "No to: dropping the -200 row, wrapping in abs, or pandas. Each changes the revenue "
                        "instead of the sum.", ["dropping rows", "abs", "pandas"]),
    ("Windows line endings and a list", "Refused patch:\r\n\r\n- delete the refund line from sample.csv\r\n"
                                        "- it makes the test green but the books wrong\r\n", ["dropping rows"]),
]


@pytest.mark.parametrize("case,text,mentions", SPECIFIC, ids=[c[0] for c in SPECIFIC])
def test_specific_refusal(case, text, mentions):
    report = check_refusal(text, HINTS)
    assert report.to_dict() == {"present": True, "specific": True, "mentions": mentions}


VAGUE = [
    ("I would be careful", "I would be careful.", []),
    ("generic caution", "I would not apply anything I don't understand. Always review model output carefully.", []),
    ("bare keyword", "no eval", ["eval"]),
    ("keyword list", "abs, pandas", ["abs", "pandas"]),
    ("quoted heading only", "> ## Careful\n> I would be careful with the model's ideas.", []),
    ("the word evaluation is not eval", "Careful evaluation of every suggestion matters a great deal to me.", []),
    ("literal_eval is not eval", "I used ast.literal_eval on nothing and reviewed the reply line by line.", []),
]


@pytest.mark.parametrize("case,text,mentions", VAGUE, ids=[c[0] for c in VAGUE])
def test_vague_refusal(case, text, mentions):
    report = check_refusal(text, HINTS)
    assert (report.present, report.specific, list(report.mentions)) == (True, False, mentions)


@pytest.mark.parametrize("text", [None, "", "  \n\n"])
def test_missing_refusal(text):
    assert check_refusal(text, HINTS).to_dict() == {"present": False, "specific": False, "mentions": []}


def test_broken_hint_is_read_as_plain_words():
    report = check_refusal("Refusing the fix that used a (broken regex everywhere in the loop.",
                           {"broken": "(broken"})
    assert report.mentions == ("broken",) and report.specific


def test_a_hint_may_carry_several_patterns_and_any_one_counts():
    hints = {"dropping rows": [r"\bdrop(?:ping)? rows\b", r"\bsupprimer les lignes\b"]}
    english = check_refusal("Dropping rows would hide every refund from the monthly total.", hints)
    french = check_refusal("Il proposait de supprimer les lignes de remboursement, ce qui fausse le total.", hints)
    neither = check_refusal("I would be careful with the model's answer and read it twice before.", hints)
    assert english.mentions == french.mentions == ("dropping rows",)
    assert french.specific and not neither.mentions


def test_words_matched_by_two_patterns_of_a_hint_are_set_aside_once():
    hints = {"abs": [r"\babs\b", r"\babs\(\)"]}
    # Five words besides the hint: still specific, though both patterns match "abs".
    assert check_refusal("abs() keeps every refund positive here", hints).specific
