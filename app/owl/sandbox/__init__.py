"""Containment: what a Run may reach (policy.py), bwrap on Linux, Seatbelt on macOS.

Imports nothing of Owl's outside this folder, so settings, the engine and the
views may all use it.
"""
