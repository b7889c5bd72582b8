"""E-mail over SMTP (the standard library's ``smtplib``): one message per notification, with one
answer link per option and the form link (``/ui``) while the interrupt is open."""

from __future__ import annotations

import smtplib
from collections.abc import Mapping, Sequence
from email.message import EmailMessage
from typing import Any

from .base import Notice, Route

TIMEOUT_S = 10.0

_SUBJECTS = {
    "raised": "Waiting for you",
    "escalated": "Waiting for you (escalated)",
    "expired": "Expired unanswered",
    "cancelled": "Cancelled",
    "answered": "Answered",
}


class EmailChannel:
    name = "email"

    def __init__(self, routes: Sequence[Route], host: str, port: int, sender: str,
                 timeout_s: float = TIMEOUT_S) -> None:
        self.routes, self.host, self.port, self.sender, self.timeout_s = tuple(routes), host, port, sender, timeout_s

    def targets(self, view: Mapping[str, Any], notice: Notice) -> Sequence[str]:
        return list(dict.fromkeys(r.target for r in self.routes if r.wants(view, notice)))

    def send(self, notice: Notice, view: Mapping[str, Any], target: str) -> None:
        message = EmailMessage()
        question = str((view.get("request") or {}).get("question") or notice.request_id)
        message["Subject"] = f"[parkway] {_SUBJECTS.get(notice.kind, notice.kind)}: {question[:120]}"
        message["From"], message["To"] = self.sender, target
        message["Message-ID"] = f"<{notice.event_id}@parkway>"  # the same at every delivery of it
        message.set_content(body(notice, view, question))
        with smtplib.SMTP(self.host, self.port, timeout=self.timeout_s) as smtp:
            smtp.send_message(message)


def body(notice: Notice, view: Mapping[str, Any], question: str) -> str:
    lines = [question, "", f"workflow {notice.workflow}, run {notice.run_id}, request {notice.request_id}"]
    links = view.get("links") or {}
    if notice.kind in ("raised", "escalated"):
        options = {o.get("id"): o.get("label") or o.get("id")
                   for o in (view.get("request") or {}).get("options") or [] if isinstance(o, Mapping)}
        answers = links.get("answer") or {}
        if answers:
            lines += ["", "Answer with one click:"]
            lines += [f"  {options.get(option, option)}: {url}" for option, url in answers.items()]
        if links.get("form"):
            lines += ["", f"Or open the form: {links['form']}"]
    else:
        lines += ["", f"This interrupt was {notice.kind}."]
    return "\n".join(lines) + "\n"
