"""The reformulation methods: one module each, registered in :data:`pipeline.reformulate.registry.METHODS`.

A method is a :class:`pipeline.reformulate.registry.Reformulator` subclass (``name``, ``version``, documented skip
``reasons``, its knobs as a nested ``Options`` model) decorated with ``register``. The registry imports every module of
this folder the first time it is read (``_private`` modules are helpers, not methods), so adding a method is adding a
file here (or listing one in params.yaml's ``plugins``: docs/operations.md). Moving a method changes no
``method_version``: that is its ``version`` and a digest of its options and prompt, never of its file.
"""
