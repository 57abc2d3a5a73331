"""Owl: coding agents that work on your laptop while you are away from it."""

__version__ = "0.1.0"
