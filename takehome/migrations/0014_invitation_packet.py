"""Each invitation names its packet beside its version, for the board's index (packet, created_at, id)."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill_packet(apps, schema_editor):
    Invitation = apps.get_model("takehome", "Invitation")
    PacketVersion = apps.get_model("takehome", "PacketVersion")
    Invitation.objects.update(
        board_packet_id=Subquery(PacketVersion.objects.filter(pk=OuterRef("packet_version_id")).values("packet_id")[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ("takehome", "0013_funnel_tally"),
    ]

    operations = [
        migrations.AddField(
            model_name="invitation",
            name="board_packet",
            field=models.ForeignKey(editable=False, null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="+", to="takehome.packet"),
        ),
        migrations.RunPython(fill_packet, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="invitation",
            name="board_packet",
            field=models.ForeignKey(editable=False, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="+", to="takehome.packet"),
        ),
        migrations.RemoveIndex(model_name="invitation", name="invitation_created"),
        migrations.AddIndex(
            model_name="invitation",
            index=models.Index(fields=["board_packet", "created_at", "id"], name="invitation_packet_created"),
        ),
    ]
