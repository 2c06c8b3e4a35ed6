"""``deepgym serve``: the environments over HTTP, one session per client.

The wire format follows OpenEnv where it fits: ``reset`` / ``step`` / ``state`` answer
``{"observation": {...}, "reward": ..., "done": ..., "metadata": {...}}``, and the WebSocket route
``/ws`` speaks OpenEnv's messages (``{"type": "reset" | "step" | "state" | "close", "data": ...}``),
so OpenEnv's ``GenericEnvClient`` can drive it. Plain HTTP clients open a session with
``POST /sessions`` and address it by id. :class:`deepgym_envs.serve.client.RemoteEnv` is a
Gymnasium env over that HTTP API (``gym.make("deepgym/Remote-v0", url=..., token=...)``).

Needs the ``serve`` extra (``pip install 'deepgym-envs[serve]'``): FastAPI, uvicorn, httpx, websockets.
"""
