"""Your own policies and environments for es-train, as modules: ``policy.kind =
"examples.torch_policies:mlp"`` and ``env.id = "examples.memory:MaskedCartPole-v1"`` name
them (es imports them from the folder it runs in, or from ``PYTHONPATH``)."""
