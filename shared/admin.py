from django.contrib import admin

from .models import WorkerHeartbeat


class ChangedInTheApp:
    """A ModelAdmin mixin for rows the admin shows and the app changes: each page says where, with a link.

    why: an intervention (an invitation, a revocation, a decision, a role...)
    has one home, its action, which checks it and records it in the audit
    trail (takehome.audit). An admin form would do neither, so these pages
    offer none and point to the page that does. Override ``changed_in_the_app``;
    the mixin refuses nothing itself (each admin says what it refuses).
    """

    change_list_template = "admin/changed_in_the_app/change_list.html"
    change_form_template = "admin/changed_in_the_app/change_form.html"

    def changed_in_the_app(self, request, obj=None) -> str:
        """Where in the app these rows (or ``obj``) are changed: HTML built with format_html, or ""."""
        return ""

    def changelist_view(self, request, extra_context=None):
        extra_context = {"changed_in_the_app": self.changed_in_the_app(request), **(extra_context or {})}
        return super().changelist_view(request, extra_context)

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        context["changed_in_the_app"] = self.changed_in_the_app(request, obj)
        return super().render_change_form(request, context, add, change, form_url, obj)


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ("hostname", "seen_at", "caps")


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shown, never written here: nothing is added, edited or deleted (so nothing is deleted by cascade either)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
