"""``deepgym serve``: the command's options and its start-up checks (FastAPI is imported only when
the command runs, so the rest of the CLI works without the ``serve`` extra)."""

from __future__ import annotations

import argparse
import os

from deepgym_envs.errors import DeepgymError
from deepgym_envs.serve.gate import is_loopback
from deepgym_envs.serve.limits import (DEFAULT_BODY_TIMEOUT, DEFAULT_HEAD_TIMEOUT, DEFAULT_MAX_BODY_BYTES,
                                       DEFAULT_MAX_PENDING_CONNECTIONS)

TOKEN_ENV = "DEEPGYM_SERVE_TOKEN"


def add_serve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve environments over HTTP (one session per client; OpenEnv-style)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--token", default=None,
                   help=f"bearer token clients must send (default: ${TOKEN_ENV}; prefer it: arguments show in ps)")
    p.add_argument("--no-auth", action="store_true", help="accept requests without a token (loopback addresses only)")
    p.add_argument("--max-sessions", type=int, default=32, help="sessions open at once; one more gets 503")
    p.add_argument("--idle-timeout", type=float, default=600.0,
                   help="close a session (and its sandbox) unused for this many seconds (0 = never)")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                   help="largest request body or WebSocket message; more gets 413 / close 1009 (default: 8 MiB)")
    p.add_argument("--body-timeout", type=float, default=DEFAULT_BODY_TIMEOUT,
                   help="seconds a request body may take to arrive; then 408 (0 = no deadline; default: %(default)g)")
    p.add_argument("--head-timeout", type=float, default=DEFAULT_HEAD_TIMEOUT,
                   help="seconds a connection may take to send a request's headers; then it is closed "
                        "(0 = no deadline; default: %(default)g)")
    p.add_argument("--max-pending-connections", type=int, default=DEFAULT_MAX_PENDING_CONNECTIONS,
                   help="connections still sending a request's headers (not yet authenticated) at once; "
                        "one more gets 503 (default: %(default)d)")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a web page (scheme://host:port) whose requests are served; any other Origin gets 403 "
                        "(repeatable; default: none)")
    p.add_argument("--tasks", default="builtin", help="'builtin', a .jsonl file or a directory")
    p.add_argument("--sandbox", default=None, help="sandbox backend of every session (default: namespace)")
    p.add_argument("--allow-host-shell", action="store_true",
                   help="let --sandbox local serve: its sessions run clients' commands on this host, unsandboxed")
    p.set_defaults(func=run_serve)


def serve_token(token: str | None, no_auth: bool, host: str) -> str | None:
    """The token the server requires, or None when ``--no-auth`` is allowed (a loopback host)."""
    token = token or os.environ.get(TOKEN_ENV) or None
    if no_auth:
        if not is_loopback(host):
            raise DeepgymError(f"--no-auth only on a loopback address (127.0.0.1, ::1, localhost), not {host!r}: "
                               f"anyone who reaches {host} could run code in your sandboxes")
        return None
    if not token:
        raise DeepgymError(f"give a token: set {TOKEN_ENV} (or --token), or --no-auth on 127.0.0.1")
    return token


def run_serve(args: argparse.Namespace) -> int:
    token = serve_token(args.token, args.no_auth, args.host)
    if args.max_sessions < 1:
        raise DeepgymError(f"--max-sessions={args.max_sessions}: at least 1")
    if args.idle_timeout < 0:
        raise DeepgymError(f"--idle-timeout={args.idle_timeout}: seconds, 0 for never")
    if args.max_body_bytes < 1:
        raise DeepgymError(f"--max-body-bytes={args.max_body_bytes}: at least 1")
    for flag in ("body_timeout", "head_timeout"):
        if getattr(args, flag) < 0:
            raise DeepgymError(f"--{flag.replace('_', '-')}={getattr(args, flag)}: seconds, 0 for no deadline")
    if args.max_pending_connections < 1:
        raise DeepgymError(f"--max-pending-connections={args.max_pending_connections}: at least 1")
    try:
        import uvicorn

        from deepgym_envs.serve.app import ServeConfig, create_app
        from deepgym_envs.serve.server import uvicorn_config
    except ImportError as exc:
        raise DeepgymError(f"deepgym serve needs the serve extra: pip install 'deepgym-envs[serve]' ({exc})") from None
    config = ServeConfig(token=token, tasks=args.tasks, sandbox=args.sandbox, max_sessions=args.max_sessions,
                         idle_timeout=args.idle_timeout, max_body_bytes=args.max_body_bytes,
                         body_timeout=args.body_timeout, head_timeout=args.head_timeout,
                         max_pending_connections=args.max_pending_connections,
                         allowed_origins=tuple(args.allow_origin), allow_host_shell=args.allow_host_shell)
    server = uvicorn.Server(uvicorn_config(create_app(config), config, host=args.host, port=args.port,
                                           log_level="info"))
    server.run()
    return 0 if server.started else 3  # as uvicorn.run exits when it cannot start (the port is taken, ...)
