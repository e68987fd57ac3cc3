"""The download: the version's fixture tree, a personalised gate.py, a README.txt and the
packet's requirements.txt (when it has one), as one zip."""

from __future__ import annotations

import io
import json
import shlex
import textwrap
import zipfile
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.urls import reverse

from shared.environments import usable_versions
from takehome.models import Invitation, PacketFile, PacketVersion, effective_policy

from .actions import grace_words, unpacked_limits_words, upload_limits_words
from .artifacts import expected
from .uploads import human_size

GATE_DIR = Path(__file__).resolve().parent / "gate"


def limits_text() -> str:
    """The upload limits as gate.py's help prints them, read from settings."""
    text = (f"Upload limits: at most {human_size(settings.UPLOAD_MAX_BYTES)} as a zip; unpacked, "
            f"{unpacked_limits_words()} (virtual environments, .git and caches are left out first and do "
            f"not count); {upload_limits_words()}, until uploads close {grace_words()} after the deadline.")
    return textwrap.fill(text, 100)


def personalise_gate(*, server: str, token: str, test_command: str, max_bytes: int, limits: str = "",
                     model_policy: str = PacketVersion.ModelPolicy.PROVIDED) -> str:
    """The gate's source with this candidate's server, token, test command, upload limits and model policy
    (provided, own or none) filled in, and the artifacts its submit looks for (sessions_app.artifacts).

    Values go in as JSON literals, which are valid Python literals for these
    types, so no value can break out of its string.
    """
    source = (GATE_DIR / "gate.py").read_text()
    command = shlex.split(test_command) or ["python", "-m", "pytest", "-q"]
    replacements = {
        '"__TAKEHOME_SERVER__"': json.dumps(server),
        '"__TAKEHOME_TOKEN__"': json.dumps(token),
        '["python", "-m", "pytest", "-q"]  # __TAKEHOME_TEST_COMMAND__': json.dumps(command),
        "20971520  # __TAKEHOME_MAX_UPLOAD_BYTES__": str(int(max_bytes)),
        '"__TAKEHOME_LIMITS__"': json.dumps(limits),
        '"__TAKEHOME_MODEL_POLICY__"': json.dumps(str(model_policy)),
        '"__TAKEHOME_EXPECTED__"': json.dumps(
            [[a.name, a.what] for a in expected(model_policy != PacketVersion.ModelPolicy.NONE)]),
    }
    for placeholder, value in replacements.items():
        if placeholder not in source:
            raise RuntimeError(f"gate template lost its placeholder {placeholder}")
        source = source.replace(placeholder, value)
    return source


def server_python(version) -> str:
    """The Python version the server reruns ``version``'s tests with, e.g. "3.11"."""
    return version.python_version or next(iter(usable_versions()), "3")


VENV_STEPS = (
    "python -m venv .venv",
    ". .venv/bin/activate          (Windows: .venv\\Scripts\\activate)",
    "python -m pip install pytest -r requirements.txt",
)


def environment_text(version) -> str:
    """README.txt's paragraph on the project's environment: the Python, and how to install the requirements."""
    python = server_python(version)
    if not version.requirements:
        return textwrap.fill(f"The server reruns your tests with Python {python} and pytest; "
                             "the project needs nothing else.", 76) + "\n\n"
    steps = "".join(f"  {step}\n" for step in VENV_STEPS)
    return (textwrap.fill(f"This project needs packages beyond pytest. They are listed in requirements.txt, pinned "
                          f"to the versions the server's reruns use (with Python {python}). Set them up once, in "
                          "a virtual environment inside this folder:", 76)
            + "\n\n" + steps + "\n"
            + textwrap.fill("and run every step below with it active (.venv is left out of your upload).", 76)
            + "\n\n")


def model_base_url(token: str) -> str:
    """The base URL an OpenAI-compatible client is given for the model window."""
    return settings.SITE_URL + reverse("sessions_app:model-list", args=[token]).removesuffix("/models")


def model_steps_text(policy: str, token: str) -> str:
    """README.txt's steps 3 and 4: the prompt and the model, as the packet's model policy has them."""
    if policy == PacketVersion.ModelPolicy.NONE:
        return ("  3. write or extend a test that names the bug\n"
                "  4. this take-home uses no model: there is no model step; fix the code yourself\n")
    if policy == PacketVersion.ModelPolicy.PROVIDED:
        return ("  3. write or extend a test that names the bug\n"
                "     write your exact prompt to the model in artifacts/prompt.txt\n"
                "  4. python gate.py ask           sends artifacts/prompt.txt to the model this server\n"
                "     provides and saves its raw reply in artifacts/model.md (the next ask in\n"
                "     model-2.md, and so on). It answers only after red. Any other\n"
                "     OpenAI-compatible client works too, with any API key and the base URL\n"
                f"     {model_base_url(token)}\n")
    return ("  3. write or extend a test that names the bug\n"
            "     write your exact prompt to the model in artifacts/prompt.txt\n"
            "  4. python gate.py model         opens the model window; only now ask your own model\n"
            "     save its raw reply in artifacts/model.md\n")


def readme_text(invitation: Invitation, token: str) -> str:
    version = invitation.packet_version
    title = f"{version.packet.title} (take-home)"
    fmt = "%Y-%m-%d %H:%M"
    values = {
        "title": title,
        "underline": "=" * len(title),
        "name": invitation.candidate.name,
        "started": invitation.started_at.astimezone(UTC).strftime(fmt),
        "deadline": invitation.deadline.astimezone(UTC).strftime(fmt),
        "grace": grace_words(),
        "upload_limits": upload_limits_words(),
        "link": settings.SITE_URL + reverse("sessions_app:landing", args=[token]),
        "max_size": human_size(settings.UPLOAD_MAX_BYTES),
        "unpacked_limits": unpacked_limits_words(),
        "environment": environment_text(version),
        "model_steps": model_steps_text(effective_policy(version), token),
    }
    text = (GATE_DIR / "README.txt").read_text()
    for key, value in values.items():
        text = text.replace("{{ " + key + " }}", value)
    return text


def build_bundle(invitation: Invitation, token: str) -> bytes:
    """The zip handed to a candidate, everything under one folder named after the packet."""
    version = invitation.packet_version
    folder = version.packet.slug
    fixture = version.files_of(PacketFile.Kind.FIXTURE)
    gate = personalise_gate(
        server=settings.SITE_URL, token=token, test_command=version.test_command,
        max_bytes=settings.UPLOAD_MAX_BYTES, limits=limits_text(), model_policy=effective_policy(version),
    )
    when = datetime.now().timetuple()[:6]

    def entry(name: str) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(f"{folder}/{name}", when)
        info.external_attr = 0o644 << 16  # rw-r--r--, whatever unzips it
        return info

    buffer = io.BytesIO()
    ours = {"gate.py": gate, "README.txt": readme_text(invitation, token)}
    if version.requirements:
        ours["requirements.txt"] = version.requirements
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in sorted(fixture.items()):
            if path in ours:  # ours win: the gate must be the personalised one, the environment the packet's
                continue
            zf.writestr(entry(path), data, zipfile.ZIP_DEFLATED)
        for name, text in ours.items():
            zf.writestr(entry(name), text.encode("utf-8"), zipfile.ZIP_DEFLATED)
    return buffer.getvalue()
