"""AIToolbox's e-mail sender over Amazon SES (used by the ``EmailNotification`` callback)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any

__all__ = ["SESSender", "build_message"]


def build_message(
    sender: str, recipient: str, subject: str, body_html: str, attachments: Sequence[str] = ()
) -> MIMEMultipart:
    """A MIME e-mail with an HTML body and the given files attached.

    Raises:
        FileNotFoundError: an attachment does not exist.
    """
    message = MIMEMultipart("mixed")
    message["Subject"], message["From"], message["To"] = subject, sender, recipient
    message.attach(MIMEText(body_html, "html", "utf-8"))
    for path in attachments:
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"e-mail attachment {path} does not exist; attach existing files."
            )
        with open(path, "rb") as f:
            part = MIMEApplication(f.read())
        part.add_header("Content-Disposition", "attachment", filename=os.path.basename(path))
        message.attach(part)
    return message


class SESSender:
    """Sends HTML e-mails with attachments through Amazon SES (``boto3``).

    Args:
        sender_name: the name shown as the sender.
        sender_email: a sender address verified in SES.
        recipient_email: where the e-mails go.
        aws_region: the SES region.
    """

    def __init__(
        self,
        sender_name: str,
        sender_email: str,
        recipient_email: str,
        aws_region: str = "eu-west-1",
    ) -> None:
        try:
            import boto3
        except ImportError as exc:
            raise ImportError(
                "SESSender sends through boto3, which is not installed: pip install boto3"
            ) from exc
        self.sender = f"{sender_name} <{sender_email}>"
        self.recipient_email = recipient_email
        self.client: Any = boto3.client("ses", region_name=aws_region)

    def send_email(
        self, subject: str, body_html: str, attachment_paths: Sequence[str] | None = None
    ) -> str:
        """Send one e-mail; returns SES's message id."""
        message = build_message(
            self.sender, self.recipient_email, subject, body_html, attachment_paths or ()
        )
        reply = self.client.send_raw_email(
            Source=self.sender,
            Destinations=[self.recipient_email],
            RawMessage={"Data": message.as_string()},
        )
        return str(reply["MessageId"])
