"""Owl in the system tray: icon art (`art`), the menu as data (`menu`),
which notifications to show (`notices`) and the pystray app (`app`).

`owl.tray.app.run_tray(daemon)` is the entry point; nothing here imports
pystray or a toolkit until it is called.
"""
