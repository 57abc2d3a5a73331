"""Owl in the system tray: icon art (`art`), the menu as data (`menu`),
which notifications to show (`notices`) and the pystray app (`app`), over
the backend chosen at start (`choose`) and its toolkit, one module per
platform behind `toolkit.Toolkit` (`gtk`, `darwin`).

`owl.tray.app.run_tray(daemon)` is the entry point; nothing here imports
pystray or a toolkit until it is called.
"""
