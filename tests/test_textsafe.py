"""Text from an agent shown to a person: nothing in it acts on the terminal."""

from hypothesis import given, strategies as st

from owl import textsafe


def _acts(text: str, keep: str = "") -> bool:
    """Whether `text` still holds a character a terminal would act on."""
    return any(
        (ord(c) < 0x20 and c not in keep)
        or 0x7F <= ord(c) < 0xA0
        or c in "\u202e\u202d\u2066\u2067\u2068\u2069\u2028\u2029"
        or 0xD800 <= ord(c) <= 0xDFFF
        for c in text
    )


def test_escape_and_carriage_return_are_made_visible():
    assert (
        textsafe.line("fix\r\x1b[32mverified: 3 checks passed")
        == "fix\\r\\x1b[32mverified: 3 checks passed"
    )


def test_a_line_keeps_to_one_line_and_a_block_keeps_its_lines():
    assert textsafe.line("a\nb\tc") == "a\\nb\\tc"
    assert textsafe.block("a\nb\tc\r") == "a\nb\tc\\r"


def test_invalid_utf8_is_replaced():
    assert textsafe.line(b"ok \xff\xfe end") == "ok \ufffd\ufffd end"
    assert textsafe.line(b"\xff".decode("utf-8", "surrogateescape")) == "\ufffd"


def test_bidi_override_and_c1_controls_are_made_visible():
    assert textsafe.line("abc\u202edef") == "abc\\u202edef"
    assert textsafe.line("a\x9b2Jb") == "a\\x9b2Jb"


def test_plain_text_is_unchanged():
    text = "Add parser: handles C:\\path and ünïcode ✓"
    assert textsafe.line(text) == text
    assert textsafe.block(text + "\n") == text + "\n"


@given(st.binary(max_size=200))
def test_no_bytes_reach_the_screen_as_controls(data):
    assert not _acts(textsafe.line(data))
    assert not _acts(textsafe.block(data), keep="\n\t")


@given(st.text(max_size=200))
def test_no_text_reaches_the_screen_as_controls(text):
    out = textsafe.line(text)
    assert not _acts(out)
    assert "\n" not in out


def test_log_records_keep_to_one_line_without_controls():
    import logging

    from owl.logsafe import LogFormatter

    record = logging.LogRecord(
        "owl", logging.WARNING, __file__, 1, "job %s: %s", (3, "fine\r\x1b[2Jforged\nline"), None
    )
    out = LogFormatter("%(levelname)s %(message)s").format(record)
    assert out == "WARNING job 3: fine\\r\\x1b[2Jforged\\nline"
