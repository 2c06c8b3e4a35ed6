"""The trained policy's weights as a generator loads them: Hugging Face names, LoRA merged in.

A vLLM engine knows nothing about peft: it wants ``model.layers.0.self_attn.q_proj.weight``, not
``base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight`` plus two adapter matrices.
"""

from __future__ import annotations

from typing import Any

import torch


def policy_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """Full weights with HF names; a peft model's adapters are merged into copies (the model is unchanged)."""
    if not hasattr(model, "peft_config"):
        return {name: t.detach() for name, t in model.state_dict().items()}
    model.merge_adapter()
    try:
        merged = {}
        for name, tensor in model.state_dict().items():
            if "lora_" in name:
                continue
            clean = name.removeprefix("base_model.model.").replace(".base_layer.", ".")
            merged[clean] = tensor.detach().clone()  # unmerge below rewrites these in place
        return merged
    finally:
        model.unmerge_adapter()
