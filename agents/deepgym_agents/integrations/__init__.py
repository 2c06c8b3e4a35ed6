"""Adapters that run DeepGym environments inside other engines. Each module imports its engine,
so import the one you use (nothing here is imported by ``deepgym_agents`` itself):

* :mod:`deepgym_agents.integrations.trl`: TRL's ``GRPOTrainer`` (``rollout_func`` on the reference
  loop, or ``environment_factory``);
* :mod:`deepgym_agents.integrations.verl`: a verl agent loop (``AgentLoopBase``);
* :mod:`deepgym_agents.integrations.minisweagent`: a mini-swe-agent ``Environment``.

``pip install 'deepgym-envs[integrations]'`` installs TRL and mini-swe-agent; verl pins its own
torch and transformers, so it is installed on its own (see the verl module).
"""
