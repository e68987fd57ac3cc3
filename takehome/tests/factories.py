import factory

from takehome.actions import VersionContent, do_create_packet
from takehome.models import Candidate, Invitation


def make_packet(slug="tiny", title="Tiny packet", **overrides):
    """A small real packet through the same action the recruiter's form uses."""
    content = VersionContent(
        prompt=overrides.pop("prompt", "Fix **add**."),
        fixture=overrides.pop("fixture", {"calc.py": b"def add(a, b):\n    return a - b\n",
                                          "test_calc.py": b"import calc\n\ndef test_add():\n    assert calc.add(2, 2) == 4\n"}),
        solution=overrides.pop("solution", {"calc.py": b"def add(a, b):\n    return a + b\n"}),
        reference_tests=overrides.pop("reference_tests", {}),
        **overrides,
    )
    return do_create_packet(slug, title, content)


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
