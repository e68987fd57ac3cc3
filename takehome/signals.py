"""What the recruiter's side announces to the rooms after it.

The candidate's side and the desk import takehome, never the reverse (.importlinter): where the
recruiter's side must reach them, it sends one of these and they connect their receivers in their
AppConfig.ready. A signal carries ids, not rows.
"""

from django.dispatch import Signal

# Sent once a revocation has committed, with ``invitation_id``: the hosted session closes the
# invitation's terminals. The revocation stands whatever a receiver does.
invitation_revoked = Signal()

# Sent as a page of the invitations board is read (takehome.pages.board_rows), with ``rows``: the page's
# BoardRows by invitation id. The rooms after the recruiter's fill in what came back of each (the upload
# under review, its reviews, refused uploads), in a fixed number of queries whatever the page holds.
board_rows_read = Signal()

# Sent as the funnel works out invitations' facts (takehome.funnel.all_facts), with ``invitations``, a
# queryset. Each receiver answers {invitation id: {fact: value}} for the takehome.funnel.Facts its rooms'
# rows decide, in a fixed number of queries whatever the queryset holds.
funnel_facts_read = Signal()

# Sent inside a decision's transaction (takehome.actions.do_decide), once the Decision is written, with
# ``invitation_id`` and ``decision_id``. Receivers that reach outside (the webhooks) act once it commits.
decision_recorded = Signal()
