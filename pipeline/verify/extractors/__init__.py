"""The final-answer extractors: one module each, registered in :data:`pipeline.verify.extract.EXTRACTORS`.

An extractor is ``fn(completion) -> answer | None`` decorated with :func:`pipeline.verify.extract.register` (or
``register_detailed``, for a rule that also names the verifier policies it used). The registry imports every module
of this folder the first time it is read, so adding a rule is adding a file here (or listing one in params.yaml's
``plugins``: docs/operations.md); the shared reading (answer phrases, sentence ends, trimming) is in
:mod:`pipeline.verify.extract`.
"""
