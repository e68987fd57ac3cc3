"""Editing a packet writes a new version; invitations keep theirs."""

import pytest

from takehome.actions import PacketError, VersionContent, do_create_version
from takehome.models import ImmutableRowError, PacketFile

from .factories import InvitationFactory, make_packet

pytestmark = pytest.mark.django_db


def content(**overrides):
    base = dict(
        prompt="v2 prompt",
        fixture={"calc.py": b"x = 1\n", "test_calc.py": b"def test_x():\n    assert 0\n"},
        solution={"calc.py": b"x = 2\n"},
        reference_tests={},
    )
    return VersionContent(**{**base, **overrides})


def test_an_edit_creates_version_two_and_the_invitation_keeps_version_one():
    packet = make_packet()
    first = packet.latest_version()
    invitation = InvitationFactory(packet_version=first)
    second = do_create_version(packet, content())
    assert (first.number, second.number) == (1, 2)
    invitation.refresh_from_db()
    assert invitation.packet_version == first
    assert invitation.packet_version.prompt == "Fix **add**."
    assert packet.latest_version() == second


def test_a_version_cannot_be_changed_in_place():
    version = make_packet().latest_version()
    version.prompt = "changed"
    with pytest.raises(ImmutableRowError):
        version.save()
    f = version.files.first()
    with pytest.raises(ImmutableRowError):
        f.save()


def test_the_spec_carries_every_file_kind():
    version = make_packet(reference_tests={"test_ref.py": b"def test_r():\n    pass\n"}).latest_version()
    spec = version.to_spec()
    assert set(spec.fixture) == {"calc.py", "test_calc.py"}
    assert spec.production_paths == ("calc.py",)
    assert set(spec.reference_tests) == {"test_ref.py"}
    assert spec.test_command == ("python", "-m", "pytest", "-q")


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"fixture": {}}, "no files"),
        ({"solution": {"other.py": b""}}, "must replace files of the fixture"),
        ({"protected_paths": ("data.csv",)}, "Protected paths must be fixture files"),
    ],
)
def test_an_unusable_version_is_refused_and_nothing_is_written(overrides, message):
    packet = make_packet()
    with pytest.raises(PacketError, match=message):
        do_create_version(packet, content(**overrides))
    assert packet.versions.count() == 1
    assert PacketFile.objects.filter(version__packet=packet).count() == 3
