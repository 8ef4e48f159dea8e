"""Remote compute: ephemeral Lambda GPU boxes and the jobs that run on them.

- :mod:`monte.remote.lambda_api`: a small client for Lambda Cloud's HTTP API (stdlib only), with
  the Lambda key ladder (``MONTE_LAMBDA_KEY``, then ``MONTE_LAMBDA_KEY_OP``).
- :mod:`monte.remote.boxes`: ``monte box up/status/down`` on top of it, and the identity files
  under ``<data root>/boxes/``.
"""
