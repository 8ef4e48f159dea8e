"""NeMo Gym beside the built-in catalog: its resources servers' rows frozen in its own JSONL shape,
graded by its own servers over HTTP.

monte never imports NeMo Gym: its code runs in its own interpreter (a virtualenv that holds
``nemo-gym``, or a checkout named by ``MONTE_LOCAL``), started by :mod:`monte.envs.nemo.server`
through the script :mod:`monte.envs.nemo.launch`. What lives where:

- :mod:`~monte.envs.nemo.stack`: where the stack is, and what it ships (servers, benchmarks), read
  from its files alone;
- :mod:`~monte.envs.nemo.rows`: a NeMo Gym row (``responses_create_params`` + the verifier's fields);
- :mod:`~monte.envs.nemo.sources` and :mod:`~monte.envs.nemo.freeze`: the rows an ``env add``
  freezes, and the manifest;
- :mod:`~monte.envs.nemo.server`: a resources server's life and the ``/verify`` client;
- :mod:`~monte.envs.nemo.register`: ``env install`` writing benchmark configs into the checkout;
- :mod:`~monte.envs.nemo.venv`: the recipe that installs NeMo Gym's servers on Python 3.11.
"""
