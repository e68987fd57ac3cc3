from django.contrib import admin

from .models import AuditEvent, Candidate, Decision, Invitation, Packet, PacketCheck, PacketFile, PacketVersion


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
class PacketVersionAdmin(admin.ModelAdmin):
    """Read-only: a version never changes once written."""

    list_display = ("packet", "number", "time_limit_minutes", "created_at")
    list_filter = ("packet",)
    inlines = [PacketFileInline, PacketCheckInline]

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(PacketFile)
class PacketFileAdmin(admin.ModelAdmin):
    list_display = ("version", "kind", "path")
    list_filter = ("kind",)

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = ("name", "email", "created_at")
    search_fields = ("name", "email")


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ("candidate", "packet_version", "status", "created_at", "deadline")
    list_select_related = ("candidate", "packet_version__packet")
    readonly_fields = ("token_hash", "token_nonce")
    search_fields = ("candidate__name", "candidate__email")


@admin.register(Decision)
class DecisionAdmin(admin.ModelAdmin):
    """Read-only here: a decision is made on the debrief or the invitations board, and audited there."""

    list_display = ("invitation", "choice", "decided_by", "decided_at")
    list_filter = ("choice",)
    list_select_related = ("invitation__candidate", "invitation__packet_version__packet", "decided_by")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The audit trail, read-only: nobody adds, edits or deletes an event."""

    list_display = ("at", "actor_name", "action", "target_repr", "detail")
    list_filter = ("action",)
    search_fields = ("actor_name", "target_repr", "detail")
    date_hierarchy = "at"
    readonly_fields = [f.name for f in AuditEvent._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
