"""The ``parkway`` command.

Every JSON it prints has the events' shape: camelCase keys (``runId``, ``resumeToken``,
``nextCursor``), times in epoch milliseconds. Human output shows times as UTC ISO.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, TypeAlias
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..adapters.limits import DEFAULT_TTL_MS
from ..runtime.errors import ConfigError, InvalidAnswer, ParkwayError, StoreUnavailable, WaitTimeout
from ..runtime.logger import configure_at_first_line
from ..sessions.cli import add as add_session_commands

if TYPE_CHECKING:  # the command's start stays light: what a command needs, it imports when it runs
    from ..client import Parkway
    from ..config import Settings
    from ..runtime.contracts import Contract
    from ..runtime.protocol import Event, Interrupt, InterruptRequest, Run
    from ..runtime.store import StoredEvent

DEMO_INPUT = {"title": "Quarterly report"}


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=False)


def _dump(model: Any, **options: Any) -> dict[str, Any]:
    """A model as the CLI prints it, as the HTTP API answers it: camelCase, JSON types, and every
    field, null when it has no value."""
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, **options)
    return out


NEEDS_REDIS = (
    "needs a Redis: set PARKWAY_REDIS_URL or pass --redis-url "
    "(embedded runs live only inside the process that started them)"
)


def _settings(args: argparse.Namespace, **overrides: Any) -> Settings:
    from ..config import Settings

    url = _redis_url(args)
    settings = Settings.from_env(redis_url=url, workflows=getattr(args, "workflows", None), **overrides)
    shards = settings.shards or ()
    if url and len(shards) > 1 and url not in shards:
        raise ConfigError(f"--redis-url {url} is not one of PARKWAY_SHARDS: with shards a command reads and writes "
                          "every shard (and a worker serves --shard K); unset PARKWAY_SHARDS to use one Redis")
    return settings


def _redis_url(args: argparse.Namespace) -> str | None:
    """The Redis the command line names: ``--redis-url``, or ``--redis-sentinels`` with
    ``--redis-master`` (passwords from ``PARKWAY_REDIS_PASSWORD`` and
    ``PARKWAY_REDIS_SENTINEL_PASSWORD``) as one ``redis+sentinel://`` string; None: the environment's."""
    from ..config import sentinel_url

    url: str | None = getattr(args, "redis_url", None)
    sentinels, master = getattr(args, "redis_sentinels", None), getattr(args, "redis_master", None)
    if url and (sentinels or master):
        raise ConfigError("pass --redis-url or --redis-sentinels with --redis-master, not both")
    if url:
        return url
    env = os.environ
    password, sentinel_password = env.get("PARKWAY_REDIS_PASSWORD"), env.get("PARKWAY_REDIS_SENTINEL_PASSWORD")
    return sentinel_url(sentinels, master, password, sentinel_password)


def _client(args: argparse.Namespace, *, embedded: bool = False, redis_only: bool = True) -> Parkway:
    settings = _settings(args)
    if embedded:
        settings = settings.with_(redis_url=None)
    elif redis_only and settings.embedded:
        raise ConfigError(f"parkway {args.command} {NEEDS_REDIS}")
    from ..client import Parkway

    return Parkway(settings)


# --- times -------------------------------------------------------------------


def _when(ms: int) -> str:
    """Epoch milliseconds as UTC ISO to the second."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(ms: int) -> str:
    """A duration, roughly: 45s, 12m, 2h 5m, 3d 4h."""
    s = max(0, ms) // 1000
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h" + (f" {s % 3600 // 60}m" if s % 3600 >= 60 else "")
    return f"{s // 86400}d" + (f" {s % 86400 // 3600}h" if s % 86400 >= 3600 else "")


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- printing ------------------------------------------------------------------


def _show_run(run: Run, out: TextIO, extra: dict[str, Any] | None = None) -> None:
    out.write(_json({**_dump(run), **(extra or {})}) + "\n")


def _describe(interrupt: Interrupt, out: TextIO, now: int | None = None) -> None:
    """One pending interrupt, for people: the question, its options, its times, its token if shown."""
    now = _now_ms() if now is None else now
    req = interrupt.asked()
    out.write(f"- {interrupt.request_id}  run {interrupt.run_id}  {interrupt.workflow}/{interrupt.node}\n")
    out.write(f"  {req.kind}: {req.question}\n")
    if interrupt.audience or interrupt.tenant:
        asked = [f"asks {interrupt.audience}"] if interrupt.audience else []
        out.write("  " + ", ".join(asked + ([f"tenant {interrupt.tenant}"] if interrupt.tenant else [])) + "\n")
    if req.kind == "text":
        out.write(f"    (text, at most {req.max_length} characters)\n")
    for option in req.options:
        out.write(
            f"    [{option.id}] {option.label}" + (f" - {option.description}" if option.description else "") + "\n"
        )
    left = interrupt.expires_at - now
    expiry = f"expires in {_span(left)}" if left > 0 else f"expired {_span(-left)} ago"
    out.write(
        f"  waiting since {_span(now - interrupt.created_at)} ({_when(interrupt.created_at)}), "
        f"{expiry} ({_when(interrupt.expires_at)})\n"
    )
    if interrupt.resume_token:
        out.write(f"  token: {interrupt.resume_token}\n")


def _describe_ended(interrupt: Interrupt, out: TextIO) -> None:
    """One ended interrupt, for people: how it ended, when, after how long, by whom, refusals."""
    life = interrupt.lifecycle
    out.write(f"- {interrupt.request_id}  run {interrupt.run_id}  {interrupt.workflow}/{interrupt.node}\n")
    if life is None:
        return
    line = f"  {life.outcome or life.status}"
    if life.ended_at is not None:
        line += f" at {_when(life.ended_at)}"
    if life.wait_ms is not None:
        line += f" after {_span(life.wait_ms)}"
    if life.responder:
        line += f" by {life.responder}"
    if life.reason:
        line += f" ({life.reason})"
    out.write(line + f"; {life.presentation}, {life.option_count} option(s)")
    if life.schema_id:
        out.write(f", contract {life.schema_id} v{life.schema_version}")
    out.write(f"; {life.failures} answer(s) refused\n" if life.failures else "\n")


def _event_json(event: Event) -> str:
    """An event as `run` and `events --json` print it: type, eventId (its stream position), ts, then
    its data (camelCase; an interrupt's own ``id`` is its hook id)."""
    head = {"type": event.type, "eventId": event.id, "ts": event.ts}
    return _json({**head, **{k: v for k, v in event.data.items() if k not in head}})


_HIDDEN = {"resumeToken", "eventId"}  # a token is a capability: `parkway interrupts --tokens` shows it on purpose


def _short(value: Any, width: int = 80) -> str:
    text = value if isinstance(value, str) else _json(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _event_human(event: Event) -> str:
    """One readable line per event: when (UTC), what, and its gist, each value cut at 80 characters."""
    data = event.data
    if event.type == "interrupt":
        asked = data.get("input")
        request: dict[str, Any] = asked if isinstance(asked, dict) else {}
        options = " | ".join(f"[{o.get('id')}] {o.get('label', o.get('id'))}" for o in request.get("options") or [])
        gist = f"{data.get('node')}: {_short(request.get('question', ''))}" + (f"  {options}" if options else "")
        gist += f"  (request {data.get('requestId')})"
    else:
        gist = "  ".join(f"{key} {_short(value)}" for key, value in data.items() if key not in _HIDDEN)
    return f"{_when(event.ts)}  {event.type:<17} {gist}".rstrip()


# --- asking at a terminal ------------------------------------------------------


def ask(
    request: InterruptRequest,
    stdin: TextIO = sys.stdin,
    out: TextIO = sys.stderr,
    contract: Contract[Any, Any] | None = None,
) -> dict[str, Any]:
    """Ask a person at the terminal until the answer fits the request; return resume() keyword arguments.

    A contract request needs its ``contract`` (see :func:`contract_of`): the answer is a JSON value,
    checked against its response model here before it is sent."""
    if request.kind == "contract" and contract is None:
        raise ParkwayError(f"no contract to check an answer to {request.schema_id} against")
    out.write(f"\n{request.question}\n")
    if request.kind == "contract":
        assert contract is not None
        _describe_contract(request, contract, out)
    if request.kind == "text":
        out.write(f"(text, at most {request.max_length} characters)\n")
    for i, option in enumerate(request.options, 1):
        out.write(f"  {i}. {option.label} [{option.id}]" + (f" - {option.description}" if option.description else ""))
        out.write("\n")
    from ..runtime.answers import validate_answer

    while True:
        try:
            answer = _prompt(request, stdin, out)
            validate_answer(request, contract=contract, **answer)
        except InvalidAnswer as exc:
            out.write(f"{_terminal_words(exc.message)}; try again\n")
            continue
        return answer


def contract_of(pw: Parkway, request: InterruptRequest) -> Contract[Any, Any] | None:
    """The contract a contract request was made under (imported as the resuming client finds it), or None."""
    return pw.settings.modules.load_contract(request.contract_ref) if request.contract_ref else None


def _describe_contract(request: InterruptRequest, contract: Contract[Any, Any], out: TextIO) -> None:
    """The schema, the request's data and the response model's fields, one a line."""
    out.write(f"(contract {request.schema_id} v{request.schema_version})\n")
    if request.payload:
        out.write(f"request: {_json(request.payload)}\n")
    schema = contract.response.model_json_schema()
    fields: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    out.write("answer fields:\n")
    width = max((len(name) for name in fields), default=0)
    for name, spec in fields.items():
        line = f"  {name:<{width}}  {_schema_type(spec)}, {'required' if name in required else 'optional'}"
        if spec.get("description"):
            line += f" - {spec['description']}"
        limits = _schema_limits(spec)
        out.write(line + (f" ({'; '.join(limits)})" if limits else "") + "\n")


def _schema_type(spec: dict[str, Any]) -> str:
    """A JSON schema's type in words: string, integer or null, list of string, one of "a", "b"..."""
    if "$ref" in spec:
        return str(spec["$ref"]).rsplit("/", 1)[-1] + " (an object)"
    for key in ("anyOf", "oneOf"):
        if key in spec:
            return " or ".join(_schema_type(s) for s in spec[key])
    if "enum" in spec:
        return "one of " + ", ".join(_json(v) for v in spec["enum"])
    if "const" in spec:
        return _json(spec["const"])
    kind = spec.get("type")
    if kind == "array":
        return "list of " + _schema_type(spec["items"]) if isinstance(spec.get("items"), dict) else "list"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return str(kind) if kind else "any value"


_LIMITS = (
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("pattern", "matching {}"),
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
)


def _schema_limits(spec: dict[str, Any]) -> list[str]:
    """A field's constraints (its own, and those of the types it may take) and its default, in words."""
    limits = []
    for part in [spec, *spec.get("anyOf", ()), *spec.get("oneOf", ())]:
        limits += [words.format(part[key]) for key, words in _LIMITS if key in part]
    if "default" in spec:
        limits.append(f"default {_json(spec['default'])}")
    return limits


def _prompt(request: InterruptRequest, stdin: TextIO, out: TextIO) -> dict[str, Any]:
    if request.kind == "contract":
        out.write("answer (a JSON object, on one line): ")
        out.flush()
        line = _line(stdin)
        try:
            return {"value": json.loads(line)}
        except json.JSONDecodeError as exc:
            raise InvalidAnswer(f"that is not JSON ({exc.msg}, column {exc.colno})") from None
        except RecursionError:
            raise InvalidAnswer("that JSON nests too deeply") from None
    if request.kind == "text":
        out.write("> ")
        out.flush()
        return {"value": _line(stdin)}
    hint = "numbers or ids, comma-separated" if request.multiple else "a number or an id"
    out.write(f"answer ({hint}): ")
    out.flush()
    picks = [p.strip() for p in _line(stdin).split(",") if p.strip()]
    ids = []
    for p in picks:
        ids.append(request.options[int(p) - 1].id if p.isdigit() and 0 < int(p) <= len(request.options) else p)
    return {"selected": ids if request.multiple else (ids[0] if ids else "")}


def _terminal_words(message: str) -> str:
    return message.replace("selected is empty", "nothing picked").replace("selected names", "the answer names")


_CLI_WORDS = (
    ("value=<text>", "--text TEXT"),
    ("value=<an object>", "--value JSON"),
    ("selected=<option id(s)>", "--select ID"),
    (" (or selected=<text>)", ""),
    (", not selected", ", not --select"),
    (", not value", ", not --text or --value"),
    ("needs a string value", "needs text (--text TEXT)"),
    ("selected is empty", "--select is empty"),
    ("selected names", "--select names"),
    ("requestId ", "--request-id "),
)


def _cli_words(message: str) -> str:
    """An answer's refusal in the command's own flags, not the Python API's keyword arguments."""
    for api, flag in _CLI_WORDS:
        message = message.replace(api, flag)
    return message


def _interactive() -> bool:
    """Whether a person can answer at this terminal (stdin may be a file, /dev/null, or closed)."""
    return sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty()


def _integer(low: int, high: int | None = None) -> Any:
    """An argparse type: an integer from ``low`` (to ``high``); anything else is a usage error (exit 2)
    that names the flag."""
    span = f"from {low:,} to {high:,}" if high is not None else f"of at least {low:,}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be an integer {span}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


def _parse_json(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParkwayError(f"{option} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise ParkwayError(f"{option} nests too deeply") from None


def _line(stdin: TextIO) -> str:
    line = stdin.readline()
    if not line:
        raise ParkwayError("no answer: the input ended")
    return line.rstrip("\n")


# --- worker ----------------------------------------------------------------------


def cmd_worker(args: argparse.Namespace) -> int:
    from ..adapters.redis.errors import translated
    from ..workers.worker import run_worker

    settings = _settings(args, queue=args.queue)
    if settings.redis_url is None:
        raise ParkwayError("parkway worker needs a Redis: set PARKWAY_REDIS_URL or pass --redis-url")
    if settings.shards is not None and len(settings.shards) > 1:
        settings = _shard_of(settings, args.shard, _redis_url(args))
    elif args.shard is not None:
        raise ConfigError("--shard needs PARKWAY_SHARDS (more than one shard)")
    print(_worker_line(settings, args.workers), file=sys.stderr, flush=True)
    with translated():
        return run_worker(settings, burst=args.burst, workers=args.workers)


def _shard_of(settings: Settings, shard: int | None, given: str | None) -> Settings:
    """A worker's settings for shard ``shard`` of ``settings.shards`` (it serves that shard alone),
    once the shard is checked to hold this process's bucket -> shard table; ``given``: the URL the
    command line named, which must then be that shard's."""
    from ..adapters.redis.connection import connect
    from ..adapters.redis.shard_table import check_table
    from ..adapters.redis.shards import default_table

    assert settings.shards is not None
    if shard is None or not 0 <= shard < len(settings.shards):
        raise ConfigError(f"with PARKWAY_SHARDS a worker serves one shard: pass --shard K, K from 0 to "
                          f"{len(settings.shards) - 1} (one worker, or --workers N, per shard)")
    url = settings.shards[shard]
    if given is not None and given != url:
        raise ConfigError(f"--redis-url {given} is not shard {shard} ({url}): pass that shard's URL, "
                          "or leave --redis-url out (--shard K picks it from PARKWAY_SHARDS)")
    client = connect(url)
    try:
        check_table(client, shard, default_table(len(settings.shards)))
    finally:
        client.close()
    print(f"parkway worker: shard {shard} of {len(settings.shards)}", file=sys.stderr, flush=True)
    return settings.with_(redis_url=url, shards=None, shard=shard)


def _worker_line(settings: Settings, workers: int) -> str:
    assert settings.redis_url is not None
    modules = ", ".join(settings.workflows) if settings.workflows else "the application's own modules"
    return (
        f"parkway worker: queue {settings.queue!r} on {_without_password(settings.redis_url)}, "
        f"workflows from {modules}, pid {os.getpid()}, {workers} worker{'s' if workers > 1 else ''}"
    )


def _without_password(url: str) -> str:
    """The URL with no password, neither in its user part nor as a ``password=`` (or
    ``sentinel_password=``) parameter."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    netloc = f"{user}@{host}" if at and user else host
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if not k.lower().endswith("password")])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# --- run ---------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    if args.detach and _settings(args).embedded:
        raise ConfigError(f"--detach {NEEDS_REDIS}")
    with _client(args, redis_only=False) as pw:
        data = _parse_json(args.input, "--input")
        run_id = pw.start(args.workflow, data, run_id=args.run_id, ttl_ms=args.ttl_ms, tenant=args.tenant)
        if args.detach:
            print(run_id)
            return 0
        try:
            return _follow(pw, args, run_id)
        except KeyboardInterrupt:
            print(_left_behind(pw, run_id), file=sys.stderr, flush=True)
            return 130


def _left_behind(pw: Parkway, run_id: str) -> str:
    """What Ctrl-C leaves: the run's state and how to find it again."""
    try:
        status = pw.get_run(run_id).status
    except ParkwayError as exc:
        return f"run {run_id}: its state could not be read ({exc}); see `parkway show {run_id}`"
    if pw.settings.embedded:
        return f"run {run_id} is {status.value}, but it runs embedded and ends with this process"
    if status.finished:
        return f"run {run_id} is {status.value}; see `parkway show {run_id}`"
    return (
        f"run {run_id} is still {status.value}: pick it up with `parkway show {run_id}` and "
        f"`parkway interrupts --run-id {run_id} --tokens`"
    )


def _follow(pw: Parkway, args: argparse.Namespace, run_id: str) -> int:
    """Print the run's events; answer its interrupts at a terminal; return the exit status."""
    as_json = args.json or not sys.stdout.isatty()
    from ..runtime.protocol import RunStatus

    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    after, hinted = "0", False
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        try:
            for event in pw.stream(run_id, after=after, until="settled", timeout=min(remaining or 5.0, 5.0)):
                after = event.id
                print(_event_json(event) if as_json else _event_human(event), flush=True)
        except WaitTimeout:
            if remaining is not None and remaining <= 5.0:
                raise ParkwayError(f"run {run_id} did not pause or finish within {args.timeout}s") from None
            if not hinted and pw.get_run(run_id).status is RunStatus.QUEUED:
                print(f"run {run_id} is queued and no worker has begun it: is `parkway worker` running?",
                      file=sys.stderr)
                hinted = True
            continue
        run = pw.get_run(run_id)
        if run.status.finished:
            if not as_json:
                _say_how_it_ended(run)
            return 0 if run.status is RunStatus.COMPLETED else 1
        if run.interrupt is None:
            continue  # answered meanwhile by someone else: keep following
        if not _interactive():
            print(_waiting_hint(run, pw.settings.embedded), file=sys.stderr)
            return 0
        _answer_at_terminal(pw, run_id, run.interrupt.asked())


def _say_how_it_ended(run: Run) -> None:
    """At a terminal: the run's end in words, then its output in full, as one JSON line."""
    seconds = (run.updated_at - run.created_at) / 1000
    print(f"run {run.run_id} {run.status.value} after {seconds:.1f}s at node {run.node}")
    if run.output is not None:
        print(f"output: {_json(run.output)}")


def _waiting_hint(run: Run, embedded: bool) -> str:
    run_id = run.run_id
    if embedded:
        return (f"run {run_id} is waiting, but it runs embedded and ends with this process; set PARKWAY_REDIS_URL "
                "and start `parkway worker` to keep runs across processes")
    expiry = f" (it expires in {_span(run.interrupt.expires_at - _now_ms())})" if run.interrupt else ""
    return (f"run {run_id} is waiting{expiry}; answer it with `parkway resume TOKEN ...` "
            f"(see `parkway interrupts --run-id {run_id} --tokens`)")


def _answer_at_terminal(pw: Parkway, run_id: str, request: InterruptRequest) -> None:
    """Ask until the answer fits the request, then resume with the open interrupt's token."""
    page = pw.list_interrupts(run_id=run_id, include_tokens=True)
    if not page.items or page.items[0].resume_token is None:
        return
    token = page.items[0].resume_token
    contract = contract_of(pw, request)
    while True:
        try:
            result = pw.resume(token, responder="cli", **ask(request, contract=contract))
        except InvalidAnswer as exc:
            print(f"{exc.message}; try again", file=sys.stderr)
            continue
        print(f"resume: {result.outcome.value}", file=sys.stderr)
        return


# --- interrupts, resume, cancel ---------------------------------------------------------


def cmd_interrupts(args: argparse.Namespace) -> int:
    with _client(args) as pw:
        page = pw.list_interrupts(
            workflow=args.workflow,
            run_id=args.run_id,
            order=args.order,
            limit=args.limit,
            cursor=args.cursor,
            include_tokens=args.tokens,
            audience=args.audience,
            tenant=args.tenant,
            session=args.session,
            created_before=_ago(args.older_than),
            created_after=_ago(args.newer_than),
            status=args.status,
        )
        _warn_missing(page.missing_shards, "interrupts")
        if args.json:
            print(_json(_dump(page)))
            return 0
        if not page.items:
            print(f"no {args.status} interrupts")
        now = _now_ms()
        for interrupt in page.items:
            if args.status == "pending":
                _describe(interrupt, sys.stdout, now)
            else:
                _describe_ended(interrupt, sys.stdout)
        if page.next_cursor:
            print(f"more: --cursor {page.next_cursor}")
        return 0


def _warn_missing(shards: tuple[int, ...], what: str) -> None:
    """A listing across shards holds what the shards that answered hold: say which did not."""
    if shards:
        named = ", ".join(str(i) for i in shards)
        print(f"warning: shard {named} of PARKWAY_SHARDS did not answer: its {what} are not listed", file=sys.stderr)


def cmd_runs(args: argparse.Namespace) -> int:
    with _client(args) as pw:
        page = pw.list_runs(
            status=args.status,
            workflow=args.workflow,
            workflow_prefix=args.workflow_prefix,
            tenant=args.tenant,
            created_before=_ago(args.older_than),
            created_after=_ago(args.newer_than),
            limit=args.limit,
            cursor=args.cursor,
        )
        _warn_missing(page.missing_shards, "runs")
        if args.json:
            print(_json(_dump(page)))
            return 0
        if not page.items:
            print("no runs")
        for run in page.items:
            live = run.node and run.status.value in ("running", "waiting")
            where = f" at {run.node} (step {run.step})" if live else ""
            parent = f" child of {run.parent_run_id}" if run.parent_run_id else ""
            tenant = f" tenant {run.tenant}" if run.tenant else ""
            print(f"{run.run_id}  {run.workflow}  {run.status.value}{where}  created {_when(run.created_at)}"
                  f"  updated {_when(run.updated_at)}{tenant}{parent}")
        if page.next_cursor:
            print(f"more: --cursor {page.next_cursor}")
        return 0


_AGE = re.compile(r"([0-9]{1,9})([smhd]?)")
_AGE_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _age(text: str) -> int:
    """An age as --older-than / --newer-than take it (``90``, ``90s``, ``15m``, ``2h``, ``7d``), in seconds."""
    m = _AGE.fullmatch(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age such as 90s, 15m, 2h or 7d")
    return int(m.group(1)) * _AGE_UNITS[m.group(2)]


def _ago(seconds: int | None) -> int | None:
    """The creation time an age bound stands for (epoch ms), or None."""
    return None if seconds is None else _now_ms() - seconds * 1000


def cmd_resume(args: argparse.Namespace) -> int:
    kwargs: dict[str, Any] = {}
    if args.select:
        kwargs["selected"] = args.select if len(args.select) > 1 or args.multi else args.select[0]
    elif args.value is not None:
        kwargs["value"] = _parse_json(args.value, "--value")
    elif args.text is not None:
        kwargs["value"] = args.text
    elif not _interactive():
        print("usage: parkway resume TOKEN (--select ID... | --text TEXT | --value JSON)\nparkway resume: error: "
              "give one of --select, --text or --value (at a terminal, without one, it asks)", file=sys.stderr)
        return 2
    if args.input is not None and not args.or_start:
        raise ParkwayError("--input goes with --or-start (the input of the run it starts if the interrupt expired)")
    with _client(args) as pw:
        if args.select:
            _check_select(pw, args.token)
        if not kwargs:
            from ..runtime.protocol import Interrupt

            found = pw.lookup(args.token)
            if isinstance(found, Interrupt):
                try:
                    kwargs = ask(found.asked(), contract=contract_of(pw, found.asked()))
                except KeyboardInterrupt:
                    print(f"\nnot answered: interrupt {found.request_id} of run {found.run_id} is still waiting "
                          "and the token still works", file=sys.stderr)
                    return 130
        try:
            if args.or_start:
                started = pw.resume_or_start(args.token, request_id=args.request_id, responder=args.responder,
                                             input=_parse_json(args.input, "--input") if args.input else None,
                                             **kwargs)
                print(_json(_dump(started)))
                return {"resumed": 0, "started": 0, "already_resolved": 3, "expired": 4}.get(started.outcome, 5)
            result = pw.resume(args.token, request_id=args.request_id, responder=args.responder, **kwargs)
        except InvalidAnswer as exc:
            raise ParkwayError(_cli_words(exc.message)) from None
        print(_json(_dump(result)))
        return RESUME_EXIT[result.outcome]


def _check_select(pw: Parkway, token: str) -> None:
    """Refuse --select for a question that takes text (the library takes ``selected=<text>`` from
    clients that send text that way; on the command line --select means option ids)."""
    from ..runtime.protocol import Interrupt

    found = pw.lookup(token)
    if isinstance(found, Interrupt) and found.asked().kind == "text":
        raise ParkwayError("a text question takes --text TEXT, not --select")


# keyed by the outcomes' values (ResumeOutcome, CancelOutcome are str enums)
RESUME_EXIT = {"accepted": 0, "already_resolved": 3, "expired": 4, "unknown": 5}

CANCEL_EXIT = {"cancelled": 0, "already_resolved": 3}

RESUME_STATUSES = (
    "exit status: 0 accepted, 3 already resolved (answered or cancelled before), 4 expired,\n"
    "5 unknown (no such interrupt, or a token this deployment's PARKWAY_SECRET did not sign),\n"
    "1 error (an answer that does not fit: the interrupt stays open, the token still works), 2 usage error"
)


def cmd_cancel(args: argparse.Namespace) -> int:
    with _client(args) as pw:
        if args.token or "." in args.target:  # a run id has no '.'; a token is RUN.REQUEST.SIGNATURE
            result = pw.cancel_interrupt(args.target, reason=args.reason, responder=args.responder)
            print(_json(_dump(result)))
            return RESUME_EXIT[result.outcome]
        cancelled = pw.cancel(args.target, reason=args.reason, responder=args.responder)
        print(_json(_dump(cancelled)))
        return CANCEL_EXIT[cancelled.outcome]


# --- fork --------------------------------------------------------------------------


def cmd_fork(args: argparse.Namespace) -> int:
    with _client(args) as pw:
        data = _parse_json(args.input, "--input") if args.input is not None else None
        new = pw.fork(args.run_id, step=args.step, new_run_id=args.new_run_id, input=data)
        print(_json({"runId": new, "forkedFrom": {"runId": args.run_id, "step": args.step}}))
        return 0


# --- show, events ------------------------------------------------------------------


def cmd_interrupt(args: argparse.Namespace) -> int:
    with _client(args) as pw:
        interrupt = pw.get_interrupt(args.request_id, run_id=args.run_id)
        print(_json(_dump(interrupt)))
        _describe_ended(interrupt, sys.stderr)
        return 0


def cmd_show(args: argparse.Namespace) -> int:
    from ..runtime.protocol import RunStatus

    with _client(args) as pw:
        run = pw.get_run(args.run_id)
        extra = {}
        if run.status is RunStatus.CANCELLED:
            cancellation = _cancellation(_stored_events(pw, run.run_id))
            if cancellation:
                extra["cancellation"] = cancellation
        _show_run(run, sys.stdout, extra)
        print(_run_in_words(run, _now_ms()), file=sys.stderr)
        return 0


def _run_in_words(run: Run, now: int) -> str:
    """One line for people beside show's JSON: status, node, readable times, when its interrupt expires."""
    at = f" at node {run.node} (step {run.step})" if run.node else ""
    started = f"started {_span(now - run.created_at)} ago ({_when(run.created_at)})"
    line = f"run {run.run_id} is {run.status.value}{at}, {started}"
    if run.status.finished:
        line += f", ended {_span(now - run.updated_at)} ago ({_when(run.updated_at)})"
    elif run.interrupt is not None:
        left = run.interrupt.expires_at - now
        line += (
            f"; its interrupt {run.interrupt.request_id} has waited {_span(now - run.interrupt.created_at)} and "
            + (f"expires in {_span(left)}" if left > 0 else f"expired {_span(-left)} ago")
            + f" ({_when(run.interrupt.expires_at)})"
        )
    return line


def _stored_events(pw: Parkway, run_id: str, after: str = "0") -> Iterator[StoredEvent]:
    """The run's stored events after ``after``, up to now (no waiting for more)."""
    while batch := pw.store.read_events(run_id, after, None, 1000):
        yield from batch
        after = batch[-1].id


def _cancellation(events: Iterator[StoredEvent]) -> dict[str, Any]:
    """Who cancelled the run and why, from its ``run.cancelled`` and ``interrupt.cancelled`` events.

    A run cancelled while it waited ends with a ``run.cancelled`` that carries the node's exception
    message; the person's reason and name are on the ``interrupt.cancelled`` before it."""
    by_run: StoredEvent | None = None
    by_interrupt: StoredEvent | None = None
    for event in events:
        if event.type == "run.cancelled":
            by_run = event
        elif event.type == "interrupt.cancelled":
            by_interrupt = event
    chosen = by_run if by_interrupt is None or (by_run and by_run.data.get("responder")) else by_interrupt
    if chosen is None:
        return {}
    out = {"reason": chosen.data.get("reason"), "responder": chosen.data.get("responder"), "at": chosen.ts}
    if chosen is by_interrupt:
        out["requestId"] = chosen.data.get("requestId")
    return out


def cmd_events(args: argparse.Namespace) -> int:
    from ..runtime.protocol import check_event_id

    check_event_id(args.after, "--after")
    with _client(args) as pw:
        pw.get_run(args.run_id)  # an unknown run is an error, not an empty list
        events = _events_to_the_end if args.follow else _events_so_far
        for event in events(pw, args.run_id, args.after):
            print(_event_json(event) if args.json else _event_human(event), flush=True)
        return 0


def _events_to_the_end(pw: Parkway, run_id: str, after: str) -> Iterator[Event]:
    """The run's events from ``after`` until its final ``done`` (past a ``done`` that only says a
    response was delivered while the run goes on)."""
    while True:
        last = None
        for last in pw.stream(run_id, after=after):
            yield last
        if last is None or last.data.get("status") != "delivered":
            return
        after = last.id


def _events_so_far(pw: Parkway, run_id: str, after: str) -> Iterator[Event]:
    """The run's events from ``after`` to the last one stored now, as ``stream`` yields them (with tokens)."""
    last = None
    for stored in _stored_events(pw, run_id, after):
        last = stored.id
    while last is not None:
        for event in pw.stream(run_id, after=after, timeout=15):  # it ends at each `done`: go on to `last`
            yield event
            after = event.id
            if event.id == last:
                return


# --- reconcile, demo -----------------------------------------------------------------


def cmd_check_deploy(args: argparse.Namespace) -> int:
    with _client(args) as pw:
        report = pw.check_deploy(args.run_id, args.against)
        print(_json({"runId": report.run_id, "node": report.node, "step": report.step, "outcome": report.outcome,
                     "recorded": report.recorded, "detail": report.detail}))
        return {"consistent": 0, "nondeterministic": 3}.get(report.outcome, 1)


def cmd_serve(args: argparse.Namespace) -> int:
    if args.hash_key is not None:
        from ..http.app import hash_key

        print(hash_key(args.hash_key))
        return 0
    try:
        import uvicorn

        from ..http.app import app_from_env
    except ImportError as exc:
        raise ParkwayError(f"parkway serve needs the http extra: pip install 'parkway[http]' ({exc})") from None
    url = _redis_url(args)
    if url:
        os.environ["PARKWAY_REDIS_URL"] = url  # the app reads its settings as uvicorn's factory does
        os.environ.pop("PARKWAY_REDIS_SENTINELS", None)  # the command line's choice wins over these
        os.environ.pop("PARKWAY_REDIS_MASTER", None)
    if args.no_auth:
        os.environ["PARKWAY_API_NO_AUTH"] = "1"
    if args.workflows:
        os.environ["PARKWAY_WORKFLOWS"] = args.workflows
    app = app_from_env()
    print(f"parkway serve: http://{args.host}:{args.port} (/openapi.json, live page at /ui)", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info" if args.verbose else "warning")
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ..workers.reconciler import reconcile_once

    with _client(args) as pw:
        # with PARKWAY_SHARDS: one pass on each shard, with that shard's own store and queue
        stores = getattr(pw.store, "stores", None)
        dispatchers = getattr(pw.backend.dispatcher, "dispatchers", None)
        shards = list(zip(stores, dispatchers, strict=True)) if stores and dispatchers else [
            (pw.store, pw.backend.dispatcher)]
        total: dict[str, list[str]] = {}
        for store, dispatcher in shards:
            report = reconcile_once(store, dispatcher, max_lost=pw.settings.max_lost_attempts,
                                    grace_ms=pw.settings.limits.expiry_grace_ms)
            for name, run_ids in asdict(report).items():
                total.setdefault(name, []).extend(run_ids)
        print(_json(total))
        return 0


def cmd_failover(args: argparse.Namespace) -> int:
    from ..adapters.redis.sentinel import is_sentinel_url, parse_sentinel_url
    from ..adapters.redis.switchover import SwitchoverError, switchover
    from ..config import sentinel_url

    env = os.environ
    url = _redis_url(args) or env.get("PARKWAY_REDIS_URL") or sentinel_url(
        env.get("PARKWAY_REDIS_SENTINELS"), env.get("PARKWAY_REDIS_MASTER"), env.get("PARKWAY_REDIS_PASSWORD"),
        env.get("PARKWAY_REDIS_SENTINEL_PASSWORD"))
    if not url or not is_sentinel_url(url):
        raise ConfigError("parkway failover needs Redis under Sentinel: --redis-sentinels with --redis-master, "
                          "or a redis+sentinel:// URL")
    started = time.monotonic()

    def say(line: str) -> None:
        print(f"[{time.monotonic() - started:6.2f}s] {line}", flush=True)

    try:
        done = switchover(parse_sentinel_url(url), pause_ms=args.pause_ms, timeout_s=args.timeout, say=say)
    except SwitchoverError as exc:
        say(f"failed: {exc}")
        return 1
    assert done.new is not None
    say(f"done: master is {done.new[0]}:{done.new[1]}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with _client(args) as pw:
        status = pw.status()
    if args.json:
        print(_json(_dump(status)))
        return 0
    now = _now_ms()
    print(f"queue {status.queue}: {status.queued} job(s) waiting; {status.outstanding} enqueued and not yet begun"
          + (f", the oldest for {_span(status.oldest_outstanding_ms)}" if status.oldest_outstanding_ms else ""))
    print(f"running now: {status.running} activation(s)")
    print(f"workers registered with RQ: {len(status.workers)}")
    for w in status.workers:
        beat = f"heartbeat {_span(now - w.heartbeat_at)} ago" if w.heartbeat_at else "no heartbeat yet"
        print(f"  {w.name}  {w.host or '?'} pid {w.pid or '?'}  {beat}")
    ended = ", ".join(f"{n} {s}" for s, n in status.runs_finished.items())
    print(f"runs ended: {ended}; attempts {status.attempts}, recovered from stopped workers {status.recovered}")
    pending = ", ".join(f"{wf} {n}" for wf, n in sorted(status.pending.items()) if n) or "none"
    print(f"pending interrupts: {pending}")
    if status.notices or status.notices_dead:
        print(f"notifications: {status.notices} to deliver, {status.notices_dead} dead letters"
              " (parkway.channels.dead_letters)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ..logs import configure as configure_logs

    configure_logs("INFO" if args.verbose else "ERROR")  # the demo says itself that it runs embedded
    with _client(args, embedded=True) as pw:
        return _demo(pw)


def _demo(pw: Parkway) -> int:
    from ..demo import approval

    out = sys.stdout
    run_id = pw.start(approval, DEMO_INPUT)
    out.write(f"started run {run_id} of workflow 'approval' (embedded: nothing is kept after this process)\n")
    run = pw.wait(run_id, timeout=30)
    out.write("\npending interrupts (list_interrupts):\n")
    page = pw.list_interrupts(include_tokens=True)
    for interrupt in page.items:
        _describe(interrupt, out)
    target = page.items[0]
    if _interactive():
        answer = ask(target.asked(), out=out, contract=contract_of(pw, target.asked()))
    else:
        first = target.asked().options[0].id
        out.write(f"\nno terminal to ask: answering with the first option {first!r}\n")
        answer = {"selected": first}
    assert target.resume_token is not None
    result = pw.resume(target.resume_token, responder="demo", **answer)
    out.write(f"resume: {result.outcome.value}\n")
    again = pw.resume(target.resume_token, responder="demo", **answer)
    out.write(f"the same token and answer again (a retry): {again.outcome.value}\n")
    others = [o.id for o in target.asked().options or () if {"selected": o.id} != answer]
    if others:
        other = pw.resume(target.resume_token, responder="demo", selected=others[0])
        out.write(f"the same token, another answer: {other.outcome.value}\n")
    run = pw.wait(run_id, timeout=30)
    out.write("\nthe run:\n")
    _show_run(run, out)
    return 0 if run.status.value == "completed" else 1


# --- the parser ----------------------------------------------------------------------

Subcommands: TypeAlias = "argparse._SubParsersAction[_Parser]"  # what add_subparsers() returns

REDIS_REQUIRED = ("the Redis parkway runs on (required; default $PARKWAY_REDIS_URL; with $PARKWAY_SHARDS every "
                  "shard, and this URL, if given, must be one of them)")

MAIN_EPILOG = """\
Every command but `run` and `demo` needs a Redis: set PARKWAY_REDIS_URL (or pass --redis-url).
Workers and clients must share PARKWAY_SECRET (32+ characters): resume tokens are signed with it.
JSON output is camelCase, times in epoch milliseconds. `parkway COMMAND --help` says more.
A Redis that does not answer when a command starts is an error at once (exit 1, naming the URL);
once it answered, a command waits out an outage for up to 15 s. A closed stdout (`parkway runs | head`)
ends a command quietly with exit status 141, as SIGPIPE ends other Unix tools."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, which also suggests the nearest command to a mistyped one."""

    def error(self, message: str) -> NoReturn:
        typo = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if typo:
            choices = re.findall(r"'([^']*)'", typo.group(2))
            near = difflib.get_close_matches(typo.group(1), choices, n=1)
            if near:
                message += f"; did you mean {near[0]!r}?"
        super().error(message)


def _unknown_options(p: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> NoReturn:
    """Refuse what the command did not recognise in that command's own usage, naming the nearest
    option to each mistyped one."""
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    command: argparse.ArgumentParser = action.choices[args.command]
    known = [option for a in command._actions for option in a.option_strings]
    hints = []
    for word in extra:
        near = difflib.get_close_matches(word.split("=")[0], known, n=1) if word.startswith("-") else []
        if near:
            hints.append(f"did you mean {near[0]}?")
    command.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else ""))


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="parkway",
        description="Durable human-in-the-loop workflows on Redis.",
        epilog=MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-v", "--verbose", action="store_true",
                   help="log at INFO (default WARNING); also accepted after the command")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help="what to do (one of these):")
    for add in (_add_worker, _add_run, _add_runs, _add_interrupts, _add_interrupt, _add_resume, _add_show, _add_events,
                _add_cancel, _add_fork, _add_check_deploy, _add_serve, _add_reconcile, _add_status,
                _add_failover, _add_demo):
        add(sub)
    add_session_commands(sub, _command, _client)
    return p


def _command(
    sub: Subcommands,
    name: str,
    help_: str,
    fn: Any,
    epilog: str,
    *,
    redis: str | None = REDIS_REQUIRED,
    imports: bool = False,
    aliases: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
    """A subcommand with the options commands share: -v after the command, --redis-url in the
    command's own words (none for the demo), and where workflows are imported from."""
    c = sub.add_parser(
        name, help=help_, description=help_, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
        aliases=list(aliases),
    )
    c.set_defaults(fn=fn, runs_code=imports)
    # SUPPRESS: given after the command it sets verbose; absent, it leaves the one before the command alone
    c.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="log at INFO (default WARNING); also accepted before the command")
    if redis is not None:
        c.add_argument("--redis-url", metavar="URL", help=redis)
        c.add_argument("--redis-sentinels", metavar="HOST:PORT,...",
                       help="instead of --redis-url: Redis under Sentinel, these sentinels (with --redis-master; "
                            "default $PARKWAY_REDIS_SENTINELS)")
        c.add_argument("--redis-master", metavar="NAME",
                       help="the master's name the sentinels know (default $PARKWAY_REDIS_MASTER)")
    if imports:
        c.add_argument(
            "--path",
            action="append",
            metavar="DIR",
            help="where to import workflow modules from, before the rest of the Python path "
            "(repeatable; default: the working directory)",
        )
        c.add_argument(
            "--workflows",
            metavar="MODULES",
            help="comma-separated modules workflows may be imported from (default $PARKWAY_WORKFLOWS; "
            "unset: the application's own code, never the standard library or installed packages)",
        )
    return c


def _add_worker(sub: Subcommands) -> None:
    w = _command(
        sub,
        "worker",
        "run an RQ worker on parkway's queue: it runs the nodes of every run",
        cmd_worker,
        "Prints one line to stderr when it starts (queue, Redis, workflow modules, pid, workers), then works\n"
        "until stopped (Ctrl-C), or with --burst until the queue is empty. It also reconciles every second.\n"
        "exit status: 0 stopped or queue empty, 1 error (no Redis, Redis unreachable, another PARKWAY_SECRET,\n"
        "or RQ's loop quit on an error: restart it)",
        redis="the Redis to work for (required; default $PARKWAY_REDIS_URL)",
        imports=True,
    )
    w.add_argument("--burst", action="store_true", help="exit once the queue is empty (default: run until stopped)")
    w.add_argument("--workers", type=_integer(1), default=1, metavar="N",
                   help="number of worker processes (default 1; more runs an RQ worker pool)")
    w.add_argument("--shard", type=_integer(0), default=None, metavar="K",
                   help="with PARKWAY_SHARDS: the shard (0-based, in the variable's order) this worker serves")
    w.add_argument("--queue", default=None, metavar="NAME",
                   help="RQ queue name (default $PARKWAY_QUEUE or 'parkway'; clients must use the same)")


def _add_run(sub: Subcommands) -> None:
    r = _command(
        sub,
        "run",
        "start a run and print its events; in a terminal, answer its interrupts",
        cmd_run,
        "Prints one line per event until the run pauses or ends: readable at a terminal, JSON lines (type,\n"
        "eventId, ts and the event's data) with --json or when its output is not a terminal.\n"
        "In a terminal it asks each question and goes on; without one it stops at the first interrupt and\n"
        "says how to answer it. Ctrl-C stops following, not the run (on Redis): it prints how to pick it up.\n"
        "exit status: 0 completed, or waiting for an answer (no terminal), or --detach; 1 the run failed,\n"
        "was cancelled or expired, or an error (--timeout passed, bad input...); 130 Ctrl-C",
        redis="the Redis to start the run on (default $PARKWAY_REDIS_URL; unset: embedded, on an in-process "
        "Redis, and the run ends with this process)",
        imports=True,
    )
    r.add_argument("workflow", help="the workflow to run, as MODULE:ATTRIBUTE (e.g. myapp.flows:approval)")
    r.add_argument("--input", default="{}", metavar="JSON", help="the run's input, a JSON object (default {})")
    r.add_argument("--run-id", default=None, metavar="ID",
                   help="the run's id: 1-64 letters, digits, '_' or '-' (default: run_ and 32 hex digits)")
    r.add_argument("--ttl-ms", type=_integer(1000), default=None, metavar="MS",
                   help="how long the run's records and each of its pauses live, in milliseconds, at least 1000 "
                   f"(default $PARKWAY_TTL_MS or {DEFAULT_TTL_MS}, {DEFAULT_TTL_MS // 60_000} minutes)")
    r.add_argument("--tenant", default=None, metavar="ID",
                   help="the tenant the run belongs to (its interrupts list under it: interrupts --tenant)")
    r.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop following after this many seconds, exit 1 (the run goes on); "
                   "default: follow until it pauses or ends")
    r.add_argument("--detach", action="store_true",
                   help="print the run id and exit 0 at once, without following (needs a Redis)")
    r.add_argument("--json", action="store_true",
                   help="print JSON lines even at a terminal (the default when output is not a terminal)")


def _add_interrupts(sub: Subcommands) -> None:
    i = _command(
        sub,
        "interrupts",
        "list pending interrupts (questions waiting for a person), newest first",
        cmd_interrupts,
        "Each interrupt shows its request id, run, workflow/node, question, options, how long it has been\n"
        "waiting and when it expires (UTC). --json prints {items, nextCursor} instead.\n"
        "exit status: 0 (also when none are pending), 1 error",
    )
    i.add_argument("--workflow", metavar="NAME", help="only this workflow's interrupts (its name, e.g. approval)")
    i.add_argument("--run-id", metavar="ID", help="only this run's interrupts")
    i.add_argument("--order", choices=["newest", "expiring"], default="newest",
                   help="newest first (default), or the soonest to expire first")
    i.add_argument("--limit", type=_integer(1, 1000), default=50, metavar="N",
                   help="at most N per page, 1-1000 (default 50)")
    i.add_argument("--cursor", metavar="CURSOR",
                   help="the next page: the cursor a previous page printed ('more: --cursor ...' or nextCursor)")
    i.add_argument("--tokens", action="store_true",
                   help="include resume tokens (whoever holds one can answer the interrupt)")
    i.add_argument("--audience", metavar="WHO",
                   help="only the interrupts asking this audience now, e.g. team:ops or user:ann "
                   "(escalations move them)")
    i.add_argument("--tenant", metavar="ID", help="only the interrupts of runs started with this tenant")
    i.add_argument("--session", metavar="ID", help="only the interrupts of this session's branch runs")
    i.add_argument("--older-than", type=_age, metavar="AGE",
                   help="only interrupts created at least AGE ago: 90s, 15m, 2h, 7d (newest order)")
    i.add_argument("--newer-than", type=_age, metavar="AGE",
                   help="only interrupts created at most AGE ago (newest order)")
    i.add_argument("--status", choices=["pending", "resolved", "cancelled", "expired"], default="pending",
                   help="pending (default), or those that ended so within the retention, newest end first, each "
                   "with its lifecycle record (then --order newest only, no --tokens)")
    i.add_argument("--json", action="store_true",
                   help="print the page as one JSON object: items (camelCase, times in epoch ms) and nextCursor "
                   "(null on the last page)")


def _add_runs(sub: Subcommands) -> None:
    r = _command(
        sub,
        "runs",
        "list runs, newest first, with filters (status, workflow, tenant, age)",
        cmd_runs,
        "Each run shows its id, workflow, status, creation and last update (UTC); runs are listed while\n"
        "their summary lasts (their TTL, then the retention). --json prints {items, nextCursor} instead.\n"
        "exit status: 0 (also when none match), 1 error",
    )
    # RunStatus's values, spelt out: the parser is built without importing pydantic (a fast --help)
    r.add_argument("--status", choices=("queued", "running", "waiting", "completed", "failed", "cancelled", "expired"),
                   help="only runs in this status")
    r.add_argument("--workflow", metavar="NAME", help="only this workflow's runs (its name)")
    r.add_argument("--workflow-prefix", metavar="TEXT", help="only runs of workflows whose name starts with TEXT")
    r.add_argument("--tenant", metavar="ID", help="only the runs started with this tenant")
    r.add_argument("--older-than", type=_age, metavar="AGE",
                   help="only runs created at least AGE ago: 90s, 15m, 2h, 7d")
    r.add_argument("--newer-than", type=_age, metavar="AGE", help="only runs created at most AGE ago")
    r.add_argument("--limit", type=_integer(1, 1000), default=50, metavar="N",
                   help="at most N per page, 1-1000 (default 50)")
    r.add_argument("--cursor", metavar="CURSOR",
                   help="the next page: the cursor a previous page printed ('more: --cursor ...' or nextCursor)")
    r.add_argument("--json", action="store_true",
                   help="print the page as one JSON object: items (camelCase, times in epoch ms) and nextCursor "
                   "(null on the last page)")


def _add_resume(sub: Subcommands) -> None:
    s = _command(
        sub,
        "resume",
        "answer an interrupt by its resume token",
        cmd_resume,
        "Prints the outcome as JSON: {outcome, runId, requestId}. Give one of --select, --text, --value; at a\n"
        "terminal, without one, it shows the question (a contract's fields too) and asks until the answer fits.\n"
        + RESUME_STATUSES,
        imports=True,
    )
    s.add_argument("token", help="the resume token, RUN.REQUEST.SIGNATURE (see `parkway interrupts --tokens`)")
    group = s.add_mutually_exclusive_group()
    group.add_argument("--select", nargs="+", metavar="ID",
                       help="the option id(s) to pick, for a choice (one) or multi-choice (one or more) request")
    group.add_argument("--text", metavar="TEXT",
                       help="the answer to a text request (at most the request's maxLength characters)")
    group.add_argument("--value", metavar="JSON",
                       help="the answer as a JSON value, for requests that take one (a contract's response object)")
    s.add_argument("--multi", action="store_true", help="send --select as a list even with one id (multi-choice)")
    s.add_argument("--request-id", metavar="ID",
                   help="the request id the person saw: refused (exit 1) if the token is for another request")
    s.add_argument("--responder", metavar="WHO",
                   help="who answers (recorded in the interrupt.resumed event; at most 200 characters)")
    s.add_argument("--or-start", action="store_true",
                   help="if the interrupt expired, start its workflow again as a new run (resume_or_start): prints "
                        "{outcome: resumed | started, runId, restartedFrom}; exit 0 for either")
    s.add_argument("--input", metavar="JSON", help="with --or-start: the new run's input (default: the expired run's)")


def _add_interrupt(sub: Subcommands) -> None:
    i = _command(
        sub,
        "interrupt",
        "print one interrupt, open or ended, with its lifecycle record, as JSON",
        cmd_interrupt,
        "Prints the interrupt: requestId, runId, workflow, node, request (null once ended if its input is\n"
        "not captured) and lifecycle (status, presentation, optionCount, schemaId/Version, outcome, endedAt,\n"
        "waitMs, responder, reason, answer if captured, failures). Read for the retention of run summaries\n"
        "after the run's records are gone. On stderr, one line in words.\n"
        "exit status: 0, 1 error (no such interrupt, a bad id, Redis unreachable)",
    )
    i.add_argument("request_id", metavar="REQUEST", help="the request id (i<n>_<nonce>_<run id> carries its run)")
    i.add_argument("--run-id", metavar="RUN", help="the run, for a request id that does not carry it (a session's)")


def _add_show(sub: Subcommands) -> None:
    sh = _command(
        sub,
        "show",
        "print a run as JSON",
        cmd_show,
        "Prints the run: runId, workflow, status (queued, running, waiting, completed, failed, cancelled,\n"
        "expired), node, data, output, error, its pending interrupt, times in epoch ms; a cancelled run\n"
        "also shows its cancellation (reason, responder) while its events are kept. On stderr, one line in\n"
        "words: its status and node, UTC times, how soon its pending interrupt expires.\n"
        "exit status: 0, 1 error (no such run, Redis unreachable)",
    )
    sh.add_argument("run_id", metavar="RUN", help="the run's id (as `parkway run` printed it)")


def _add_events(sub: Subcommands) -> None:
    e = _command(
        sub,
        "events",
        "print a run's events",
        cmd_events,
        "Prints the events stored so far and exits, or with --follow goes on until the run ends.\n"
        "exit status: 0, 1 error (no such run, Redis unreachable), 130 Ctrl-C",
    )
    e.add_argument("run_id", metavar="RUN", help="the run's id")
    e.add_argument("--follow", action="store_true",
                   help="keep printing new events until the run ends (default: print what is there and exit)")
    e.add_argument("--after", default="0", metavar="EVENT_ID",
                   help="start after this event id (each event prints it; eventId with --json; default: the first)")
    e.add_argument("--json", action="store_true",
                   help="one JSON object per line (type, eventId, ts in epoch ms, the data), as `parkway run` prints")


def _add_cancel(sub: Subcommands) -> None:
    c = _command(
        sub,
        "cancel",
        "cancel a run, or (given a resume token) just that interrupt",
        cmd_cancel,
        "A run ends cancelled at once, waiting or not (a waiting run's interrupt is cancelled with it, and its\n"
        "node does not replay); a token cancels just that interrupt: the node replays and may catch\n"
        "InterruptCancelled. Prints the outcome as JSON: {outcome, runId, status} for a run.\n"
        "exit status for a run: 0 cancelled, 3 already resolved (it had finished), 1 error (no such run)\n"
        "for a token, as resume's: " + RESUME_STATUSES.removeprefix("exit status: ").replace(
            "1 error (an answer that does not fit: the interrupt stays open, the token still works)", "1 error"),
    )
    c.add_argument("target", metavar="RUN_OR_TOKEN",
                   help="a run id, or a resume token (RUN.REQUEST.SIGNATURE, recognised by its shape)")
    c.add_argument("--token", action="store_true",
                   help="RUN_OR_TOKEN is a resume token (not needed: a token is recognised by its shape)")
    c.add_argument("--reason", metavar="TEXT",
                   help="why (recorded in the run's events; `parkway show` prints it; at most 1000 characters)")
    c.add_argument("--responder", metavar="WHO", help="who cancels (recorded with the reason; at most 200 characters)")


def _add_fork(sub: Subcommands) -> None:
    f = _command(
        sub,
        "fork",
        "re-open a run at an earlier step as a new run (the old run is left as it is)",
        cmd_fork,
        "The new run starts at the node step N ran (0 is the first), with the data that step started with,\n"
        "and runs on from there on the workers; its pauses get tokens of their own, while the old run's\n"
        "tokens keep answering the old run. Its run.started event records forkedFrom {runId, step}.\n"
        "Prints {runId, forkedFrom} as JSON. A child run cannot be forked (fork its root), nor a run whose\n"
        "records expired (only its summary is kept), nor a step the run has not reached.\n"
        "exit status: 0 forked, 1 error (no such run, step out of range, expired, bad input)",
    )
    f.add_argument("run_id", metavar="RUN_ID", help="the run to fork")
    f.add_argument("--step", type=_integer(0), required=True, metavar="N",
                   help="the activation to re-open: 0 is the run's first node, each node entered after is one more")
    f.add_argument("--run-id", dest="new_run_id", metavar="ID", help="the new run's id (default: a random one)")
    f.add_argument("--input", metavar="JSON",
                   help="a JSON object laid over the data the step started with (default: that data as it was)")


def _add_check_deploy(sub: Subcommands) -> None:
    r = _command(
        sub,
        "check-deploy",
        "check a parked run against the code you have now, committing nothing",
        cmd_check_deploy,
        "Replays the run's current node against WORKFLOW: every hook must find what it recorded; the check\n"
        "stops at the first hook with nothing recorded (no step function runs, nothing is written). Prints\n"
        "{runId, node, step, outcome, recorded, detail} as JSON.\n"
        "exit status: 0 consistent, 3 nondeterministic (a resume would fail), 1 error (the node raised, or\n"
        "no such run)\n"
        "(parkway replay, its name before, still works: replay is the re-run a resume makes)",
        imports=True,
        aliases=("replay",),
    )
    r.add_argument("run_id", metavar="RUN", help="a waiting or queued run")
    r.add_argument("--against", required=True, metavar="MODULE:ATTRIBUTE",
                   help="the workflow as deployed now (e.g. myapp.flows:approval)")


def _add_serve(sub: Subcommands) -> None:
    s = _command(
        sub,
        "serve",
        "serve the HTTP API, the live page and answer links (needs the http extra)",
        cmd_serve,
        "API keys come hashed from PARKWAY_API_KEYS (<sha256 of the key>=<system|machine|user>[:owner[:tenant]],\n"
        "comma-separated); `parkway serve --hash-key KEY` prints a key's hash. Without keys it refuses to\n"
        "start unless --no-auth. It needs --workflows (or PARKWAY_WORKFLOWS): callers start workflows of\n"
        "those modules only, and it imports no other module on a caller's request.\n"
        "Routes: /v1/runs, /v1/interrupts, /v1/resume, /ui, /a/<link>, /healthz, /metrics, /openapi.json.\n"
        "exit status: 0 stopped, 1 error (no Redis, no keys, no --workflows)",
        imports=True,
    )
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=_integer(1, 65535), default=8080, help="port to listen on (default 8080)")
    s.add_argument("--no-auth", action="store_true",
                   help="serve without API keys (only for a server that only this machine can reach)")
    s.add_argument("--hash-key", metavar="KEY", default=None,
                   help="print the hash of KEY for PARKWAY_API_KEYS, and exit")


def _add_reconcile(sub: Subcommands) -> None:
    _command(
        sub,
        "reconcile",
        "run one reconciler pass (workers run it every second by themselves)",
        cmd_reconcile,
        "Re-enqueues runs whose job was lost, recovers attempts of dead workers, expires every interrupt past\n"
        "its TTL (batch after batch, beside the workers' reconcilers), keeps the records of the runs of an\n"
        "expiry backlog alive, drops what no run holds any more;\n"
        "prints the run ids it touched as JSON {recovered, failed, redispatched, expired, escalated}.\n"
        "With PARKWAY_SHARDS: one pass on every shard, in turn (the ids of all of them).\n"
        "exit status: 0, 1 error",
    )


def _add_status(sub: Subcommands) -> None:
    c = _command(
        sub,
        "status",
        "show the deployment now: workers, what runs and waits to run, runs ended, pending interrupts",
        cmd_status,
        "Workers are those RQ has registered on parkway's queue. `rq info` shows them too, but not what they\n"
        "run: parkway's worker begins a job with one round trip and keeps none of RQ's per-job records\n"
        "(started, finished and failed registries, busy state), so `rq info` shows them idle with no jobs.\n"
        "Here, 'running now' counts the runs holding a lease (an activation executing), and a failed run is\n"
        "a run with status failed (`parkway show RUN`), not a job in RQ's failed registry.\n"
        "exit status: 0, 1 error",
    )
    c.add_argument("--json", action="store_true", help="print one JSON object (camelCase)")


def _add_failover(sub: Subcommands) -> None:
    c = _command(
        sub,
        "failover",
        "switch the Sentinel master to a replica, losing no acknowledged write (a fenced switchover)",
        cmd_failover,
        "Pauses writes on the primary, waits until its online replicas have its replication offset, sends\n"
        "SENTINEL FAILOVER, waits until the sentinels name the new master, then on the old primary: REPLICAOF\n"
        "the new one, closes its clients' connections (they reconnect to the new master) and unpauses.\n"
        "Prints one line per step. Writes wait for the switch (1-3 s on loopback); reads go on. A bare\n"
        "SENTINEL FAILOVER instead leaves the old primary writable for seconds, and what is written there is lost.\n"
        "exit status: 0 switched, 1 stopped (writes unpaused, the master unchanged) or an error",
        redis="a redis+sentinel:// URL (default: $PARKWAY_REDIS_URL, or the sentinels' flags and variables)",
    )
    c.add_argument("--pause-ms", type=_integer(1000), default=15_000, metavar="MS",
                   help="the longest writes stay paused on the old primary if this command dies (default 15000)")
    c.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for the replicas' offset, and again for the new master (default 10)")


def _add_demo(sub: Subcommands) -> None:
    _command(
        sub,
        "demo",
        "run the approval demo embedded, on an in-process Redis (no server needed)",
        cmd_demo,
        "Starts an approval run, lists its interrupt, asks you (without a terminal: answers with the first\n"
        "option), resumes it, shows the same token is then already_resolved, and prints the run.\n"
        "Always embedded: it ignores PARKWAY_REDIS_URL, and nothing is kept after it.\n"
        "exit status: 0 the run completed, 1 otherwise",
        redis=None,
    )


def _extend_path(dirs: Sequence[str] | None) -> None:
    """Put the workflow directories first on the import path, as ``rq worker --path`` does
    (the ``parkway`` script, unlike ``python -m``, does not have the working directory there)."""
    for directory in reversed([os.path.abspath(d) for d in (dirs or ["."])]):
        if directory in sys.path:
            sys.path.remove(directory)
        sys.path.insert(0, directory)


FIRST_ANSWER_S = 1.0
"""how long a command waits for a Redis that has not answered it yet: one that is down when the
command starts is reported at once, not retried (``until_first_answer``); once Redis answered, a
command rides out an outage like any client (up to ``GIVE_UP_S``)"""

PIPE_CLOSED = 141
"""the exit status when stdout's reader went away (``parkway runs | head``): 128 + SIGPIPE, what
other Unix tools, ended by that signal, exit with"""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _stdout_closed()


def _stdout_closed() -> int:
    """End quietly: stdout goes to /dev/null from here on, so the interpreter's last flush of what is
    still buffered fails no more than the write that found the pipe closed."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is no file (called in-process): nothing to flush at exit
        pass
    return PIPE_CLOSED


def _impatient(args: argparse.Namespace) -> AbstractContextManager[None]:
    """For a command that talks to Redis: ``until_first_answer(FIRST_ANSWER_S)``."""
    if not hasattr(args, "redis_url"):  # the demo: its Redis is in-process
        return nullcontext()
    from ..adapters.redis.connection import until_first_answer

    return until_first_answer(FIRST_ANSWER_S)


def _tried(args: argparse.Namespace) -> str:
    """The Redis a command was pointed at, without passwords, for its error when Redis does not answer."""
    try:
        settings = _settings(args)
    except ParkwayError:
        return "Redis"
    urls = settings.shards or ((settings.redis_url,) if settings.redis_url else ())
    return ", ".join(_without_password(url) for url in urls) or "Redis"


def _main(argv: Sequence[str] | None) -> int:
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra:
        _unknown_options(p, args, extra)
    from ..logs import configure as configure_logs

    # a command that runs none of the application's code configures structlog at its first line:
    # one that logs none (a listing) never imports structlog, nor rich through it (issue 23)
    configure_logs("INFO" if args.verbose else "WARNING", at_first_line=not getattr(args, "runs_code", True))
    _extend_path(getattr(args, "path", None))
    try:
        with _impatient(args):
            status = int(args.fn(args))
        sys.stdout.flush()  # here, not at exit: a reader gone away is then seen by main
        return status
    except StoreUnavailable as exc:
        print(f"parkway: error: {exc} (tried {_tried(args)})", file=sys.stderr)
        return 1
    except ParkwayError as exc:
        print(f"parkway: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:  # called in-process, the command's configuration does not outlive it unused
        configure_at_first_line(None)
