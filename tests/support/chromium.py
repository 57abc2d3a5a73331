"""Real headless Chromium (Debian `chromium`) for the tests that look at a page.

`screenshot()` renders a local HTML file the way a person's browser would and
writes a PNG. `RecordingProxy` is an HTTP proxy on 127.0.0.1 that answers
nothing and remembers every host asked for: with Chromium pointed at it, any
request a page makes shows up there. Chromium also calls Google's services
by itself (time, updates, accounts) whatever the flags say; `own_hosts`
tells those apart.

Without Chromium these tests fail (tools/setup.sh --test installs it).
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

INSTALL_HINT = "chromium is not installed: run tools/setup.sh --test (Debian package chromium)"
_OWN = re.compile(
    r"(^|\.)(google\.com|googleapis\.com|gvt1\.com|gvt2\.com|gstatic\.com|"
    r"googleusercontent\.com|chrome\.com|chromium\.org|googlezip\.net)$"
)


def require_chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(INSTALL_HINT, pytrace=False)
    raise AssertionError  # not reached


def own_hosts(host: str) -> bool:
    """True for the hosts Chromium calls by itself (not for the page)."""
    return bool(_OWN.search(host.split(":")[0]))


class RecordingProxy:
    """An HTTP proxy that records the host of every request and answers 502."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> "RecordingProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            conn.settimeout(2)
            try:
                head = conn.recv(8192).decode("latin-1", "replace")
                first = head.split("\r\n", 1)[0].split()
                if len(first) >= 2:
                    target = first[1]
                    host = target if first[0] == "CONNECT" else re.sub(r"^\w+://", "", target)
                    self.hosts.append(host.split("/")[0])
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            finally:
                conn.close()

    def page_hosts(self) -> list[str]:
        return [h for h in self.hosts if not own_hosts(h)]


def screenshot(
    page: Path,
    png: Path,
    *,
    width: int = 1280,
    height: int = 1600,
    proxy_port: int | None = None,
    dark: bool = False,
    timeout: float = 90.0,
) -> Path:
    """Render `page` in headless Chromium and write a `width` x `height` PNG
    (`dark`: as for a desktop that prefers a dark colour scheme)."""
    chromium = require_chromium()
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="owl-chromium-") as profile:
        argv = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
        ]
        if dark:
            argv.append("--blink-settings=preferredColorScheme=0")  # Blink's kDark
        if proxy_port is not None:
            argv += [
                f"--proxy-server=http://127.0.0.1:{proxy_port}",
                "--proxy-bypass-list=<-loopback>",
            ]
        proc = subprocess.run(
            [*argv, Path(page).absolute().as_uri()],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    assert png.exists(), (
        f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}"
    )
    return png


def not_blank(png: Path) -> dict:
    """How much of a screenshot is drawn: distinct colours and the share of
    pixels that differ from the most common one (the background)."""
    from PIL import Image

    img = Image.open(png).convert("RGB").resize((320, 400))
    pixels = list(img.get_flattened_data() if hasattr(img, "get_flattened_data") else img.getdata())
    counts: dict = {}
    for p in pixels:
        counts[p] = counts.get(p, 0) + 1
    background = max(counts.values())
    common = max(counts, key=counts.get)
    return {"colours": len(counts), "drawn": 1 - background / len(pixels), "background": common}
