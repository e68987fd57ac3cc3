import factory

from takehome.actions import VersionContent, do_create_packet
from takehome.models import Candidate, Invitation, PacketCheck, PacketVersion


def _finish_check(version: PacketVersion, passed: bool) -> PacketVersion:
    version.checks.filter(status__in=PacketCheck.OPEN).delete()
    word = "passed" if passed else "failed"
    PacketCheck.objects.create(version=version, status=PacketCheck.Status.PASSED if passed else PacketCheck.Status.FAILED,
                               results=[{"check_id": "test-setup", "title": f"Marked {word} by the test set-up",
                                         "passed": passed, "summary": "" if passed else "the test said so", "log": ""}])
    return version


def mark_checked(version: PacketVersion) -> PacketVersion:
    """Publish a version as if its self-check had passed, for tests that are not about the self-check."""
    return _finish_check(version, passed=True)


def mark_failed(version: PacketVersion) -> PacketVersion:
    """Make a version a draft as if a check of its self-check had failed, for tests of what a draft refuses."""
    return _finish_check(version, passed=False)


def make_packet(slug="tiny", title="Tiny packet", checked=True, **overrides):
    """A small real packet through the same action the recruiter's form uses (published unless ``checked=False``)."""
    content = VersionContent(
        prompt=overrides.pop("prompt", "Fix **add**."),
        fixture=overrides.pop("fixture", {"calc.py": b"def add(a, b):\n    return a - b\n",
                                          "test_calc.py": b"import calc\n\ndef test_add():\n    assert calc.add(2, 2) == 4\n"}),
        solution=overrides.pop("solution", {"calc.py": b"def add(a, b):\n    return a + b\n"}),
        reference_tests=overrides.pop("reference_tests", {}),
        **overrides,
    )
    packet = do_create_packet(slug, title, content)
    if checked:
        mark_checked(packet.latest_version())
    return packet


class CandidateFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Candidate

    name = factory.Faker("name")
    email = factory.Sequence(lambda n: f"candidate{n}@example.com")


class InvitationFactory(factory.django.DjangoModelFactory):
    """An invitation with its raw token kept on `.raw_token` for the test's use."""

    class Meta:
        model = Invitation

    candidate = factory.SubFactory(CandidateFactory)

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        invitation = model_class(*args, **kwargs)
        invitation.raw_token = invitation.issue_token()
        invitation.save()
        return invitation
