"""The operators' view of grading: every submission with its runs (errors included), and "grade again"."""

from django.contrib import admin, messages
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils.html import format_html

from sessions_app.models import Submission
from shared.admin import ChangedInTheApp, ReadOnlyAdmin

from . import lifecycle
from .models import Assignment, GradingRun, LineComment


class GradingRunInline(admin.TabularInline):
    model = GradingRun
    fields = ("attempt", "outcome", "worker", "pid", "task_id", "message_sent_at", "started_at", "heartbeat_at",
              "finished_at", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    """Read-only: status changes only through grading (the "grade again" action, or `manage.py regrade`)."""

    list_display = ("pk", "status", "invitation", "uploaded_at", "attempts", "is_latest", "status_changed_at")
    list_filter = ("status",)
    list_select_related = ("invitation__candidate", "invitation__packet_version__packet")
    search_fields = ("=id", "sha256", "invitation__candidate__name")
    inlines = [GradingRunInline]
    actions = ["grade_again"]
    show_full_result_count = False  # why: counting every row twice per page is slow at 100,000 uploads

    def get_queryset(self, request):
        # why a subquery, not a join and GROUP BY: it is counted for the page's rows only.
        runs = (GradingRun.objects.filter(submission=OuterRef("pk")).order_by().values("submission")
                .annotate(n=Count("pk")).values("n"))
        return super().get_queryset(request).annotate(
            attempts=Coalesce(Subquery(runs, output_field=IntegerField()), 0))

    @admin.display(description="attempts", ordering="attempts")
    def attempts(self, obj):
        return obj.attempts

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        # why: a saved form would write back the status it read, over a worker's newer one
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # why: an upload is evidence; nothing stored is removed from here

    def has_grade_permission(self, request):
        return request.user.has_perm("sessions_app.change_submission")

    @admin.action(description="Grade again", permissions=["grade"])
    def grade_again(self, request, queryset):
        results = [lifecycle.regrade(pk, actor=request.user, via="the admin's Grade again")
                   for pk in queryset.values_list("pk", flat=True)]
        sent = sum(r.result == "sent" for r in results)
        level = messages.SUCCESS if sent == len(results) else messages.WARNING
        self.message_user(request, f"{sent} of {len(results)} sent for grading again. "
                          + " ".join(r.line + "." for r in results if r.result != "sent"), level)


@admin.register(Assignment)
class AssignmentAdmin(ChangedInTheApp, ReadOnlyAdmin):
    """Read-only: reviewers are assigned by grading and reassigned on the review page, where it is audited."""

    def changed_in_the_app(self, request, obj=None):
        where = "each submission's review page"
        if obj is not None:
            where = format_html('<a href="{}">its review page</a>',
                                reverse("grading:review-detail", args=[obj.submission_id]))
        return format_html("Grading assigns reviewers by load; a recruiter gives a review to another reviewer on {}, "
                           "recorded in the audit trail. The admin only shows them.", where)

    list_display = ("submission", "reviewer", "assigned_at", "assigned_by")
    list_select_related = ("reviewer", "assigned_by", "submission__invitation__candidate")
    search_fields = ("=submission__id", "reviewer__username")
    show_full_result_count = False  # why: counting every row twice per page is slow at 100,000 uploads


@admin.register(LineComment)
class LineCommentAdmin(ChangedInTheApp, ReadOnlyAdmin):
    """Read-only: a comment is its reviewer's, written and changed on the review page until they submit."""

    def changed_in_the_app(self, request, obj=None):
        return ("A comment is its reviewer's: written and changed on the review page until they submit the "
                "review, then final. The admin only shows them.")

    list_display = ("review", "path", "side", "line", "updated_at")
    list_select_related = ("review__reviewer", "review__submission")
    search_fields = ("path", "body", "review__reviewer__username")
    show_full_result_count = False
