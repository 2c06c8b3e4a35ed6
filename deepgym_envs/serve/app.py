"""The FastAPI application behind ``deepgym serve``.

Routes (every one but ``/health`` needs ``Authorization: Bearer <token>`` unless the server runs
with ``--no-auth``; :mod:`.gate` checks it, and the request's ``Origin`` and ``Host``, before a
body is read or a WebSocket accepted):

* ``POST /sessions`` (a :class:`SessionConfig`) → 201 ``{"session_id", "tools", ...}``; 503 when
  ``max_sessions`` are open.
* ``POST /sessions/{id}/reset`` · ``POST /sessions/{id}/step`` → OpenEnv's observation payload
  plus ``terminated`` / ``truncated``; ``GET /sessions/{id}/state``; ``DELETE /sessions/{id}``.
* ``WS /ws``: OpenEnv's WebSocket protocol; the session lives as long as the connection, and its
  configuration comes from the query string (``/ws?task_id=...&max_steps=10``).
* ``GET /health``, ``GET /schema`` as in OpenEnv.

A body (or WebSocket message) over ``max_body_bytes`` is a 413 (WebSocket: closed with 1009) with
the reason, one not all sent within ``body_timeout`` a 408. A malformed body is a 422 naming the
field; a step before reset a 409; an unknown task a 404; an exception inside the env a 500 with its
message; none of them stops the server.
"""

from __future__ import annotations

import json
import logging
import secrets
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator

import gymnasium as gym
from fastapi import FastAPI, HTTPException, Request, WebSocket, WebSocketDisconnect, status
from fastapi.responses import JSONResponse
from pydantic import ValidationError

import deepgym_envs
from deepgym_envs.env import ResetNeeded
from deepgym_envs.errors import DeepgymError, InfrastructureError, UnknownTaskError
from deepgym_envs.serve.gate import Gate
from deepgym_envs.serve.limits import (DEFAULT_BODY_TIMEOUT, DEFAULT_HEAD_TIMEOUT, DEFAULT_MAX_BODY_BYTES,
                                       DEFAULT_MAX_PENDING_CONNECTIONS, BodyLimit, too_large)
from deepgym_envs.serve.protocol import (ErrorBody, ResetRequest, SessionConfig, SessionCreated, SessionState,
                                         StepRequest, StepResponse, jsonable, public_info)
from deepgym_envs.serve.sessions import AtCapacity, Session, SessionTable, UnknownSession
from deepgym_envs.tasks import Task, load_tasks

log = logging.getLogger("deepgym_envs.serve")


@dataclass
class ServeConfig:
    """How ``deepgym serve`` runs."""

    token: str | None
    """The bearer token every request must carry; None only for ``--no-auth`` on a loopback address."""
    tasks: str = "builtin"
    """The task set sessions draw from (the server's choice, never a client's)."""
    sandbox: str | None = None
    """Sandbox backend of every session (None: the default, ``namespace``)."""
    max_sessions: int = 32
    """Sessions open at once; one more gets 503."""
    idle_timeout: float = 600.0
    """Seconds a session may sit unused before it is closed with its sandbox (0: never)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """The largest HTTP request body, and WebSocket message, the server reads; more is refused (413 / 1009)."""
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    """Seconds a request body may take to arrive once its headers have; then 408 (0: no deadline)."""
    head_timeout: float = DEFAULT_HEAD_TIMEOUT
    """Seconds a connection may take to send a request's headers; then it is closed (0: no deadline)."""
    max_pending_connections: int = DEFAULT_MAX_PENDING_CONNECTIONS
    """Connections still sending a request's headers at once; one more is answered 503 and closed."""
    allowed_origins: tuple[str, ...] = ()
    """Web pages (``scheme://host:port``) whose requests are served; a request from any other is 403."""
    allow_host_shell: bool = False
    """Whether the ``local`` backend may serve: its sessions run clients' commands on this host, unsandboxed."""


def create_app(config: ServeConfig, tasks: list[Task] | None = None) -> FastAPI:
    """The application; ``tasks`` (default: loaded from ``config.tasks`` once) back every session."""
    if config.sandbox == "local" and not config.allow_host_shell:
        raise DeepgymError("the local sandbox runs every client's commands on this host, unsandboxed: a shell on "
                           "this machine for whoever reaches the server (with --no-auth, any web page too). "
                           "Use namespace or docker, or say so with --allow-host-shell")
    task_list = tasks if tasks is not None else load_tasks(config.tasks)

    def make_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
        return gym.make(env_id, tasks=task_list, sandbox=config.sandbox, **kwargs)

    table = SessionTable(make_env, max_sessions=config.max_sessions, idle_timeout=config.idle_timeout)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        table.start_reaper()
        try:
            yield
        finally:
            await table.stop_reaper()
            await table.close_all()

    app = FastAPI(title="deepgym serve", version=deepgym_envs.__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    app.state.sessions = table
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes, timeout=config.body_timeout)
    app.add_middleware(Gate, token=config.token, allowed_origins=config.allowed_origins)  # the outermost: first

    @app.exception_handler(AtCapacity)
    async def _capacity(request: Request, exc: AtCapacity) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(UnknownSession)
    async def _unknown(request: Request, exc: UnknownSession) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "healthy", "sessions": len(table), "max_sessions": table.max_sessions}

    @app.get("/schema")
    async def schema() -> dict[str, Any]:
        return {"action": StepRequest.model_json_schema(), "observation": StepResponse.model_json_schema(),
                "state": SessionState.model_json_schema(), "session": SessionConfig.model_json_schema()}

    errors: dict[int | str, dict[str, Any]] = {status.HTTP_401_UNAUTHORIZED: {"model": ErrorBody}, status.HTTP_404_NOT_FOUND: {"model": ErrorBody},
              status.HTTP_409_CONFLICT: {"model": ErrorBody}, 500: {"model": ErrorBody}, 503: {"model": ErrorBody}}

    @app.post("/sessions", status_code=201, response_model=SessionCreated, responses=errors)
    async def open_session(body: SessionConfig | None = None) -> SessionCreated:
        body = body or SessionConfig()
        session = await _guard(table.create(body.env_id, body.make_kwargs()))
        unwrapped = session.env.unwrapped
        return SessionCreated(session_id=session.id, env_id=session.env_id,
                              tools=jsonable(getattr(unwrapped, "tool_schemas", [])), max_steps=body.max_steps)

    @app.post("/sessions/{sid}/reset", response_model=StepResponse, responses=errors)
    async def reset(sid: str, body: ResetRequest | None = None) -> StepResponse:
        session = await table.get(sid)
        return await _guard(_reset(table, session, body or ResetRequest()))

    @app.post("/sessions/{sid}/step", response_model=StepResponse, responses=errors)
    async def step(sid: str, body: StepRequest) -> StepResponse:
        session = await table.get(sid)
        return await _guard(_step(table, session, body.action))

    @app.get("/sessions/{sid}/state", response_model=SessionState, responses=errors)
    async def state(sid: str) -> SessionState:
        return _state(await table.get(sid))

    @app.delete("/sessions/{sid}", status_code=204, responses=errors)
    async def close_session(sid: str) -> None:
        if not await table.close(sid):
            raise UnknownSession(f"no session {sid!r}")

    @app.websocket("/ws")
    async def websocket(ws: WebSocket) -> None:
        await ws.accept()
        try:
            body = SessionConfig.model_validate(dict(ws.query_params))
            session = await table.create(body.env_id, body.make_kwargs())
        except (ValidationError, AtCapacity, DeepgymError) as exc:
            code = "CAPACITY_REACHED" if isinstance(exc, AtCapacity) else "VALIDATION_ERROR"
            await _send_error(ws, _reason(exc), code)
            await ws.close(code=1013 if isinstance(exc, AtCapacity) else 1008)
            return
        session.on_reap = lambda: ws.close(code=1001, reason="session idle for too long")
        try:
            await _serve_socket(ws, table, session, config.max_body_bytes)
        except WebSocketDisconnect:
            pass
        finally:  # the client left (or broke the connection): its sandbox goes with it
            await table.close(session.id)

    return app


# -- handlers ----------------------------------------------------------------------------------
async def _reset(table: SessionTable, session: Session, body: ResetRequest) -> StepResponse:
    obs, info = await table.call(session, lambda: session.env.reset(seed=body.seed, options=body.options))
    session.step_count, session.done, session.episode_id = 0, False, body.episode_id or secrets.token_hex(8)
    session.task_id = info.get("task_id")
    return StepResponse(observation={"text": obs}, reward=None, done=False, metadata=public_info(info))


async def _step(table: SessionTable, session: Session, action: Any) -> StepResponse:
    obs, reward, terminated, truncated, info = await table.call(session, session.env.step, action)
    session.step_count += 1
    session.done = bool(terminated or truncated)
    return StepResponse(observation={"text": obs}, reward=jsonable(float(reward)), done=session.done,
                        terminated=bool(terminated), truncated=bool(truncated), metadata=public_info(info))


def _state(session: Session) -> SessionState:
    return SessionState(episode_id=session.episode_id, step_count=session.step_count, task_id=session.task_id,
                        done=session.done, env_id=session.env_id)


async def _guard(call: Any) -> Any:
    """The env's exceptions as HTTP errors with their reason; the server goes on."""
    try:
        return await call
    except (AtCapacity, UnknownSession):
        raise
    except (ResetNeeded, gym.error.ResetNeeded) as exc:  # ours, or Gymnasium's OrderEnforcing's
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    except UnknownTaskError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except InfrastructureError as exc:
        raise HTTPException(503, f"the sandbox failed: {exc}") from None
    except DeepgymError as exc:  # a configuration the env refuses
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    except Exception as exc:
        log.exception("the environment raised")
        raise HTTPException(500, f"the environment raised {type(exc).__name__}: {exc}") from None


async def _serve_socket(ws: WebSocket, table: SessionTable, session: Session, max_bytes: int) -> None:
    """OpenEnv's message loop: reset / step / state / close, one answer per message."""
    while True:
        raw = await ws.receive_text()
        # (`deepgym serve` also gives uvicorn this cap, which refuses such a frame before reading it all)
        if len(raw.encode()) > max_bytes:
            await _send_error(ws, too_large(max_bytes), "MESSAGE_TOO_BIG")
            await ws.close(code=1009, reason="message too big")
            return
        try:
            message = json.loads(raw)
            kind = message.get("type") if isinstance(message, dict) else None
            data = message.get("data") if isinstance(message, dict) else None
        except (json.JSONDecodeError, RecursionError) as exc:
            await _send_error(ws, f"invalid JSON: {exc}", "INVALID_JSON")
            continue
        try:
            if kind == "reset":
                reset = ResetRequest.model_validate(data or {})
                await ws.send_json({"type": "observation", "data": (await _reset(table, session, reset)).model_dump()})
            elif kind == "step":
                step = StepRequest.model_validate({"action": data})
                await ws.send_json({"type": "observation",
                                    "data": (await _step(table, session, step.action)).model_dump()})
            elif kind == "state":
                await ws.send_json({"type": "state", "data": _state(session).model_dump()})
            elif kind == "close":
                return
            else:
                await _send_error(ws, f"unknown message type {kind!r}; send reset, step, state or close",
                                  "UNKNOWN_TYPE")
        except ValidationError as exc:
            await _send_error(ws, _reason(exc), "VALIDATION_ERROR")
        except UnknownSession as exc:
            await _send_error(ws, str(exc), "SESSION_ERROR")
            return
        except Exception as exc:
            await _send_error(ws, f"{type(exc).__name__}: {exc}", "EXECUTION_ERROR")


async def _send_error(ws: WebSocket, message: str, code: str) -> None:
    await ws.send_json({"type": "error", "data": {"message": message, "code": code}})


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
    return str(exc)
