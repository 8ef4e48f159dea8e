"""Before a chunk's ``started`` record: the recipe's machine-dependent settings on this machine
and TRL's own config built as the chunk will build it (:func:`check_machine`, also at plan time),
then the tokenizer of the starting weights with one source row (:func:`preflight_train`).
A refusal here records nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from monte.errors import error
from monte.training import recipes
from monte.training.trainers import trainer_args

if TYPE_CHECKING:
    from monte.training.plan import TrainPlan


def check_machine(plan: TrainPlan) -> None:
    """Refuse (before any record) a recipe whose machine-dependent settings cannot run here:
    ``deepspeed`` (a JSON config, and the package), ``fsdp`` (CUDA GPUs), more dataloader
    workers than CPUs, and then TRL's own config built exactly as the chunk will build it."""
    import importlib.util
    import tempfile

    import torch

    rec, s = plan.recipe, plan.recipe.settings
    cuda = torch.cuda.is_available()
    ds = s.get("deepspeed")
    if ds is not None:
        if isinstance(ds, str):
            try:
                ok = isinstance(json.loads(Path(os.path.expanduser(ds)).read_text(encoding="utf-8")), dict)
            except (OSError, ValueError):
                ok = False
            if not ok:
                raise error("E_BAD_INPUT", f"recipe {rec.name}: 'deepspeed': {ds!r} is not a readable DeepSpeed "
                            "JSON config (a file holding one JSON object)",
                            "point deepspeed at a DeepSpeed config file, give the config inline as a mapping, "
                            "or remove the key")
        if importlib.util.find_spec("deepspeed") is None:
            raise error("E_PREFLIGHT", f"recipe {rec.name} sets deepspeed, and this machine has no deepspeed "
                        "package; nothing was started", "`pip install deepspeed` where the chunk trains (a GPU "
                        "box: --remote), or remove deepspeed from the recipe")
    fsdp = s.get("fsdp")
    if fsdp not in (None, False, "", []) and not cuda:
        raise error("E_PREFLIGHT", f"recipe {rec.name} sets fsdp: {fsdp!r}, which shards the model over CUDA "
                    "GPUs, and this machine has none; nothing was started",
                    "train on a GPU box (--remote), or remove fsdp (and fsdp_config) from the recipe")
    workers, cpus = s.get("dataloader_num_workers"), os.cpu_count() or 1
    if isinstance(workers, int) and workers > cpus:
        raise error("E_PREFLIGHT", f"recipe {rec.name} sets dataloader_num_workers: {workers}, and this machine "
                    f"has {cpus} CPUs; nothing was started",
                    f"set dataloader_num_workers to at most {cpus} (0: load in the trainer's process)")
    import warnings

    with tempfile.TemporaryDirectory(prefix="monte-preflight-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = trainer_args(rec, out=Path(tmp) / "trainer", end=plan.resume_step + plan.steps, smoke=plan.smoke,
                            cuda=cuda)
        if rec.algorithm in recipes.GENERATING:
            args = {"steps_per_generation": args.get("gradient_accumulation_steps", 1), "num_iterations": 1, **args}
        try:
            recipes.trl_config_class(rec.algorithm)(**args)
        except Exception as e:  # noqa: BLE001 (whatever TRL refuses here refuses before the row)
            raise error("E_PREFLIGHT", f"recipe {rec.name}: trl.{recipes.TRL_CONFIG[rec.algorithm]} refuses these "
                        f"settings on this machine ({'CUDA' if cuda else 'no GPU'}): {type(e).__name__}: {e}; "
                        "nothing was started", "fix or remove the setting it names, or train where it can run "
                        "(--remote)") from None


def preflight_train(plan: TrainPlan) -> None:
    """Everything a chunk needs, before its ``started`` record: the recipe's values on this
    machine, and the tokenizer of the weights it starts from, loaded, with one row of its source
    tokenized. A refusal here records nothing."""
    check_machine(plan)
    try:
        with open(plan.source.rows, encoding="utf-8") as f:
            first = f.readline()[:4096]
    except OSError as e:
        raise error("E_NOT_FOUND", f"the source's rows {plan.source.rows} cannot be read ({e.strerror}); nothing "
                    "was started", "restore them with `monte env install` / `monte dataset show`") from None
    try:
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(plan.init_model)(first)
    except ModuleNotFoundError:
        raise  # a missing extra: refused with its pip line (monte.extras)
    except Exception as e:  # noqa: BLE001 (a broken tokenizer.json raises tokenizers' bare Exception)
        raise error("E_NOT_FOUND", f"{plan.init_model} is not a loadable model folder (its tokenizer: "
                    f"{type(e).__name__}: {e}); nothing was started",
                    "pass a folder saved with save_pretrained (or `monte model init DIR`)") from None

