"""Recruiter forms: packets and invitations."""

from __future__ import annotations

import re
import shlex

from django import forms

from grading.spec import split_decoys

from .actions import PacketError, VersionContent, read_decoys_zip, read_zip_tree
from .invites import parse_invite_lines
from .models import DEFAULT_RUBRIC, Decision, Packet, PacketFile, PacketVersion

MAX_PACKET_ZIP_BYTES = 5 * 1024 * 1024


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _label_map(text: str, field: str) -> dict[str, str]:
    """Parse `label: regex` lines into a dict, checking each regex compiles; one message per bad line."""
    result: dict[str, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        label, sep, pattern = line.partition(":")
        if not sep or not label.strip() or not pattern.strip():
            problems.append(f"{field}, line {number}: write it as `label: regular expression`.")
            continue
        try:
            re.compile(pattern.strip())
        except re.error as exc:
            problems.append(f"{field}, line {number} ({label.strip()}): the pattern is not valid: {exc}.")
            continue
        result[label.strip()] = pattern.strip()
    if problems:
        raise forms.ValidationError(problems)
    return result


def _format_map(mapping: dict[str, str]) -> str:
    return "\n".join(f"{k}: {v}" for k, v in mapping.items())


class PacketVersionForm(forms.Form):
    """The fields every version has. Zips are required for a new packet, optional for an edit."""

    prompt = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14}), help_text="Markdown. Candidates read it on their page."
    )
    fixture_zip = forms.FileField(
        required=False, label="Fixture (zip)", help_text="The tree handed to candidates, tests included."
    )
    solution_zip = forms.FileField(
        required=False,
        label="Reference solution (zip)",
        help_text="The fixed production files, at the same paths as in the fixture. "
        "Used to check that a candidate's test passes on correct code.",
    )
    reference_tests_zip = forms.FileField(
        required=False, label="Hidden reference tests (zip)", help_text="Hidden tests run against the candidate's fix."
    )
    decoys_zip = forms.FileField(
        required=False, label="Decoys (zip, optional)",
        help_text="Plausible wrong fixes, one folder per decoy holding production files at their fixture paths "
        "(for example drop-refund-rows/invoices.py). The candidate's tests run over each; a test that "
        "catches the bug rejects them.",
    )
    test_command = forms.CharField(initial="python -m pytest -q", max_length=200)
    time_limit_minutes = forms.IntegerField(
        initial=90, min_value=5, max_value=7 * 24 * 60, label="Time limit (minutes)",
        help_text="From 5 minutes to 7 days (10080). The clock starts when the candidate presses Start.",
    )
    protected_paths = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One path per line: data that must not change (e.g. sample.csv).",
    )
    forbidden_patterns = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One per line, `label: regular expression`, flagged when an added line matches.",
    )
    refusal_hints = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One per line, `label: regular expression`: harmful alternatives a refusal may name.",
    )
    rubric_red_log = forms.CharField(
        initial=DEFAULT_RUBRIC["red_log"], max_length=200, label="Rubric cell 1 (the red log)"
    )
    rubric_test_names_bug = forms.CharField(
        initial=DEFAULT_RUBRIC["test_names_bug"], max_length=200, label="Rubric cell 2 (the test)"
    )
    rubric_model_waited = forms.CharField(
        initial=DEFAULT_RUBRIC["model_waited"], max_length=200, label="Rubric cell 3 (the wait)"
    )
    rubric_refusal_specific = forms.CharField(
        initial=DEFAULT_RUBRIC["refusal_specific"], max_length=200, label="Rubric cell 4 (the refusal)",
        help_text="The four cells' wording as reviewers see it; each is pass or fail, never added up.",
    )

    def __init__(self, *args, base: PacketVersion | None = None, **kwargs):
        self.base = base
        if base is not None and not kwargs.get("initial"):
            kwargs["initial"] = {
                "prompt": base.prompt,
                "test_command": base.test_command,
                "time_limit_minutes": base.time_limit_minutes,
                "protected_paths": "\n".join(base.protected_paths),
                "forbidden_patterns": _format_map(base.forbidden_patterns),
                "refusal_hints": _format_map(base.refusal_hints),
                **{f"rubric_{k}": v for k, v in base.rubric_labels().items()},
            }
        super().__init__(*args, **kwargs)
        if base is None:
            self.fields["fixture_zip"].required = True
            self.fields["solution_zip"].required = True
        else:
            for name in ("fixture_zip", "solution_zip", "reference_tests_zip", "decoys_zip"):
                self.fields[name].help_text += " Leave empty to keep the current files."

    def clean_test_command(self) -> str:
        value = self.cleaned_data["test_command"]
        try:
            parts = shlex.split(value)
        except ValueError as exc:
            raise forms.ValidationError(f"The command cannot be read: {exc}.")
        if not parts:
            raise forms.ValidationError("Give the command that runs the tests.")
        return value

    def clean_forbidden_patterns(self) -> dict[str, str]:
        return _label_map(self.cleaned_data["forbidden_patterns"], "Forbidden patterns")

    def clean_refusal_hints(self) -> dict[str, str]:
        return _label_map(self.cleaned_data["refusal_hints"], "Refusal hints")

    def _zip(self, field: str, what: str, kind: str) -> dict[str, bytes] | None:
        uploaded = self.cleaned_data.get(field)
        if not uploaded:
            return self.base.files_of(kind) if self.base is not None else None
        if uploaded.size > MAX_PACKET_ZIP_BYTES:
            self.add_error(field, f"The {what} zip is larger than 5 MB; packets should be tiny trees.")
            return None
        try:
            return read_zip_tree(uploaded, what)
        except PacketError as exc:
            head, sep, reason = str(exc).partition(": ")
            if sep and reason[:2].istitle():  # "...cannot be used: The upload..." reads as one sentence
                reason = reason[0].lower() + reason[1:]
            self.add_error(field, head + sep + reason)
            return None

    def clean(self):
        """Read the zips with the other fields, so every problem is listed after one submit."""
        cleaned = super().clean()
        self._trees = {
            "fixture": self._zip("fixture_zip", "fixture", PacketFile.Kind.FIXTURE),
            "solution": self._zip("solution_zip", "solution", PacketFile.Kind.SOLUTION),
            "tests": self._zip("reference_tests_zip", "reference tests", PacketFile.Kind.REFERENCE_TEST),
            "decoys": self._decoys(),
        }
        return cleaned

    def _decoys(self) -> dict[str, dict[str, bytes]] | None:
        uploaded = self.cleaned_data.get("decoys_zip")
        if not uploaded:
            return split_decoys(self.base.files_of(PacketFile.Kind.DECOY)) if self.base is not None else None
        if uploaded.size > MAX_PACKET_ZIP_BYTES:
            self.add_error("decoys_zip", "The decoys zip is larger than 5 MB; packets should be tiny trees.")
            return None
        try:
            return read_decoys_zip(uploaded)
        except PacketError as exc:
            self.add_error("decoys_zip", str(exc))
            return None

    def content(self) -> VersionContent | None:
        """The version this form describes, or None with errors added to the form."""
        data = self.cleaned_data
        fixture, solution, tests = (self._trees[k] for k in ("fixture", "solution", "tests"))
        if self.errors:
            return None
        return VersionContent(
            prompt=data["prompt"],
            fixture=fixture or {},
            solution=solution or {},
            reference_tests=tests or {},
            test_command=data["test_command"],
            protected_paths=tuple(_lines(data["protected_paths"])),
            forbidden_patterns=data["forbidden_patterns"],
            refusal_hints=data["refusal_hints"],
            time_limit_minutes=data["time_limit_minutes"],
            rubric={k: data[f"rubric_{k}"] for k in DEFAULT_RUBRIC},
            decoys=self._trees["decoys"] or {},
        )


class NewPacketForm(PacketVersionForm):
    title = forms.CharField(max_length=200)
    slug = forms.SlugField(help_text="Short name used in URLs and on the command line, e.g. refund-sum.")

    field_order = ["title", "slug"]

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if Packet.objects.filter(slug=slug).exists():
            raise forms.ValidationError("A packet with this slug exists already.")
        return slug


class InviteForm(forms.Form):
    lines = forms.CharField(
        label="Candidates",
        widget=forms.Textarea(attrs={"rows": 6, "placeholder": "Ada Lovelace, ada@example.com"}),
        help_text='One candidate per line: name, email, or Name <email> as mail clients copy it. '
        'Put a name that holds a comma in double quotes ("Lovelace, Ada", ada@example.com).',
    )
    send_email = forms.BooleanField(initial=True, required=False, label="Email each candidate their link")

    def clean_lines(self):
        rows, errors = parse_invite_lines(self.cleaned_data["lines"])
        if errors:
            raise forms.ValidationError([str(e) for e in errors])
        if not rows:
            raise forms.ValidationError("Add at least one line: name, email.")
        return rows


class ExtendDeadlineForm(forms.Form):
    """How many minutes to add to a candidate's deadline."""

    minutes = forms.IntegerField(min_value=1, max_value=7 * 24 * 60)


class DecisionForm(forms.Form):
    """A recruiter's hiring decision on one candidate: a choice a person makes, and why."""

    outcome = forms.ChoiceField(choices=Decision.Choice.choices)
    note = forms.CharField(required=False, max_length=2000, strip=True)
