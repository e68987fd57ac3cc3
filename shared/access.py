"""Who may see what: the recruiter and reviewer groups."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

RECRUITER_GROUP = "recruiter"
REVIEWER_GROUP = "reviewer"
# Manages the Team page (adds recruiters and reviewers, changes roles, deactivates): a role of its own,
# so a recruiter can run their team without Django's staff flag, which also opens the admin.
TEAM_ADMIN_GROUP = "team admin"


def group_names(user) -> frozenset[str]:
    """The names of the user's groups, read once per user object (that is, once per request)."""
    # why cached: the view's check and the navigation's two would otherwise be a query each.
    names = getattr(user, "_takehome_group_names", None)
    if names is None:
        names = frozenset(user.groups.values_list("name", flat=True))
        user._takehome_group_names = names
    return names


def in_group(user, name: str) -> bool:
    return user.is_authenticated and (user.is_superuser or name in group_names(user))


def group_required(name: str):
    """Login required, then membership of `name` (superusers pass); otherwise 403."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not in_group(request.user, name):
                raise PermissionDenied(f"This page is for the {name} group.")
            return view(request, *args, **kwargs)

        return login_required(wrapped)

    return decorator


recruiter_required = group_required(RECRUITER_GROUP)
reviewer_required = group_required(REVIEWER_GROUP)


def manages_team(user) -> bool:
    """May use the Team page: team admins, staff and superusers."""
    return user.is_authenticated and (user.is_staff or in_group(user, TEAM_ADMIN_GROUP))


def team_manager_required(refusal: str):
    """A view decorator: login required, then the right to manage the team (manages_team); else a 403 saying `refusal`."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not manages_team(request.user):
                raise PermissionDenied(refusal)
            return view(request, *args, **kwargs)

        return login_required(wrapped)

    return decorator


def reads_only(user) -> bool:
    """A recruiter who is not a reviewer: reads the review pages and the debrief, marks nothing.

    why not every recruiter: someone in both groups (a superuser too) is a
    reviewer first, so the blind-review rule still hides other reviewers'
    marks from them until they have submitted their own.
    """
    return in_group(user, RECRUITER_GROUP) and not in_group(user, REVIEWER_GROUP)


def desk_required(view):
    """Login required, then the reviewer or the recruiter group (superusers pass); otherwise 403."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not (in_group(request.user, REVIEWER_GROUP) or in_group(request.user, RECRUITER_GROUP)):
            raise PermissionDenied("This page is for the reviewer and recruiter groups.")
        return view(request, *args, **kwargs)

    return login_required(wrapped)


def marker_required(view):
    """Login, then the reviewer group: the only people who mark. A recruiter is told so, in a 403."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not in_group(request.user, REVIEWER_GROUP):
            if in_group(request.user, RECRUITER_GROUP):
                raise PermissionDenied("Only reviewers mark reviews. Recruiters can read the review page and "
                                       "the debrief but not mark them; nothing was changed.")
            raise PermissionDenied(f"This page is for the {REVIEWER_GROUP} group.")
        return view(request, *args, **kwargs)

    return login_required(wrapped)
