"""What people ask: verbs decided on the engine thread, their git halves on the
caller's thread, and the read-only views."""
