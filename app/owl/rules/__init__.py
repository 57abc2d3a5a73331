"""The pure rules: every state and transition, bounds and durations. Nothing here
reads a clock, does I/O, starts a thread or imports anything of Owl's outside this folder."""
