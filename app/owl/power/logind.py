"""Keep a Linux machine awake through systemd-logind's inhibitor locks.

``org.freedesktop.login1.Manager.Inhibit(what, who, why, mode)`` returns a
file descriptor; the lock lasts while any copy of it is open. We keep one copy,
marked close-on-exec so no agent inherits it, and close it to release. When
the daemon dies, however it dies, the kernel closes the descriptor and logind
drops the lock: nothing can outlive us.

What we inhibit, and why ``"idle"`` with mode ``"block"``:

* ``"sleep"`` + ``"block"`` would also refuse sleeps the person asks for:
  ``systemctl suspend`` fails with "Operation inhibited", and desktops that
  handle the lid or the suspend key themselves call logind's ``Suspend`` and
  are refused too, so a closed laptop stays on in a bag. Owl must never stand
  between a person and a sleep they asked for.
* ``"sleep"`` + ``"delay"`` prevents nothing: it only postpones every sleep
  by ``InhibitDelayMaxSec`` (5 s) so the holder can prepare. logind accepts
  ``"delay"`` for ``"sleep"`` and ``"shutdown"`` only, so ``"idle:sleep"``
  with ``"delay"`` is not an option either.
* ``"idle"`` + ``"block"`` is what is meant: it keeps the system from going
  idle, which is what triggers *automatic* suspend (logind's ``IdleAction``,
  and the desktops' power managers that honour logind's idle locks). Explicit
  suspend, the lid and the keys are untouched.

The known cost: some desktops (KDE's PowerDevil among them) also hold back
screen blanking and locking while an idle lock is held. Owl only holds the
lock while a Run is working, which is while the person is away; that is
documented rather than hidden.

The bus is the system bus; ``OWL_LOGIND_BUS=session`` selects the session bus
instead (tests run a stand-in logind there), and any other value is taken as
a D-Bus address.
"""

from __future__ import annotations

import os

from jeepney import DBusAddress, new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection
from jeepney.wrappers import unwrap_msg

from owl.power.base import InhibitError, Inhibitor

WHAT = "idle"
MODE = "block"
WHO = "Owl"

LOGIND_NAME = "org.freedesktop.login1"
MANAGER = DBusAddress(
    "/org/freedesktop/login1",
    bus_name=LOGIND_NAME,
    interface="org.freedesktop.login1.Manager",
)

# Seconds to wait for the bus. Its calls are made off the engine thread (the
# keeper's), so a slow bus costs no Run; but a busy machine (an agent's build
# on every core) can take over a second to answer the authentication, and a
# shorter wait then reads as "logind unreachable" and leaves the machine free
# to sleep for the 30 s until the next try.
AUTH_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 3.0


def bus_name() -> str:
    """The bus to find logind on, as jeepney names it (or an address)."""
    choice = os.environ.get("OWL_LOGIND_BUS", "system").strip()
    if choice.lower() in ("", "system"):
        return "SYSTEM"
    if choice.lower() == "session":
        return "SESSION"
    return choice


def unavailable() -> str | None:
    """None if logind can be asked for a lock; otherwise one line saying why."""
    bus = bus_name()
    try:
        # With fd passing, as Inhibit needs: a bus that refuses it is no use.
        with open_dbus_connection(bus, enable_fds=True, auth_timeout=AUTH_TIMEOUT_S) as conn:
            owned = unwrap_msg(
                conn.send_and_get_reply(
                    message_bus.NameHasOwner(LOGIND_NAME), timeout=CALL_TIMEOUT_S
                )
            )[0]
            if owned:
                return None
            startable = unwrap_msg(
                conn.send_and_get_reply(message_bus.ListActivatableNames(), timeout=CALL_TIMEOUT_S)
            )[0]
    except (OSError, TimeoutError, ValueError, KeyError) as exc:
        # ValueError/KeyError: jeepney cannot parse the bus address, or no
        # session bus address is set at all.
        return f"no D-Bus {bus.lower()} bus ({exc})"
    except Exception as exc:  # an error reply, an auth refusal
        return f"D-Bus {bus.lower()} bus unusable ({exc})"
    if LOGIND_NAME in startable:
        return None
    return f"no logind on the D-Bus {bus.lower()} bus"


class LogindInhibitor(Inhibitor[int]):
    """An idle lock from logind, held as an open file descriptor."""

    backend = "logind"

    def __init__(self, retry_after: float = 30.0) -> None:
        super().__init__(retry_after=retry_after)
        self._bus = bus_name()

    def _acquire(self, why: str) -> int:
        call = new_method_call(MANAGER, "Inhibit", "ssss", (WHAT, WHO, why, MODE))
        try:
            with open_dbus_connection(
                self._bus, enable_fds=True, auth_timeout=AUTH_TIMEOUT_S
            ) as conn:
                reply = conn.send_and_get_reply(call, timeout=CALL_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError, KeyError) as exc:
            # a timeout's own text is empty: say what ran out
            why = str(exc) or f"the bus did not answer in time ({type(exc).__name__})"
            raise InhibitError(f"logind unreachable: {why}") from exc
        try:
            (lock,) = unwrap_msg(reply)
        except Exception as exc:
            raise InhibitError(f"logind refused: {exc}") from exc
        fd = lock.to_raw_fd()
        # Descriptors received over a socket are inheritable. An agent that
        # inherited this one would keep the machine awake after we let go.
        os.set_inheritable(fd, False)
        return fd

    def _drop(self, fd: int) -> None:
        os.close(fd)
