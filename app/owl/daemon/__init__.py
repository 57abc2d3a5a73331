"""The daemon process: start, stop, signals, logging, the watchdog, crash recovery."""
