"""The one deciding thread and its run phases: start, watch, checks, end, Shifts."""
