"""Coming back to a Job: its review page, its diff, and bringing its branch home.

`write_page` gathers a Job's facts (read-only: the database and git) and
writes its page to Owl's data folder (`reviews/job-<id>.html`); the CLI and
the tray both call it, never on the engine thread, since git on a large
branch can take a while. `merge` holds the rules for `owl jobs accept --merge`.
"""

from __future__ import annotations

from pathlib import Path

from owl.errors import Refused, StoreError
from owl.settings.paths import write_atomic


def page_path(reviews: Path, job_id: int) -> Path:
    return Path(reviews) / f"job-{int(job_id)}.html"


def write_page(paths: object, job_id: int) -> Path:
    """Write Job `job_id`'s review page and return its path; Refused when impossible."""
    from owl.settings.paths import make_private_dir
    from owl.review import facts, page
    from owl.store.db import Store

    try:
        store = Store(paths.db, readonly=True)  # type: ignore[attr-defined]
    except StoreError as e:
        raise Refused(str(e)) from None
    try:
        try:
            data = facts.gather(store, job_id)
        except LookupError as e:
            raise Refused(str(e)) from None
    finally:
        store.close()
    reviews = paths.reviews  # type: ignore[attr-defined]
    make_private_dir(reviews)
    target = page_path(reviews, job_id)
    text = page.render(data)
    write_atomic(target, text.encode("utf-8"))
    return target
