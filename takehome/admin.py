from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from shared.admin import ChangedInTheApp, ReadOnlyAdmin

from .models import AuditEvent, Candidate, Decision, Invitation, Packet, PacketCheck, PacketFile, PacketVersion
from .pages import board_url_for
from .team import admin as team_admin  # noqa: F401  (the accounts' and groups' pages)


class PacketFileInline(admin.TabularInline):
    model = PacketFile
    fields = ("kind", "path")
    readonly_fields = ("kind", "path")
    extra = 0
    can_delete = False


@admin.register(Packet)
class PacketAdmin(admin.ModelAdmin):
    list_display = ("title", "slug", "hide_candidate_names", "created_at")
    search_fields = ("title", "slug")


class PacketCheckInline(admin.TabularInline):
    """A version's self-checks, read-only: only the sandbox writes them."""

    model = PacketCheck
    fields = ("status", "created_at", "finished_at", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(PacketVersion)
class PacketVersionAdmin(ChangedInTheApp, ReadOnlyAdmin):
    """A version never changes once written, and is written by the packet's Edit or Import.

    why not added here: it would have no self-check, so it would count as
    unchecked and be invited to at once, skipping the draft refusal.
    """

    list_display = ("packet", "number", "time_limit_minutes", "created_at")
    list_filter = ("packet",)
    inlines = [PacketFileInline, PacketCheckInline]

    def changed_in_the_app(self, request, obj=None):
        return format_html('A new version is written by editing or importing a packet on <a href="{}">Packets</a>, '
                           "and invited to once its self-check passes.", reverse("takehome:packet-list"))


@admin.register(PacketFile)
class PacketFileAdmin(ReadOnlyAdmin):
    """A version's files: one added or deleted would change what the candidates invited are graded on."""

    list_display = ("version", "kind", "path")
    list_filter = ("kind",)


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = ("name", "email", "created_at")
    search_fields = ("name", "email")


def board_link(invitation: Invitation) -> str:
    """The invitation's row on its packet's invitations board, where it is resent, revoked, extended and decided."""
    return format_html('<a href="{}">the invitations board of {}</a>', board_url_for(invitation),
                       invitation.packet.title)


@admin.register(Invitation)
class InvitationAdmin(ChangedInTheApp, ReadOnlyAdmin):
    """Read-only here: inviting, resending, revoking and extending are the app's actions, audited there.

    why not save hooks: an invitation made here would skip the refusal of a draft
    version, a revocation here would leave the candidate's terminals open, and a
    deletion would take the candidate's uploads, evidence and decision with it.
    """

    list_display = ("candidate", "packet_version", "status", "created_at", "deadline", "on_the_board")
    list_select_related = ("candidate", "packet_version__packet")
    search_fields = ("candidate__name", "candidate__email")

    @admin.display(description="changed on")
    def on_the_board(self, obj):
        return board_link(obj)

    def changed_in_the_app(self, request, obj=None):
        if obj is not None:
            return format_html("This invitation is resent, revoked, extended and decided on {}, where each "
                               "change is checked and recorded in the audit trail; the admin only shows it.",
                               board_link(obj))
        return format_html('Candidates are invited, and invitations resent, revoked, extended and decided, on each '
                           'packet\'s invitations board (<a href="{}">Packets</a>), where each change is checked and '
                           "recorded in the audit trail; the admin only shows them.", reverse("takehome:packet-list"))


@admin.register(Decision)
class DecisionAdmin(ChangedInTheApp, ReadOnlyAdmin):
    """Read-only here: a decision is made on the invitations board or the debrief, and audited there."""

    list_display = ("invitation", "choice", "decided_by", "decided_at")
    list_filter = ("choice",)
    list_select_related = ("invitation__candidate", "invitation__packet_version__packet", "decided_by")

    def changed_in_the_app(self, request, obj=None):
        if obj is not None:
            return format_html("This decision is changed on {} or the packet's debrief, where each decision is "
                               "recorded in the audit trail; the admin only shows it.", board_link(obj.invitation))
        return ("Decisions are made on each packet's invitations board or debrief, where each decision is "
                "recorded in the audit trail; the admin only shows them.")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    """The audit trail, read-only: nobody adds, edits or deletes an event."""

    list_display = ("at", "actor_name", "action", "target_repr", "detail")
    list_filter = ("action",)
    search_fields = ("actor_name", "target_repr", "detail")
    date_hierarchy = "at"
    readonly_fields = [f.name for f in AuditEvent._meta.fields]
