"""Grading's engine: plain Python, no Django.

It reads a candidate's archive (archive), runs tests in bubblewrap (sandbox, with the run caps in
sandbox.cgroups, the hosted session's shell in sandbox.shell and what goes inside in sandbox/sandboxed/),
builds the runner virtualenvs (runner, pythons, requirements), reads a packet (spec), checks the evidence
(checks/, core, integrity, replay, asciicast) and says what a reviewer reads (display, rubric, agreement).
The Django side of grading (models, tasks, pipeline, lifecycle, pages) calls it; it calls none of them,
which .importlinter's contracts keep so.
"""
