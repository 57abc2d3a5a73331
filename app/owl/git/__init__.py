"""Owl's own git (nothing of the repository's runs), worktrees, setup, what changed
outside a branch, guards."""
