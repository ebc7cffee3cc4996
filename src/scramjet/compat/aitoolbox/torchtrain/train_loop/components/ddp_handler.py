"""``DDPHandler``: DistributedSampler-based loaders for code that shards data itself.

``TrainLoop(gpu_mode="ddp")`` does not need it: the Trainer gives each process its share
of every rebuildable DataLoader. It is kept for callbacks and scripts that build their
own distributed loaders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch.utils.data import DataLoader, RandomSampler
from torch.utils.data.distributed import DistributedSampler

if TYPE_CHECKING:
    from scramjet.compat.aitoolbox.torchtrain.train_loop.train_loop import TrainLoop

__all__ = ["DDPHandler"]


class DDPHandler:
    """Replaces a TrainLoop's loaders with DistributedSampler ones and registers the epoch setter."""

    def __init__(self, train_loop_obj: TrainLoop) -> None:
        self.train_loop_obj = train_loop_obj

    def add_distributed_samplers(self, world_size: int, rank: int) -> None:
        """Give each loader a DistributedSampler for ``rank`` of ``world_size``.

        A loader keeps its shuffling; ``DistributedSamplerSetEpoch`` is registered so the
        training order changes every epoch.
        """
        from scramjet.compat.aitoolbox.torchtrain.callbacks.ddp import DistributedSamplerSetEpoch

        loop = self.train_loop_obj
        samplers: dict[str, DistributedSampler[Any] | None] = {}
        for name in ("train_loader", "validation_loader", "test_loader"):
            loader = getattr(loop, name)
            if loader is None:
                samplers[name] = None
                continue
            shuffle = isinstance(loader.sampler, RandomSampler)
            new_loader, samplers[name] = self.build_loader_sampler(
                loader, shuffle, world_size, rank
            )
            setattr(loop, name, new_loader)
        callback = DistributedSamplerSetEpoch(
            samplers["train_loader"], samplers["validation_loader"], samplers["test_loader"]
        )
        loop.callbacks_handler.register_callbacks([callback])

    @staticmethod
    def build_loader_sampler(
        data_loader: DataLoader[Any], shuffle: bool, world_size: int, rank: int
    ) -> tuple[DataLoader[Any], DistributedSampler[Any]]:
        """A copy of ``data_loader`` (same settings) sampling through a DistributedSampler."""
        sampler: DistributedSampler[Any] = DistributedSampler(
            data_loader.dataset, shuffle=shuffle, num_replicas=world_size, rank=rank
        )
        loader = DataLoader(
            data_loader.dataset,
            batch_size=data_loader.batch_size,
            sampler=sampler,
            num_workers=data_loader.num_workers,
            collate_fn=data_loader.collate_fn,
            pin_memory=data_loader.pin_memory,
            drop_last=data_loader.drop_last,
            timeout=data_loader.timeout,
            worker_init_fn=data_loader.worker_init_fn,
        )
        return loader, sampler
