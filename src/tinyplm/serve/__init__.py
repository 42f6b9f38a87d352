"""The HTTP service of ``tinyplm serve``: the FastAPI app (``app``) answering through the one
:class:`~tinyplm.inference.predictor.Predictor`, micro-batching (``batcher``), request limits and
parsing (``api``, ``endpoint``), auth, Prometheus metrics, shape warm-up and the uvicorn server
(``server``)."""
