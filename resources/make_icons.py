"""Regenerate Owl's icon files from the drawing code in `owl.tray.art`.

The drawing code is the source art: the tray draws its icons at run time,
and this script writes the files that desktops want on disk:

- `app/owl/tray/assets/owl.png` (256 px) — shipped inside the package, used
  by the login item's `Icon=` and by notifications;
- `resources/icons/hicolor/<N>x<N>/apps/owl.png` — for installing into an
  icon theme alongside `packaging/owl.desktop`;
- `resources/icons/states/<state>.png` — a 48 px preview of each tray state.

Run from the repository root: `python resources/make_icons.py`.
"""

from __future__ import annotations

from pathlib import Path

from owl.tray.art import STATES, draw_app_icon, draw_icon

ROOT = Path(__file__).resolve().parent.parent
THEME_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)


def main() -> None:
    assets = ROOT / "app" / "owl" / "tray" / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    draw_app_icon(256).save(assets / "owl.png", optimize=True)
    for n in THEME_SIZES:
        folder = ROOT / "resources" / "icons" / "hicolor" / f"{n}x{n}" / "apps"
        folder.mkdir(parents=True, exist_ok=True)
        draw_app_icon(n).save(folder / "owl.png", optimize=True)
    states = ROOT / "resources" / "icons" / "states"
    states.mkdir(parents=True, exist_ok=True)
    for state in STATES:
        draw_icon(state, 48, 0.4 if state == "frozen" else None).save(
            states / f"{state}.png", optimize=True
        )


if __name__ == "__main__":
    main()
