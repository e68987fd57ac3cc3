"""The team: recruiters and reviewers, managed by staff inside the app."""
