"""The pure evidence checks: small modules, standard library only, no Django.

- ``artifacts``: which of the candidate's artifacts exist; reading them safely.
- ``redlog``: is red.log a real pytest failure of this tree (``genuine`` rule
  in its docstring); ``collect_test_ids`` for the ids a tree can fail.
- ``pytestlog``: reads pytest's terminal output (separators, each failure's
  frames and error lines); ``reproduction``: compares red.log's failures with
  the grader's real runs of the tree.
- ``timeline``: red, stamp and green in order, by receipts and zip times.
- ``receipts``: what the server's receipts stored, held against the zip, and
  the gate's own log (``artifacts/receipts.jsonl``).
- ``diff``: per-file diffs against the original fixture, with flags.
- ``refusal``: does refuse.md name a concrete harmful alternative.

Each returns a frozen dataclass whose ``to_dict()`` is the JSON the evidence
stores. They inform the reviewer; none of them fills a rubric cell.
"""
