"""``gpuq``: submit and follow gang jobs, request quota and read usage from a terminal.

Commands (``gpuq <command> --help`` for each)::

    gpuq submit -f job.yaml [--name ...]      submit a job (a YAML file, flags, or both)
    gpuq submit --team T --flavor h100 --image I --gpus 4 --workers 2 -- python train.py
    gpuq list [--team T] [--phase Queued]     jobs of your teams (every page; --limit N)
    gpuq status JOB                           one job
    gpuq why JOB                              why it waits (reason, message, queue position)
    gpuq wait JOB [--timeout 3600]            until it finishes (exit code = its outcome)
    gpuq cancel JOB
    gpuq quota request --team T --flavor F --gpus N --justification "..."
    gpuq quota list [--team T] [--state pending]
    gpuq usage [--team T] [--since ISO] [--until ISO]

``--output json`` (before or after the command) prints the API's JSON instead of text.

Exit codes, for scripts:

== =====================================================================
0  done (``wait``: the job Succeeded)
1  ``wait``: the job Failed
2  usage error (bad flags, unreadable job file)
3  the portal refused the request (400 invalid, 403 not allowed, 404 not found)
4  not authenticated: no token, or the token was refused (401)
5  the portal is unreachable or failed (connection error, 5xx)
6  ``wait`` / ``why --refresh`` timed out
7  ``wait``: the job was Cancelled
== =====================================================================
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from portal_cli import __version__
from portal_cli.client import ApiError, Client, Unreachable, describe
from portal_cli.config import ConfigError, NoToken, load

OK, JOB_FAILED, USAGE, REFUSED, UNAUTHENTICATED, UNAVAILABLE, TIMEOUT, JOB_CANCELLED = range(8)
FINAL = {"Succeeded": OK, "Failed": JOB_FAILED, "Cancelled": JOB_CANCELLED}
#: Job file keys: the API's (``POST /api/v1/jobs/``), plus ``gpus`` for gpus_per_worker.
JOB_KEYS = ("team", "name", "image", "command", "args", "env", "workers", "gpus_per_worker",
            "flavor", "cpu_per_worker", "memory_per_worker", "priority", "kind",
            "max_runtime_seconds", "sim_duration_seconds", "sim_outcome", "sim_profile")


class UsageError(Exception):
    """Bad input of the user's (exit 2)."""


# ---- output -----------------------------------------------------------------------------


def emit(args, data: Any, text: str) -> None:
    """Print ``data`` as JSON (``--output json``) or ``text``."""
    if args.output == "json":
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    elif text:
        print(text)


def table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """A plain text table of ``rows`` with ``(key, heading)`` columns."""
    cells = [[heading for _, heading in columns]] + [
        ["" if row.get(key) is None else str(row.get(key)) for key, _ in columns]
        for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths,
                                                                        strict=True)).rstrip()
                     for line in cells)


def job_text(job: dict) -> str:
    lines = [f"job {job['id']} {job['team']}/{job['name']}: {job['phase']}"
             + (f" ({job['reason']})" if job.get("reason") else "")]
    if job.get("message"):
        lines.append(f"  {job['message']}")
    lines.append(f"  {job['workers']} x {job['gpus_per_worker']} {job['flavor']} GPU(s)"
                 f" = {job['total_gpus']}, kind {job['kind']}, image {job['image']}")
    if job.get("queue_position") is not None:
        lines.append(f"  queue position: {job['queue_position']} (0 = next)")
    for key, label in (("submitted_at", "submitted"), ("admitted_at", "admitted"),
                       ("started_at", "started"), ("finished_at", "finished")):
        if job.get(key):
            lines.append(f"  {label}: {job[key]}")
    if job.get("preemptions"):
        lines.append(f"  preempted {job['preemptions']} time(s)"
                     + (", in a preemption loop" if job.get("preemption_loop") else ""))
    if job.get("last_error"):
        lines.append(f"  last error: {job['last_error']}")
    return "\n".join(lines)


def why_of(job: dict) -> dict:
    """The waiting explanation of ``job`` (what ``gpuq why`` prints)."""
    recent = sorted(job.get("timeline") or [], key=lambda e: str(e.get("at") or ""))[-5:]
    waiting = job["phase"] in ("Submitted", "Queued")
    return {
        "id": job["id"], "phase": job["phase"], "reason": job.get("reason") or "",
        "message": job.get("message") or "", "waiting": waiting,
        "queue_position": job.get("queue_position"),
        "preemptions": job.get("preemptions", 0),
        "preemption_loop": job.get("preemption_loop", False),
        "last_preemptor": job.get("last_preemptor") or "",
        # The portal does not predict start times yet: said, not guessed.
        "estimated_start": None,
        "status_synced_at": job.get("status_synced_at"),
        "recent_events": recent,
    }


def why_text(why: dict) -> str:
    if not why["waiting"]:
        head = f"job {why['id']} is {why['phase']}, not waiting"
    else:
        head = f"job {why['id']} is {why['phase']}"
    lines = [head + (f": {why['reason']}" if why["reason"] else "")]
    if why["message"]:
        lines.append(f"  {why['message']}")
    if why["queue_position"] is not None:
        ahead = why["queue_position"]
        lines.append(f"  {ahead} workload(s) ahead of it in the team's queue")
    if why["preemptions"]:
        lines.append(f"  preempted {why['preemptions']} time(s)"
                     + (f", last by {why['last_preemptor']}" if why["last_preemptor"] else "")
                     + (" (preemption loop)" if why["preemption_loop"] else ""))
    if why["waiting"]:
        lines.append("  estimated start: not available (the portal does not predict it yet)")
    if why["status_synced_at"]:
        lines.append(f"  as of {why['status_synced_at']}")
    for event in why["recent_events"]:
        lines.append(f"  {event.get('at', '')}  {event.get('source', '')} "
                     f"{event.get('type', '')} {event.get('reason', '')}: "
                     f"{event.get('message', '')}".rstrip(": "))
    return "\n".join(lines)


# ---- commands ---------------------------------------------------------------------------


def _env_list(value) -> list[dict]:
    if value is None:
        return []
    if isinstance(value, dict):
        return [{"name": str(k), "value": str(v)} for k, v in value.items()]
    if isinstance(value, list):
        return value
    raise UsageError("env must be a mapping NAME: value or a list of {name, value}")


def job_body(args) -> dict:
    """The ``POST /api/v1/jobs/`` body from ``--file`` and the flags (flags win)."""
    body: dict = {}
    if args.file:
        try:
            text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
            loaded = yaml.safe_load(text) or {}
        except (OSError, yaml.YAMLError) as error:
            raise UsageError(f"cannot read job file {args.file}: {error}") from None
        if not isinstance(loaded, dict):
            raise UsageError(f"job file {args.file} must be a mapping of job fields")
        if "gpus" in loaded:
            loaded["gpus_per_worker"] = loaded.pop("gpus")
        unknown = sorted(set(loaded) - set(JOB_KEYS))
        if unknown:
            raise UsageError(f"job file {args.file}: unknown key(s) {', '.join(unknown)}; "
                             f"known: {', '.join(JOB_KEYS)}")
        body.update(loaded)
        if isinstance(body.get("command"), str):
            body["command"] = [body["command"]]
    flags = {"team": args.team, "name": args.name, "image": args.image, "flavor": args.flavor,
             "workers": args.workers, "gpus_per_worker": args.gpus, "cpu_per_worker": args.cpu,
             "memory_per_worker": args.memory, "priority": args.priority, "kind": args.kind,
             "max_runtime_seconds": args.max_runtime}
    body.update({k: v for k, v in flags.items() if v is not None})
    body["env"] = _env_list(body.get("env"))
    for item in args.env or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--env {item!r}: expected NAME=value")
        body["env"] = [e for e in body["env"] if e.get("name") != name]
        body["env"].append({"name": name, "value": value})
    if args.command:
        command = args.command[1:] if args.command[0] == "--" else args.command
        if command:
            body["command"] = command
    body.setdefault("workers", 1)
    body.setdefault("gpus_per_worker", 1)
    missing = [k for k in ("team", "name", "image", "flavor", "command") if not body.get(k)]
    if missing:
        raise UsageError(f"missing {', '.join(missing)} (from --file or flags; the command "
                         "goes after --)")
    return body


def cmd_submit(client: Client, args) -> int:
    job = client.post("jobs/", job_body(args))
    emit(args, job, f"submitted job {job['id']} {job['team']}/{job['name']}: {job['phase']}")
    if args.wait:
        return wait_for(client, args, job["id"])
    return OK


def cmd_list(client: Client, args) -> int:
    jobs = client.list("jobs/", limit=args.limit, team=args.team, phase=args.phase)
    emit(args, jobs, table(jobs, [("id", "ID"), ("team", "TEAM"), ("name", "NAME"),
                                  ("phase", "PHASE"), ("reason", "REASON"),
                                  ("flavor", "FLAVOR"), ("total_gpus", "GPUS"),
                                  ("queue_position", "POS"), ("submitted_at", "SUBMITTED")]))
    return OK


def refreshed(client: Client, job_id: int, timeout: float) -> dict:
    """Ask a worker to read the job from the cluster now; the job once it has (or raise
    TimeoutError)."""
    before = client.get(f"jobs/{job_id}/").get("status_synced_at")
    client.post(f"jobs/{job_id}/refresh/")
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"jobs/{job_id}/")
        if job.get("status_synced_at") != before:
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} was not read from the cluster within {timeout:g} s")
        time.sleep(0.5)


def cmd_status(client: Client, args) -> int:
    job = (refreshed(client, args.job, args.timeout) if args.refresh
           else client.get(f"jobs/{args.job}/"))
    emit(args, job, job_text(job))
    return OK


def cmd_why(client: Client, args) -> int:
    job = (refreshed(client, args.job, args.timeout) if args.refresh
           else client.get(f"jobs/{args.job}/"))
    why = why_of(job)
    emit(args, why, why_text(why))
    return OK


def wait_for(client: Client, args, job_id: int) -> int:
    deadline = time.monotonic() + args.timeout
    last = None
    while True:
        if getattr(args, "refresh", False):
            try:
                job = refreshed(client, job_id, max(1.0, deadline - time.monotonic()))
            except TimeoutError:
                job = client.get(f"jobs/{job_id}/")
        else:
            job = client.get(f"jobs/{job_id}/")
        state = (job["phase"], job.get("reason"))
        if state != last and args.output != "json":
            print(f"job {job_id}: {job['phase']}"
                  + (f" ({job['reason']})" if job.get("reason") else ""), file=sys.stderr)
            last = state
        if job["phase"] in FINAL:
            emit(args, job, job_text(job))
            return FINAL[job["phase"]]
        if time.monotonic() > deadline:
            emit(args, job, f"timed out after {args.timeout:g} s; job {job_id} is {job['phase']}")
            return TIMEOUT
        time.sleep(args.interval)


def cmd_wait(client: Client, args) -> int:
    return wait_for(client, args, args.job)


def cmd_cancel(client: Client, args) -> int:
    job = client.post(f"jobs/{args.job}/cancel/")
    emit(args, job, f"cancelling job {job['id']} {job['team']}/{job['name']} "
                    f"(now {job['phase']}): its Workload is deactivated, then the job deleted")
    return OK


def cmd_quota_request(client: Client, args) -> int:
    body = {"team": args.team, "flavor": args.flavor, "nominal_gpus": args.gpus,
            "justification": args.justification}
    for key, value in (("borrowing_limit_gpus", args.borrowing_limit),
                       ("lending_limit_gpus", args.lending_limit), ("ends_at", args.ends_at)):
        if value is not None:
            body[key] = value
    request = client.post("quota-requests/", body)
    emit(args, request, f"quota request {request['id']}: {request['team']} asks "
                        f"{request['nominal_gpus']} {request['flavor']} GPU(s), "
                        f"{request['state']}")
    return OK


def cmd_quota_list(client: Client, args) -> int:
    items = client.list("quota-requests/", team=args.team, state=args.state)
    emit(args, items, table(items, [("id", "ID"), ("team", "TEAM"), ("flavor", "FLAVOR"),
                                    ("nominal_gpus", "GPUS"), ("state", "STATE"),
                                    ("requested_by", "BY"), ("created_at", "CREATED")]))
    return OK


def cmd_usage(client: Client, args) -> int:
    report = client.get("utilization/", team=args.team, since=args.since, until=args.until)
    columns = [("slug", "TEAM"), ("allocated_gpu_hours", "GPU-H"), ("busy_gpu_hours", "BUSY-H"),
               ("idle_gpu_hours", "IDLE-H"), ("efficiency", "EFFICIENCY"),
               ("coverage", "COVERAGE")]
    rows = [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}
            for row in report.get("teams", [])]
    text = [f"{report.get('since')} .. {report.get('until')}", table(rows, columns)]
    if report.get("idle_jobs"):
        text += ["", "idle jobs:", table(report["idle_jobs"], [
            ("team", "TEAM"), ("job", "JOB"), ("gpus", "GPUS"), ("state", "STATE"),
            ("idle_since", "IDLE SINCE"), ("reclaimable_at", "RECLAIMABLE AT")])]
    emit(args, report, "\n".join(text))
    return OK


# ---- parser -----------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--output", "-o", choices=["text", "json"], default=argparse.SUPPRESS,
                        help="text (default) or json")
    top = argparse.ArgumentParser(
        prog="gpuq", description="The GPU quota portal from a terminal.",
        epilog="Exit codes: 0 ok/Succeeded, 1 Failed, 2 usage, 3 refused, "
               "4 not authenticated, 5 unreachable, 6 timeout, 7 Cancelled.",
        parents=[common])
    top.add_argument("--version", action="version", version=f"gpuq {__version__}")
    top.add_argument("--url", help="portal URL (else GPUQ_URL or the config file)")
    top.add_argument("--token", help="API token (else GPUQ_TOKEN or the config file)")
    top.add_argument("--config", help="config file (else GPUQ_CONFIG or "
                                      "~/.config/gpuq/config.yaml)")
    sub = top.add_subparsers(dest="command_name", required=True, metavar="COMMAND")

    submit = sub.add_parser("submit", parents=[common], help="submit a gang job")
    submit.add_argument("-f", "--file", help="job YAML (the API's fields; - for stdin)")
    submit.add_argument("--team")
    submit.add_argument("--name")
    submit.add_argument("--image")
    submit.add_argument("--flavor")
    submit.add_argument("--workers", type=int)
    submit.add_argument("--gpus", type=int, help="GPUs per worker")
    submit.add_argument("--cpu", help="CPU per worker (quantity)")
    submit.add_argument("--memory", help="memory per worker (quantity)")
    submit.add_argument("--priority")
    submit.add_argument("--kind", choices=["job", "jobset"])
    submit.add_argument("--max-runtime", type=int, help="seconds")
    submit.add_argument("--env", action="append", metavar="NAME=VALUE")
    submit.add_argument("--wait", action="store_true", help="then wait until it finishes")
    submit.add_argument("--timeout", type=float, default=24 * 3600.0)
    submit.add_argument("--interval", type=float, default=5.0)
    submit.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- then the container's command and arguments")
    submit.set_defaults(func=cmd_submit, refresh=False)

    lst = sub.add_parser("list", parents=[common], help="jobs of your teams")
    lst.add_argument("--team")
    lst.add_argument("--phase", choices=["Submitted", "Queued", "Admitted", "Running",
                                         "Succeeded", "Failed", "Cancelled"])
    lst.add_argument("--limit", type=int, help="at most this many (default: every page)")
    lst.set_defaults(func=cmd_list)

    for name, func, helptext in (("status", cmd_status, "one job"),
                                 ("why", cmd_why, "why a job waits")):
        cmd = sub.add_parser(name, parents=[common], help=helptext)
        cmd.add_argument("job", type=int)
        cmd.add_argument("--refresh", action="store_true",
                         help="have a worker read the job from the cluster first")
        cmd.add_argument("--timeout", type=float, default=60.0,
                         help="seconds to wait for --refresh")
        cmd.set_defaults(func=func)

    wait = sub.add_parser("wait", parents=[common], help="wait until a job finishes")
    wait.add_argument("job", type=int)
    wait.add_argument("--timeout", type=float, default=24 * 3600.0, help="seconds")
    wait.add_argument("--interval", type=float, default=5.0, help="seconds between reads")
    wait.add_argument("--refresh", action="store_true",
                      help="have a worker read the cluster at each poll instead of "
                           "waiting for the periodic sync")
    wait.set_defaults(func=cmd_wait)

    cancel = sub.add_parser("cancel", parents=[common], help="cancel a job")
    cancel.add_argument("job", type=int)
    cancel.set_defaults(func=cmd_cancel)

    quota = sub.add_parser("quota", parents=[common], help="quota requests")
    qsub = quota.add_subparsers(dest="quota_command", required=True, metavar="SUBCOMMAND")
    qreq = qsub.add_parser("request", parents=[common], help="ask staff for quota (team lead)")
    qreq.add_argument("--team", required=True)
    qreq.add_argument("--flavor", required=True)
    qreq.add_argument("--gpus", type=int, required=True, help="nominal GPUs asked for")
    qreq.add_argument("--borrowing-limit", type=int)
    qreq.add_argument("--lending-limit", type=int)
    qreq.add_argument("--ends-at", help="ISO 8601: a temporary grant until then")
    qreq.add_argument("--justification", "-j", required=True)
    qreq.set_defaults(func=cmd_quota_request)
    qlist = qsub.add_parser("list", parents=[common], help="quota requests of your teams")
    qlist.add_argument("--team")
    qlist.add_argument("--state", choices=["pending", "approved", "rejected", "withdrawn"])
    qlist.set_defaults(func=cmd_quota_list)

    usage = sub.add_parser("usage", parents=[common], help="GPU utilization of your teams")
    usage.add_argument("--team")
    usage.add_argument("--since", help="ISO 8601 (default: 7 days ago)")
    usage.add_argument("--until", help="ISO 8601 (default: now)")
    usage.set_defaults(func=cmd_usage)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not hasattr(args, "output"):
        args.output = "text"
    try:
        config = load(url=args.url, token=args.token, config_path=args.config)
    except ConfigError as error:
        print(f"gpuq: {error}", file=sys.stderr)
        return UNAUTHENTICATED if isinstance(error, NoToken) else USAGE
    client = Client(config)
    try:
        return args.func(client, args)
    except UsageError as error:
        print(f"gpuq: {error}", file=sys.stderr)
        return USAGE
    except ApiError as error:
        if args.output == "json":
            print(json.dumps({"status": error.status, "error": error.body}, indent=2,
                             default=str))
        print(f"gpuq: {error.status}: {describe(error.body)}", file=sys.stderr)
        if error.status == 401:
            return UNAUTHENTICATED
        return UNAVAILABLE if error.status >= 500 else REFUSED
    except Unreachable as error:
        print(f"gpuq: {error}", file=sys.stderr)
        return UNAVAILABLE
    except TimeoutError as error:
        print(f"gpuq: {error}", file=sys.stderr)
        return TIMEOUT


if __name__ == "__main__":
    sys.exit(main())
