"""Input from candidates and their gate, validated before any action sees it."""

from __future__ import annotations

import re

from django import forms

from .actions import GateReport
from .uploads import messages_for

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
MAX_TREE_FILES = 5000
MAX_LOG_CHARS = 1_000_000


class UploadForm(forms.Form):
    """The upload: one zip in the ``archive`` field, already streamed and checked by the handler.

    ``upload_error`` is the handler's refusal key, if it refused the file
    while it streamed in; the form turns it into the message shown.
    """

    archive = forms.FileField(required=False)

    def __init__(self, *args, upload_error: str | None = None, max_bytes: int = 0,
                 refusal: tuple[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.upload_error = upload_error
        self.refusal = refusal
        self.messages = messages_for(max_bytes)

    def clean_archive(self):
        if self.refusal:  # refused by the rules (deadline, not started), not by the file
            code, message = self.refusal
            raise forms.ValidationError(message, code=code)
        if self.upload_error:
            raise forms.ValidationError(self.messages[self.upload_error], code=self.upload_error)
        archive = self.cleaned_data.get("archive")
        # why check the type: only our handler's file went through the zip and size checks.
        if archive is None or not hasattr(archive, "incoming"):
            raise forms.ValidationError(self.messages["missing"], code="missing")
        return archive.incoming

    def first_error(self) -> tuple[str, str]:
        """(code, message) of the first problem, for JSON answers."""
        error = self.errors.as_data()["archive"][0]
        return error.code or "invalid", error.messages[0]


class GateReceiptForm(forms.Form):
    """The JSON a gate step sends: the log, a sha256 per file of the tree, the local time."""

    log = forms.CharField(required=False, strip=False, max_length=MAX_LOG_CHARS)
    files = forms.JSONField(required=False)
    local_time = forms.CharField(required=False, max_length=64)
    token = forms.CharField(required=False, max_length=100)
    # A step gate.py refused on the candidate's machine: its reason, whether it was out of order or on
    # the tests' outcome, and whether it is sent late (the gate was offline then).
    refused = forms.CharField(required=False, max_length=2000)
    kind = forms.ChoiceField(required=False, choices=[("order", "order"), ("outcome", "outcome")])
    offline = forms.BooleanField(required=False)

    def clean_files(self) -> dict[str, str]:
        files = self.cleaned_data["files"]
        if files is None and "files" not in self.data:
            raise forms.ValidationError("files is required: a sha256 for each file of the tree.")
        files = {} if files is None else files
        # why: the hashes are stored and shown to reviewers; accept only their exact shape.
        if not isinstance(files, dict) or len(files) > MAX_TREE_FILES:
            raise forms.ValidationError(f"files must map up to {MAX_TREE_FILES} paths to their sha256.")
        for path, digest in files.items():
            if not isinstance(path, str) or not 0 < len(path) <= 500 or not isinstance(digest, str) \
                    or not SHA256_RE.match(digest):
                raise forms.ValidationError("files must map each path to a lowercase hex sha256.")
        return files

    def report(self) -> GateReport:
        data = self.cleaned_data
        return GateReport(log_text=data["log"], tree_hashes=data["files"], local_time=data["local_time"],
                          gate_refused=data["refused"].strip(), gate_refusal_kind=data["kind"] or "order",
                          offline=bool(data["offline"]))

    def first_error(self) -> str:
        field, errors = next(iter(self.errors.items()))
        return f"{field}: {errors[0]}"
