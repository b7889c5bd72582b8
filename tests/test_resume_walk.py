"""The walk from ``Parkway.resume`` to the node's first line on replay makes each check once, in one
place: the request is validated where it is made (at park), the resume script reads the interrupt
it takes once, and the attempt's begin returns the run's record, not the whole run hash."""

from __future__ import annotations

import re
from importlib import resources


def test_resume_commit_reads_neither_the_token_nor_the_step_again() -> None:
    """resume_commit takes the interrupt resume_refused read (its request id and the run's step) as
    an argument: the exactly-once check and the commit read them once, in one place."""
    source = resources.files("parkway.adapters.redis").joinpath("_resume.lua").read_text()
    body = re.search(r"local function resume_commit\(K, A, pending\)\n(.*?)\nend\n", source, re.S)
    assert body is not None
    assert "A.token_field" not in body.group(1) and "'step'" not in body.group(1)
