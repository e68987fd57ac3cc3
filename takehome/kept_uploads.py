"""Zips chosen on a packet form that was refused, kept for the next submit (a KeptUpload row each).

A browser never fills a file input again after a refused form, so the author
of a packet whose pattern had a typo would otherwise choose four zips again.
Each zip that was read without a problem is kept server-side, per person and
content hash, and the form carries a reference to it in a hidden field, shown
as "kept: name (size)"; choosing another file replaces it.

why a signed reference scoped to its owner: the hidden field comes back from
the browser, so it is input like any other. It names the owner and the
content hash and is signed with SECRET_KEY (timed), and the row is looked up
with the person asking as its owner too: another person's reference, an old
one, or one edited by hand finds nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from django.core import signing
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from .models import KeptUpload

KEPT_FOR = timedelta(hours=24)
SALT = "takehome.kept-upload"


@dataclass(frozen=True)
class Kept:
    """A kept zip as the form shows it, with the reference its hidden field carries."""

    reference: str
    name: str
    size: int


def _reference(owner, sha256: str) -> str:
    return signing.TimestampSigner(salt=SALT).sign_object({"owner": owner.pk, "sha256": sha256})


def keep(owner, uploaded) -> Kept:
    """Keep an uploaded zip for ``owner`` (again: the time it is kept from starts over)."""
    data = b"".join(uploaded.chunks())
    sha256 = hashlib.sha256(data).hexdigest()
    name = (uploaded.name or "upload.zip")[-255:]
    # why only the key read back: a zip kept already (a second refused submit) is renewed, not read or written again
    row, created = KeptUpload.objects.only("pk").get_or_create(
        owner=owner, sha256=sha256, defaults={"name": name, "size": len(data), "content": data})
    if not created:
        KeptUpload.objects.filter(pk=row.pk).update(name=name, kept_at=timezone.now())
    return Kept(_reference(owner, sha256), name, len(data))


def content_named(owner, reference: str) -> str | None:
    """The content hash a form's reference names, when it is ``owner``'s to use: None when it was signed for
    another person, changed, or is older than KEPT_FOR."""
    try:
        value = signing.TimestampSigner(salt=SALT).unsign_object(reference, max_age=KEPT_FOR)
    except signing.BadSignature:  # SignatureExpired is one
        return None
    if not isinstance(value, dict) or value.get("owner") != owner.pk:
        return None
    return str(value.get("sha256", ""))


def recall(owner, reference: str) -> tuple[Kept, SimpleUploadedFile] | None:
    """The kept zip a form's reference names, as an upload again; None when it is not ``owner``'s to use
    (``content_named``) or is gone."""
    sha256 = content_named(owner, reference)
    if sha256 is None:
        return None
    row = KeptUpload.objects.filter(owner=owner, sha256=sha256).first()
    if row is None:
        return None
    data = bytes(row.content)
    upload = SimpleUploadedFile(row.name, data, content_type="application/zip")
    return Kept(reference, row.name, row.size), upload


def forget(owner, sha256s) -> None:
    """Delete ``owner``'s kept zips of these contents (a save used, replaced or dropped them)."""
    KeptUpload.objects.filter(owner=owner, sha256__in=list(sha256s)).delete()


def forget_stale() -> int:
    """Delete every kept zip older than KEPT_FOR (its reference no longer works anyway); how many went."""
    deleted, _ = KeptUpload.objects.filter(kept_at__lt=timezone.now() - KEPT_FOR).delete()
    return deleted
