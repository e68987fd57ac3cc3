"""An upload's receipt points at the Submission it received. Receipts from before are linked to the
upload that shares their invitation, hash and server time (how the two were matched until now); where two
uploads share all three, each takes one, in the order they were stored."""

import django.db.models.deletion
from django.db import migrations, models


def link_receipts(apps, schema_editor):
    GateReceipt = apps.get_model("sessions_app", "GateReceipt")
    Submission = apps.get_model("sessions_app", "Submission")
    taken = set()
    receipts = GateReceipt.objects.filter(step="upload", accepted=True, submission__isnull=True).order_by("pk")
    for receipt in receipts.iterator():
        match = (Submission.objects.filter(invitation_id=receipt.invitation_id, sha256=receipt.sha256,
                                           uploaded_at=receipt.received_at)
                 .exclude(pk__in=taken).order_by("pk").values_list("pk", flat=True).first())
        if match is not None:
            taken.add(match)
            # why update(): a receipt's save() refuses to rewrite it (append-only); this only links it
            GateReceipt.objects.filter(pk=receipt.pk).update(submission_id=match)


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0010_model_exchange_delivery'),
    ]

    operations = [
        migrations.AddField(
            model_name='gatereceipt',
            name='submission',
            field=models.OneToOneField(blank=True, help_text='The upload this receipt received (upload receipts that were accepted).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='receipt', to='sessions_app.submission'),
        ),
        migrations.RunPython(link_receipts, migrations.RunPython.noop),
    ]
