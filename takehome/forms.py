"""Recruiter forms: packets and invitations."""

from __future__ import annotations

import re
import shlex

from django import forms
from django.template.defaultfilters import filesizeformat
from django.utils.html import format_html

from grading.engine import rubric
from grading.engine.requirements import check_requirements
from grading.engine.spec import split_decoys
from shared.environments import environment_problems, usable_versions

from . import kept_uploads
from .actions import PacketError, read_decoys_zip, read_zip_tree
from .content import VersionContent
from .invites import parse_invite_lines
from .kept_uploads import Kept
from .models import Decision, Packet, PacketFile, PacketVersion

MAX_PACKET_ZIP_BYTES = 5 * 1024 * 1024
ZIP_FIELDS = ("fixture_zip", "solution_zip", "reference_tests_zip", "decoys_zip")
KEPT_HOURS = int(kept_uploads.KEPT_FOR.total_seconds() // 3600)
# What each rubric cell reads, by its section of the review page.
READS = {"red-log": "the red log", "stamp": "the stamp", "refusal": "the refusal", "diff": "the test, in the diff"}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _label_map(text: str, field: str, several: bool = False) -> dict[str, str | list[str]]:
    """Parse `label: regex` lines into a dict, checking each regex compiles; one message per bad line.

    ``several``: a label may come back on more lines, each adding a pattern
    (any one matching counts); such a label maps to the list of its patterns.
    Otherwise a label written twice keeps its last pattern.
    """
    result: dict[str, str | list[str]] = {}
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
        label, pattern = label.strip(), pattern.strip()
        if several and label in result:
            earlier = result[label]
            result[label] = [*(earlier if isinstance(earlier, list) else [earlier]), pattern]
        else:
            result[label] = pattern
    if problems:
        raise forms.ValidationError(problems)
    return result


def _format_map(mapping: dict[str, str | list[str]]) -> str:
    """The inverse of _label_map: one `label: regex` line per pattern."""
    return "\n".join(
        f"{k}: {p}" for k, v in mapping.items() for p in (v if isinstance(v, list) else [v])
    )


class KeptZipInput(forms.FileInput):
    """A zip's file input that, after a refused submit, shows the zip kept from it (takehome.kept_uploads).

    The kept zip travels as a signed reference in the hidden ``<name>_kept``;
    choosing a file replaces it, and ``<name>_forget`` drops it.
    """

    kept: Kept | None = None  # set by the form for this render

    def use_required_attribute(self, initial) -> bool:
        # why: a kept zip fills a required field, and the browser must not insist on a file
        return super().use_required_attribute(initial) and self.kept is None

    def render(self, name, value, attrs=None, renderer=None):
        html = super().render(name, value, attrs, renderer)
        if self.kept is None:
            return html
        return format_html(
            '<p class="kept" data-kept="{name}">Kept from your last try: <strong>{file}</strong> ({size}). '
            "Choose a file only to replace it."
            '<input type="hidden" name="{name}_kept" value="{reference}">'
            '<label class="inline-check"><input type="checkbox" name="{name}_forget" value="on"> '
            "Do not use it</label></p>{input}",
            name=name, file=self.kept.name, size=filesizeformat(self.kept.size), reference=self.kept.reference,
            input=html)


class PacketVersionForm(forms.Form):
    """The fields every version has. Zips are required for a new packet, optional for an edit."""

    prompt = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14}), help_text="Markdown. Candidates read it on their page."
    )
    fixture_zip = forms.FileField(
        widget=KeptZipInput,
        required=False, label="Fixture (zip)", help_text="The tree handed to candidates, tests included."
    )
    solution_zip = forms.FileField(
        widget=KeptZipInput,
        required=False,
        label="Reference solution (zip)",
        help_text="The fixed production files, at the same paths as in the fixture. "
        "Used to check that a candidate's test passes on correct code.",
    )
    reference_tests_zip = forms.FileField(
        widget=KeptZipInput,
        required=False, label="Hidden reference tests (zip)", help_text="Hidden tests run against the candidate's fix."
    )
    decoys_zip = forms.FileField(
        widget=KeptZipInput,
        required=False, label="Decoys (zip, optional)",
        help_text="Plausible wrong fixes, one folder per decoy holding production files at their fixture paths "
        "(for example drop-refund-rows/invoices.py). The candidate's tests run over each; a test that "
        "catches the bug rejects them.",
    )
    test_command = forms.CharField(initial="python -m pytest -q", max_length=200)
    requirements = forms.CharField(
        required=False, strip=False, label="Requirements (requirements.txt)",
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "python-dateutil==2.9.0.post0\nsix==1.17.0",
                                     "spellcheck": "false"}),
        help_text="What the tests need beyond pytest, as a pip requirements file: one package per line, pinned "
        "with == (hashes accepted, --hash=sha256:...), from the package index only: no URLs, paths, -e or "
        "index options. Only packages with wheels install (nothing is compiled on the server). The self-check "
        "builds the environment; candidates get the file in their download. Leave empty for pytest alone.",
    )
    python_version = forms.ChoiceField(
        required=False, label="Python",
        help_text="The interpreter the tests run with, from those this server has (TAKEHOME_PYTHONS). The "
        "server's default follows the server when its default changes; a version keeps this packet on it.",
    )
    model_policy = forms.ChoiceField(
        required=False, label="Model", choices=PacketVersion.ModelPolicy.choices,
        help_text="Who provides the model the candidate asks once the red run is witnessed: this server's model "
        "window (TAKEHOME_MODEL_URL), the candidate's own model (they save the prompt and reply in artifacts/), "
        "or no model at all.",
    )
    model_name = forms.CharField(
        required=False, max_length=200, label="Model name (optional)",
        help_text="The model the window asks for this packet, e.g. qwen2.5-coder:7b. Empty: TAKEHOME_MODEL_NAME.",
    )
    work_mode = forms.ChoiceField(
        required=False, initial=PacketVersion.WorkMode.ZIP, label="How candidates work", choices=PacketVersion.WorkMode.choices,
        help_text="A zip: they download the project, work on their own machine with gate.py and upload it. Hosted: "
        "a workspace on this server with a terminal in the browser, nothing to install; the server runs the tests "
        "itself, captures red and green and records the session for the reviewers. Both: the candidate picks.",
    )
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
        help_text="One per line, `label: regular expression`: harmful alternatives a refusal may name. "
        "Repeat a label on more lines to give it more patterns (other wordings, other languages); "
        "any one matching counts. Reviewers see these as a hint beside the refusal, never as a verdict.",
    )
    def __init__(self, *args, base: PacketVersion | None = None, owner=None, **kwargs):
        """``owner``: the person submitting, whose zips are kept when the form is refused (``keep_uploads``)."""
        self.base = base
        self.owner = owner
        self._lost: list[str] = []  # zip fields whose kept zip could not be used
        self._referenced: set[str] = set()  # the content hashes of the kept zips this submit named
        if base is not None and not kwargs.get("initial"):
            kwargs["initial"] = {
                "prompt": base.prompt,
                "test_command": base.test_command,
                "time_limit_minutes": base.time_limit_minutes,
                "requirements": base.requirements,
                "python_version": base.python_version,
                "model_policy": base.model_policy,
                "model_name": base.model_name,
                "work_mode": base.work_mode,
                "protected_paths": "\n".join(base.protected_paths),
                "forbidden_patterns": _format_map(base.forbidden_patterns),
                "refusal_hints": _format_map(base.refusal_hints),
                **{f"rubric_{c.key}": c.label for c in base.rubric_cells()},
                **{f"rubric_{c.key}_definition": c.definition for c in base.rubric_cells()},
            }
        super().__init__(*args, **kwargs)
        # The rubric, in the one order the review page reads it: each cell's wording and what passes or fails it.
        for c in rubric.cells():
            self.fields[f"rubric_{c.key}"] = forms.CharField(
                initial=c.label, max_length=rubric.LABEL_MAX, label=f"Rubric cell {c.number} ({READS[c.section]})",
            )
            self.fields[f"rubric_{c.key}_definition"] = forms.CharField(
                initial=c.definition, required=False, max_length=rubric.DEFINITION_MAX,
                widget=forms.Textarea(attrs={"rows": 2}),
                label=f"Rubric cell {c.number}: what passes and what fails it",
                help_text="Shown to reviewers beside the cell. Leave empty for the default wording.",
            )
        self.fields[f"rubric_{rubric.TEST_NAMES_BUG.key}_definition"].help_text += (
            " The four cells are each pass or fail, never added up.")
        versions = usable_versions()
        default = f"The server's default ({versions[0]})" if versions else "The server's default"
        kept = [base.python_version] if base is not None and base.python_version not in ("", *versions) else []
        self.fields["python_version"].choices = [("", default), *((v, f"Python {v}") for v in versions),
                                                 *((v, f"Python {v} (not on this server)") for v in kept)]
        if base is None:
            self.fields["fixture_zip"].required = True
            self.fields["solution_zip"].required = True
        else:
            for name in ZIP_FIELDS:
                self.fields[name].help_text += " Leave empty to keep the current files."
        if self.is_bound and owner is not None:
            self._recall_kept()

    def _recall_kept(self) -> None:
        """Put back the zips an earlier refused submit kept, where the browser sent no new file for them."""
        files = self.files.copy()
        for name in ZIP_FIELDS:
            reference = self.data.get(f"{name}_kept", "")
            sha256 = kept_uploads.content_named(self.owner, reference) if reference else None
            if sha256:
                self._referenced.add(sha256)
            if not reference or files.get(name) or self.data.get(f"{name}_forget"):
                continue
            found = kept_uploads.recall(self.owner, reference)
            if found is None:
                self._lost.append(name)
                continue
            self.fields[name].widget.kept, files[name] = found
        self.files = files

    def keep_uploads(self) -> None:
        """After a refused submit: keep each zip that was read without a problem, for the next submit."""
        if self.owner is None or not self.is_bound:
            return
        for name in ZIP_FIELDS:
            uploaded = getattr(self, "cleaned_data", {}).get(name)
            # why not a zip with a problem: the author must choose another one anyway
            self.fields[name].widget.kept = (kept_uploads.keep(self.owner, uploaded)
                                             if uploaded and name not in self.errors else None)

    def forget_kept(self) -> None:
        """After a save: the kept zips this submit named, used, replaced or dropped, are of no more use."""
        if self.owner is not None and self._referenced:
            kept_uploads.forget(self.owner, self._referenced)

    @property
    def kept_count(self) -> int:
        return sum(self.fields[name].widget.kept is not None for name in ZIP_FIELDS)

    def clean_prompt(self) -> str:
        # why: browsers send \r\n; stored as typed, an unchanged prompt would differ from the same text loaded
        # from a file, and the sample loader would take a recruiter's untouched save for a change.
        return self.cleaned_data["prompt"].replace("\r\n", "\n")

    def clean_test_command(self) -> str:
        value = self.cleaned_data["test_command"]
        try:
            parts = shlex.split(value)
        except ValueError as exc:
            raise forms.ValidationError(f"The command cannot be read: {exc}.")
        if not parts:
            raise forms.ValidationError("Give the command that runs the tests.")
        return value

    def clean_requirements(self) -> str:
        value = self.cleaned_data["requirements"]
        text = value.replace("\r\n", "\n")
        if not text.strip():
            return ""
        problems = check_requirements(text)
        if problems:
            raise forms.ValidationError(problems)
        return text if text.endswith("\n") else text + "\n"

    def clean_python_version(self) -> str:
        value = self.cleaned_data["python_version"]
        if value:
            problems = environment_problems("", value)
            if problems:
                raise forms.ValidationError(problems)
        return value

    def clean_work_mode(self) -> str:
        # why: a form posted without the field (a script written before step 10) keeps today's zip.
        return self.cleaned_data["work_mode"] or PacketVersion.WorkMode.ZIP

    def clean_forbidden_patterns(self) -> dict[str, str]:
        return _label_map(self.cleaned_data["forbidden_patterns"], "Forbidden patterns")

    def clean_refusal_hints(self) -> dict[str, str]:
        return _label_map(self.cleaned_data["refusal_hints"], "Refusal hints", several=True)

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
        for name in self._lost:
            self.add_error(name, "The zip kept from your last try cannot be used any more (zips are kept for "
                                 f"{KEPT_HOURS} hours, for the person who chose them only): choose it again.")
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
            rubric={c.key: data[f"rubric_{c.key}"] for c in rubric.CELLS},
            rubric_definitions={c.key: data[f"rubric_{c.key}_definition"] or c.definition for c in rubric.CELLS},
            decoys=self._trees["decoys"] or {},
            requirements=data["requirements"],
            python_version=data["python_version"],
            model_policy=data["model_policy"],
            model_name=data["model_name"],
            work_mode=data["work_mode"],
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


class ImportPacketForm(forms.Form):
    archive = forms.FileField(
        label="Packet zip",
        help_text="A zip made by Export (or by hand): packet.json, prompt.md, fixture/, solution/, "
                  "reference_tests/ and decoys/<name>/. A packet whose slug exists here gets a new version.",
    )


class DecisionForm(forms.Form):
    """A recruiter's hiring decision on one candidate: a choice a person makes, and why."""

    outcome = forms.ChoiceField(choices=Decision.Choice.choices)
    note = forms.CharField(required=False, max_length=2000, strip=True)
