"""Fully sharded data parallel training (FSDP2, ``torch.distributed.fsdp.fully_shard``).

FSDP shards parameters, gradients and optimizer state over the ranks: each process holds
``1 / world_size`` of them, and gathers a unit's full parameters only while that unit
runs forward or backward. Use it when a model with its optimizer state does not fit on
one device; otherwise DDP (the Trainer's default) is simpler and faster.

:func:`shard_model` prepares a model; the :class:`~scramjet.trainer.Trainer` notices a
sharded model and adapts (gradient accumulation without reduction, evaluation in
lock-step, full-state-dict checkpoints). The helpers below are what it uses.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from scramjet.runtime import distributed as dist

__all__ = [
    "full_state_dicts",
    "is_sharded",
    "load_full_model_state",
    "load_full_optimizer_state",
    "set_gradient_sync",
    "shard_model",
    "sync_buffers",
]

ModuleSpec = nn.Module | str | type[nn.Module]


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model`` or one of its submodules was sharded with ``fully_shard``.

    Args:
        model: Any module.

    Returns:
        True when an ``FSDPModule`` is found (at the root or inside).
    """
    if "torch.distributed.fsdp" not in sys.modules:  # never imported: nothing is sharded
        return False
    from torch.distributed.fsdp import FSDPModule

    return any(isinstance(m, FSDPModule) for m in model.modules())


def _default_units(model: nn.Module) -> list[nn.Module]:
    """Children of the outermost ``ModuleList``/``Sequential`` containers (the "blocks")."""
    units: list[nn.Module] = []

    def visit(module: nn.Module) -> None:
        container = isinstance(module, nn.ModuleList | nn.Sequential)
        for child in module.children():
            if container and any(True for _ in child.parameters()):
                units.append(child)  # a unit: not searched further
            else:
                visit(child)

    visit(model)
    return units


def _chosen_units(model: nn.Module, modules: Iterable[ModuleSpec]) -> list[nn.Module]:
    owned = {id(m) for m in model.modules()}
    chosen: list[nn.Module] = []
    for spec in modules:
        if isinstance(spec, str):
            try:
                chosen.append(model.get_submodule(spec))
            except AttributeError:
                names = [n for n, _ in model.named_modules() if n][:10]
                raise ValueError(
                    f"shard_model(modules=...) received the name {spec!r}, which is not a "
                    f"submodule of the model; expected a name such as {names}. Use the names "
                    f"of model.named_modules()."
                ) from None
        elif isinstance(spec, type) and issubclass(spec, nn.Module):
            # Post-order (children first): fully_shard must see inner units before outer.
            chosen.extend(m for m in reversed(list(model.modules())) if isinstance(m, spec))
        elif isinstance(spec, nn.Module) and id(spec) in owned:
            chosen.append(spec)
        else:
            raise TypeError(
                f"shard_model(modules=...) received {spec!r}; expected submodules of the "
                f"model, their names (as in model.named_modules()) or module classes."
            )
    return [m for m in chosen if m is not model]


def _owners(model: nn.Module, units: list[nn.Module]) -> dict[int, dict[str, str]]:
    """For each parameter (by id): ``{owner: parameter name}``, where the owner is the
    name of the innermost unit holding it, or ``""`` for the root. A parameter with two
    owners is shared (tied) between FSDP groups."""
    unit_names = {id(m): name for name, m in model.named_modules(remove_duplicate=False)}
    unit_ids = {id(u) for u in units}
    owners: dict[int, dict[str, str]] = {}

    def visit(module: nn.Module, prefix: str, owner: str) -> None:
        if id(module) in unit_ids and module is not model:
            owner = unit_names.get(id(module), prefix)
        for name, param in module.named_parameters(recurse=False, remove_duplicate=False):
            owners.setdefault(id(param), {}).setdefault(owner, f"{prefix}{name}")
        for name, child in module.named_children():
            visit(child, f"{prefix}{name}.", owner)

    visit(model, "", "")
    return owners


def _shared_between(model: nn.Module, units: list[nn.Module]) -> list[dict[str, str]]:
    """The parameters held by more than one FSDP group (``{owner: name}`` each)."""
    return [o for o in _owners(model, units).values() if len(o) > 1]


def _units_without_shared_parameters(model: nn.Module, units: list[nn.Module]) -> list[nn.Module]:
    """Default units minus those that share a parameter with another group: fully_shard
    refuses a parameter managed by two groups, so such units join the root's group."""
    names = {id(m): name for name, m in model.named_modules(remove_duplicate=False)}
    kept = list(units)
    while True:
        tied = {owner for o in _shared_between(model, kept) for owner in o if owner}
        if not tied:
            return kept
        kept = [u for u in kept if names.get(id(u)) not in tied]


def _check_no_shared_parameters(model: nn.Module, units: list[nn.Module]) -> None:
    """Explicit units that share a parameter with another group: one clear error."""
    shared = _shared_between(model, units)
    if not shared:
        return
    where = "; ".join(
        " and ".join(f"{name!r} (in {owner or 'the root'!r})" for owner, name in o.items())
        for o in shared[:3]
    )
    raise ValueError(
        f"shard_model(modules=...) received units that share parameters with another "
        f"group: {where} are the same tensor. FSDP shards each parameter in exactly one "
        f"group, so tied parameters must stay together: leave the units that hold them out "
        f"of modules= (they are then sharded with the root), or pass their common parent "
        f"module as the unit."
    )


def shard_model(
    model: nn.Module,
    *,
    modules: Iterable[ModuleSpec] | None = None,
    reshard_after_forward: bool = True,
    mixed_precision: Any = None,
) -> nn.Module:
    """Shard ``model`` over the processes of the run with FSDP2 (``fully_shard``).

    Creates the process group from the launcher's environment if needed, applies
    ``fully_shard`` to each unit and then to the root, and returns the model (sharded in
    place: same object, same class name with an ``FSDP`` prefix, same parameter names).
    In a single process it returns the model untouched, so one script runs unchanged with
    ``python`` and under ``torchrun``.

    Create the optimizer **after** this call, from ``model.parameters()``: sharding
    replaces every parameter by a ``DTensor`` shard.

    Args:
        model: The module to shard (on CPU or on this process's device).
        modules: The units to shard separately, each gathering its parameters only while
            it runs: submodules, their names (``"layers.0"``) or module classes (every
            instance). Default: the children of the outermost ``nn.ModuleList`` and
            ``nn.Sequential`` containers (the blocks of a transformer's layer list, the
            layers of a Sequential), except those that share a parameter with another
            group (tied embeddings and heads inside the container): they are sharded
            with the root, as is whatever is left. Explicit units that share a
            parameter with another group are an error.
        reshard_after_forward: Free the gathered parameters after each unit's forward
            (less memory; gathered again for backward). ``False`` keeps them until the
            backward (less communication).
        mixed_precision: A ``torch.distributed.fsdp.MixedPrecisionPolicy`` (e.g.
            ``param_dtype=torch.bfloat16``), or None for full precision. In a single
            process nothing is sharded and the policy is not applied (with a warning).

    Returns:
        The sharded model (in a single process, ``model`` itself).

    Example:
        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
        >>> shard_model(model) is model  # one process: nothing to shard
        True
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"shard_model needs a torch.nn.Module; received {type(model).__name__}. "
            f"Pass the model itself (before creating its optimizer)."
        )
    env = dist.init_distributed()
    if env.world_size == 1:
        if mixed_precision is not None:
            warnings.warn(
                f"shard_model received mixed_precision={mixed_precision!r}, but this is a "
                f"single process, so the model is left unsharded and the policy is not "
                f"applied: it trains in its own dtype. For the same computation dtype in one "
                f"process, pass precision='bf16' (or 'fp16') to the Trainer.",
                stacklevel=2,
            )
        return model
    from torch.distributed.fsdp import FSDPModule, fully_shard

    if isinstance(model, FSDPModule):
        raise ValueError(
            f"shard_model received a model that is already sharded (its class is "
            f"{type(model).__name__}); expected an unsharded model. Call shard_model (or "
            f"fully_shard on the root) once per model, and create the optimizer after it."
        )
    if modules is None:
        units = _units_without_shared_parameters(model, _default_units(model))
    else:
        units = _chosen_units(model, modules)
        _check_no_shared_parameters(model, units)
    options: dict[str, Any] = {"reshard_after_forward": reshard_after_forward}
    if mixed_precision is not None:
        options["mp_policy"] = mixed_precision
    done: set[int] = set()
    for unit in units:
        if id(unit) not in done and not isinstance(unit, FSDPModule):  # sharded by the user
            fully_shard(unit, **options)
            done.add(id(unit))
    fully_shard(model, **options)
    return model


def check_sharded_optimizer(optimizer: torch.optim.Optimizer, model: nn.Module) -> None:
    """Raise when a sharded model's optimizer holds parameters that are not the model's.

    ``fully_shard`` replaces the parameters, so an optimizer created before sharding
    would update tensors the model no longer uses.
    """
    if not is_sharded(model) or not isinstance(optimizer, torch.optim.Optimizer):
        return
    own = {id(p) for p in model.parameters()}
    held = [p for g in optimizer.param_groups for p in g["params"]]
    foreign = [p for p in held if id(p) not in own]
    if foreign:
        kinds = sorted({type(p).__name__ for p in foreign})
        raise ValueError(
            f"The model is sharded with fully_shard, but {len(foreign)} of the optimizer's "
            f"{len(held)} parameters ({', '.join(kinds)}) are not the sharded model's "
            f"parameters (DTensor shards). The optimizer was probably created before "
            f"shard_model()/fully_shard replaced them. Create it afterwards: "
            f"model = shard_model(model); optimizer = torch.optim.AdamW(model.parameters())."
        )


def set_gradient_sync(model: nn.Module, enabled: bool) -> None:
    """Turn FSDP's gradient reduce-scatter on or off for the next backward.

    Off (accumulation micro-steps), gradients accumulate unreduced; the next backward
    with sync on reduces the whole window at once.
    """
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_requires_gradient_sync(enabled, recurse=False)


def sync_buffers(model: nn.Module) -> None:
    """Copy rank 0's buffers (BatchNorm's running statistics) to every rank (collective).

    ``fully_shard`` shards parameters only: each rank's buffers follow its own batches.
    The Trainer calls this with every update, as the DDP wrapper broadcasts after each
    synchronised forward, so evaluation, prediction and the checkpoint rank 0 writes use
    one and the same model on every rank. Nothing to do in a single process.
    """
    if dist.get_world_size() > 1:
        from scramjet.runtime._ddp import broadcast_buffers

        broadcast_buffers(model)


def _reshard(model: nn.Module) -> None:
    """Put every FSDP unit back in its sharded state.

    With ``reshard_after_forward=False``, a forward without a backward (evaluation,
    prediction) leaves the gathered full parameters registered on the module until the
    next training backward; loading a state dict into them fails (plain tensors where
    the loader expects ``DTensor`` shards) and ``named_parameters()`` no longer names the
    optimizer's parameters.
    """
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def _full_options() -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True)


def _param_names(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """Parameter names in the optimizer's order (the ids of a plain ``state_dict``)."""
    names = {id(p): name for name, p in model.named_parameters()}
    return [names[id(p)] for g in optimizer.param_groups for p in g["params"]]


def full_state_dicts(
    model: nn.Module, optimizer: torch.optim.Optimizer | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Unsharded model and optimizer state dicts, in the layout of an unsharded model.

    Collective: every rank must call it. Rank 0 receives the full tensors on CPU; the
    other ranks receive empty dicts. The optimizer state is keyed by position like
    ``optimizer.state_dict()`` of a plain model, so the result loads into an unsharded
    model and optimizer.
    """
    from torch.distributed.checkpoint.state_dict import get_state_dict

    _reshard(model)
    if optimizer is None:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        return get_model_state_dict(model, options=_full_options()), None
    model_sd, gathered = get_state_dict(model, optimizer, options=_full_options())
    optim_sd: dict[str, Any] = dict(gathered)
    if not optim_sd:  # ranks other than 0
        return model_sd, {}
    position = {name: i for i, name in enumerate(_param_names(model, optimizer))}
    plain = {
        "state": {position[k]: v for k, v in optim_sd["state"].items()},
        "param_groups": [
            {**g, "params": [position[k] for k in g["params"]]} for g in optim_sd["param_groups"]
        ],
    }
    return model_sd, plain


def load_full_model_state(model: nn.Module, state: dict[str, Any]) -> None:
    """Load an unsharded model state dict into a sharded model (every rank passes it)."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    _reshard(model)
    set_model_state_dict(model, state, options=_full_options())


def _check_optimizer_fits(
    optimizer: torch.optim.Optimizer, state: dict[str, Any], names: list[str]
) -> None:
    """Refuse a checkpoint's optimizer state saved from other parameter groups or another
    model (the loader below is not strict: parameters without saved state are allowed)."""
    groups = state.get("param_groups", [])
    held = [len(g.get("params", ())) for g in groups]
    own = [len(g["params"]) for g in optimizer.param_groups]
    if len(held) != len(own):
        raise ValueError(
            f"The checkpoint's optimizer has {len(held)} parameter group(s); this optimizer "
            f"has {len(own)}. Create the optimizer with the same parameter groups as the run "
            f"that saved it."
        )
    if held != own:
        raise ValueError(
            f"The checkpoint's optimizer has parameter groups of sizes {held}; this "
            f"optimizer's groups have sizes {own}. The checkpoint was saved from another model "
            f"or other parameter groups: create the model and the optimizer as in the run "
            f"that saved it."
        )
    unknown = [i for i in state.get("state", {}) if not 0 <= int(i) < len(names)]
    if unknown:
        raise ValueError(
            f"The checkpoint's optimizer holds state for parameter position(s) "
            f"{sorted(unknown)[:5]}; this optimizer has {len(names)} parameters (positions "
            f"0 to {len(names) - 1}). The checkpoint was saved from another model: create "
            f"the model and the optimizer as in the run that saved it."
        )


def load_full_optimizer_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
) -> None:
    """Load a plain (position-keyed) optimizer state dict into a sharded model's optimizer.

    A parameter the checkpoint holds no state for (one that never had a gradient, such as
    a head the loss does not use yet) is left without state, as in the run that saved it.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    _reshard(model)
    names = _param_names(model, optimizer)
    _check_optimizer_fits(optimizer, state, names)
    keyed: dict[str, Any] = {
        "state": {names[int(i)]: v for i, v in state["state"].items()},
        "param_groups": [
            {**g, "params": [names[int(i)] for i in g["params"]]} for g in state["param_groups"]
        ],
    }
    # Not strict: torch refuses a parameter that requires grad but has no saved state.
    options = StateDictOptions(full_state_dict=True, cpu_offload=True, strict=False)
    set_optimizer_state_dict(model, optimizer, keyed, options=options)
    # torch creates state for every parameter first (a step with zero gradients and lr 0);
    # the ones the checkpoint has none for get none, as a plain load_state_dict leaves them.
    params = [p for g in optimizer.param_groups for p in g["params"]]
    for name, param in zip(names, params, strict=True):
        if name not in keyed["state"]:
            optimizer.state.pop(param, None)
