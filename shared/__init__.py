"""What the three apps share: who may see what (access), HTTP helpers (http), and the workers' heartbeat.

Small on purpose, and no app's: the recruiter side (takehome), the candidate
side (sessions_app) and grading all import from here, and nothing here
imports the recruiter or candidate side.
"""
