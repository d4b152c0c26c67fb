"""The final-answer extractors: one module each, registered in :data:`pipeline.verify.extract.EXTRACTORS`.

An extractor is an :class:`pipeline.verify.extract.Extractor` subclass decorated with
:func:`pipeline.verify.extract.register`: a ``name`` and one method, ``read(completion)``, returning the answer, the
answer with the verifier policies its reading used, or None (``passed_over`` when it can refuse a phrase). The
registry imports every module of this folder the first time it is read, so adding a rule is adding a file here (or
listing one in params.yaml's ``plugins``: docs/operations.md); the shared reading (answer phrases, sentence ends,
trimming) is in :mod:`pipeline.verify.extract`.
"""
