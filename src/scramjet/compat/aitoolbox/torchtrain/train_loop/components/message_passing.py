"""``MessageService``: messages that callbacks leave for each other during a ``TrainLoop`` run."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, NamedTuple

__all__ = ["Message", "MessageHandling", "MessageService"]


class MessageHandling(enum.Enum):
    """How long a message is kept."""

    KEEP_FOREVER = "keep_forever"
    UNTIL_END_OF_EPOCH = "until_end_of_epoch"
    UNTIL_READ = "until_read"
    OVERWRITE = "overwrite"


class Message(NamedTuple):
    """One message: its key, its value and its handling settings."""

    key: str
    value: Any
    msg_handling_settings: list[MessageHandling]


def _settings(given: MessageHandling | Iterable[Any]) -> list[MessageHandling]:
    """The settings as a list, checked: MessageHandling members, one lifetime at most."""
    settings = [given] if isinstance(given, MessageHandling) else given
    if isinstance(settings, str) or not isinstance(settings, Iterable):
        raise TypeError(
            f"msg_handling_settings must be a MessageHandling or a list of them; received "
            f"{given!r}. Pass e.g. MessageHandling.UNTIL_READ."
        )
    out = list(settings)
    bad = [s for s in out if not isinstance(s, MessageHandling)]
    if bad:
        raise TypeError(
            f"msg_handling_settings must hold MessageHandling members; received {bad[0]!r}. "
            f"Use e.g. [MessageHandling.UNTIL_READ, MessageHandling.OVERWRITE]."
        )
    if MessageHandling.UNTIL_END_OF_EPOCH in out and MessageHandling.UNTIL_READ in out:
        raise ValueError(
            "msg_handling_settings holds both UNTIL_END_OF_EPOCH and UNTIL_READ; expected one "
            "lifetime. Keep one of them (OVERWRITE may be added to either)."
        )
    return out


class MessageService:
    """Key → list of :class:`Message`; read by key, cleared at epoch ends or when read."""

    def __init__(self) -> None:
        self.message_store: dict[str, list[Message]] = {}

    def read_messages(self, key: str) -> list[Any] | None:
        """Values of the messages under ``key`` (None if none); UNTIL_READ ones are removed."""
        if key not in self.message_store:
            return None
        messages = self.message_store[key]
        values = [m.value for m in messages]
        self.message_store[key] = [
            m for m in messages if MessageHandling.UNTIL_READ not in m.msg_handling_settings
        ]
        return values

    def write_message(
        self,
        key: str,
        value: Any,
        msg_handling_settings: MessageHandling | Iterable[Any] = MessageHandling.UNTIL_END_OF_EPOCH,
    ) -> None:
        """Store ``value`` under ``key``; with OVERWRITE it replaces the key's messages."""
        settings = _settings(msg_handling_settings)
        message = Message(key, value, settings)
        if MessageHandling.OVERWRITE in settings or key not in self.message_store:
            self.message_store[key] = [message]
        else:
            self.message_store[key].append(message)

    def end_of_epoch_trigger(self) -> None:
        """Drop UNTIL_END_OF_EPOCH messages, then keys left without messages."""
        kept = {
            key: [
                m
                for m in messages
                if MessageHandling.UNTIL_END_OF_EPOCH not in m.msg_handling_settings
            ]
            for key, messages in self.message_store.items()
        }
        self.message_store = {key: messages for key, messages in kept.items() if messages}
