"""A stored unified diff read back into lines that know their numbers, unified and side by side. Pure: no DB."""

import pytest

from grading.engine.diffview import find_line, parse_anchor, parse_unified, side_by_side

DIFF = (
    "--- a/invoices.py\n+++ b/invoices.py\n@@ -6,5 +6,6 @@\n"
    "     n = 0\n"
    "-            n += abs(int(row['cents']))\n"
    "+            n += int(row['cents'])\n"
    "+            seen += 1\n"
    "     return n\n"
    "\\ No newline at end of file\n"
)


def test_each_line_knows_its_number_before_and_after():
    lines = parse_unified(DIFF)
    assert [(l.kind, l.old, l.new) for l in lines] == [
        ("hunk", None, None), ("ctx", 6, 6), ("del", 7, None), ("add", None, 7), ("add", None, 8), ("ctx", 8, 9),
        ("hunk", None, None),
    ]
    assert [l.anchor for l in lines if l.kind != "hunk"] == ["new:6", "old:7", "new:7", "new:8", "new:9"]
    assert lines[2].text == "            n += abs(int(row['cents']))" and lines[2].words == "removed"
    assert lines[2].number == 7 and lines[3].number == 7


def test_side_by_side_pairs_each_removal_with_the_addition_after_it():
    rows = side_by_side(parse_unified(DIFF))
    drawn = [(r.left.anchor if r.left else None, r.right.anchor if r.right else None, bool(r.hunk)) for r in rows]
    assert drawn == [
        (None, None, True), ("new:6", "new:6", False), ("old:7", "new:7", False), (None, "new:8", False),
        ("new:9", "new:9", False), (None, None, True),
    ]


@pytest.mark.parametrize("text", ["binary file changed", "file too large to diff (1 -> 2 bytes)",
                                  "only line endings or a byte-order mark differ; the text is the same", ""])
def test_what_is_no_diff_has_no_lines(text):
    assert parse_unified(text) == []


def test_a_new_file_counts_from_one():
    lines = parse_unified("--- /dev/null\n+++ b/t.py\n@@ -0,0 +1,2 @@\n+a\n+b\n")
    assert [l.anchor for l in lines[1:]] == ["new:1", "new:2"]


@pytest.mark.parametrize("anchor, found", [("new:7", "            n += int(row['cents'])"),
                                           ("old:7", "            n += abs(int(row['cents']))"),
                                           ("new:6", "    n = 0"), ("old:6", None), ("new:99", None)])
def test_find_line_by_anchor(anchor, found):
    line = find_line(parse_unified(DIFF), anchor)
    assert (line.text if line else None) == found


@pytest.mark.parametrize("text, parsed", [("new:12", ("new", 12)), ("old:1", ("old", 1)), ("mid:1", None),
                                          ("new:", None), ("new:-1", None), ("new:1e3", None), ("", None),
                                          ("new:9999999999", None)])
def test_parse_anchor(text, parsed):
    assert parse_anchor(text) == parsed
