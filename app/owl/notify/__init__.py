"""Reaching the person where they are: channels while away, replies, the briefing.

What needs the person goes to the desktop while they are present and to their
channels (Apprise URLs: phone push, chat, mail) only while they are away; a
reply from the phone comes back as a verb; the first input after an away spell
in which something happened brings one briefing.

- `events`: what the engine tells this room (small records, put on a queue)
- `route`: pure rules: presence, one message per Job per state, digests, quiet
  hours, urgency; given `now` and the state, what to send
- `briefing`: pure: the summary of an away spell
- `words`: pure: a reply's words as a command
- `channels`: Apprise, masking, one send bounded in time
- `sender`: a thread per channel, with a backoff, off the engine thread
- `replies`: the ntfy JSON stream and Telegram's getUpdates long poll
- `service`: the thread that ties them together, and what `owl status` shows
"""
