"""What the recruiter's side announces to the rooms after it.

The candidate's side and the desk import takehome, never the reverse (.importlinter): where the
recruiter's side must reach them, it sends one of these and they connect their receivers in their
AppConfig.ready. A signal carries ids, not rows.
"""

from django.dispatch import Signal

# Sent once a revocation has committed, with ``invitation_id``: the hosted session closes the
# invitation's terminals. The revocation stands whatever a receiver does.
invitation_revoked = Signal()
