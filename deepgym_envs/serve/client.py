"""A Gymnasium env whose episodes run on a ``deepgym serve`` server.

>>> import gymnasium as gym, deepgym_envs
>>> env = gym.make("deepgym/Remote-v0", url="http://127.0.0.1:8000", token="...",   # doctest: +SKIP
...                task_id="deepgym__tmplite-002", max_steps=20)
>>> obs, info = env.reset(seed=0)                                                  # doctest: +SKIP

Same observations, actions, rewards and ``info`` as ``deepgym/SWE-v0`` run locally, less what the
server keeps back (the hidden tests' log). The session opens when the env is made and closes with
``close()``; a server error arrives as :class:`RemoteError` with the server's reason.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import httpx

from deepgym_envs.env import ResetNeeded
from deepgym_envs.errors import DeepgymError, UnknownTaskError
from deepgym_envs.serve.protocol import ResetRequest, SessionConfig, StepRequest
from deepgym_envs.spaces import MAX_TEXT, ActionText, AnyText


class RemoteError(DeepgymError):
    """The server refused or failed a request; ``status`` is its HTTP status."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"server answered {status}: {detail}")
        self.status, self.detail = status, detail


class RemoteEnv(gym.Env[str, Any]):
    """``deepgym/SWE-v0`` (or another served id) in a session on a ``deepgym serve`` server."""

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 1800.0,
                 render_mode: str | None = None, **make_kwargs: Any) -> None:
        """
        Args:
            url: the server's base URL, e.g. ``http://127.0.0.1:8000``.
            token: the server's bearer token (None for a ``--no-auth`` server).
            timeout: seconds one request may take (a submit waits for the hidden tests).
            make_kwargs: the session's options (:class:`~deepgym_envs.serve.protocol.SessionConfig`:
                ``env_id``, ``task_id``, ``max_steps``, ``reward_mode`` and the reward weights);
                the task set and sandbox are the server's.
        """
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise DeepgymError(f"render_mode={render_mode!r} is not one of {', '.join(self.metadata['render_modes'])}")
        config = SessionConfig(**make_kwargs)  # a wrong option fails here, before any request
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)
        try:
            created = self._call("POST", "/sessions", config.model_dump(exclude_defaults=True))
        except BaseException:
            self._http.close()
            raise
        self.session_id: str | None = created["session_id"]
        self.tool_schemas: list[dict[str, Any]] = created["tools"]
        self.max_steps: int = created["max_steps"]
        self.render_mode = render_mode
        self.observation_space = AnyText(MAX_TEXT, min_length=0)
        self.action_space = ActionText(MAX_TEXT, min_length=0)
        self._last_obs = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        body = ResetRequest(seed=seed, options=options)
        data = self._call("POST", f"/sessions/{self._sid}/reset", body.model_dump(exclude_none=True))
        self._last_obs = data["observation"]["text"]
        self._show()
        return self._last_obs, data["metadata"]

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if hasattr(action, "to_dict"):  # a ToolCall
            action = action.to_dict()
        data = self._call("POST", f"/sessions/{self._sid}/step", StepRequest(action=action).model_dump(exclude_none=True))
        self._last_obs = data["observation"]["text"]
        self._show()
        reward = data["reward"]
        return (self._last_obs, float("nan") if reward is None else float(reward), data["terminated"],
                data["truncated"], data["metadata"])

    def state(self) -> dict[str, Any]:
        """The session's episode id, step count, task id and whether the episode is over."""
        return self._call("GET", f"/sessions/{self._sid}/state")

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_obs
        if self.render_mode == "human":
            print(self._last_obs, flush=True)
        return None

    def close(self) -> None:
        """Close the session (its sandbox goes with it) and the connection; safe to call twice."""
        if self.session_id is not None:
            sid, self.session_id = self.session_id, None
            try:
                self._http.delete(f"/sessions/{sid}")
            except httpx.HTTPError:
                pass  # the server is gone; its idle reaper closes the session
        self._http.close()
        super().close()

    # -- helpers -------------------------------------------------------------------------------
    @property
    def _sid(self) -> str:
        if self.session_id is None:
            raise ResetNeeded("the remote env is closed")
        return self.session_id

    def _show(self) -> None:
        if self.render_mode == "human":
            self.render()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self._http.request(method, path, json=body)
        if response.is_success:
            return response.json() if response.content else None
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        if response.status_code == 409:
            raise ResetNeeded(str(detail))
        if response.status_code == 404 and "task" in str(detail) and "session" not in str(detail):
            raise UnknownTaskError(str(detail))
        raise RemoteError(response.status_code, str(detail))
