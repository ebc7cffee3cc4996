"""TensorBoard event files (``pip install 'scramjet[tensorboard]'``)."""

from __future__ import annotations

import itertools
import math
import os
import socket
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from scramjet.tracking.loggers.base import MetricRow, Tracker

_HPARAM_TYPES = (bool, int, float, str)
_FILE_NUMBERS = itertools.count()


def _file_stamp(log_dir: Path) -> int:
    """The time in a new event file's name, later than every event file already in
    ``log_dir``: TensorBoard reads a folder's files in name order, and a resumed run's
    purge marker only works in the file read after the ones it purges. Two files made in
    the same second (a resume, or two trainings in one process) were ordered by their pid
    and counter as text, where ``.10`` sorts before ``.9``."""
    stamp = int(time.time())
    for path in log_dir.glob("events.out.tfevents.*"):
        field = path.name.split(".")[3]
        if field.isdigit():
            stamp = max(stamp, int(field) + 1)
    return stamp


def _crc32c() -> Callable[[bytes], int]:
    """CRC-32C of a record: the C implementation when installed, else TensorBoard's own."""
    try:
        import google_crc32c

        if google_crc32c.implementation == "c":
            return google_crc32c.value  # type: ignore[no-any-return]
    except ImportError:
        pass
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c

    return crc32c  # type: ignore[no-any-return]


_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")
_TAGS: dict[str, bytes] = {}


def _varint(n: int) -> bytes:
    """A non-negative integer as a protobuf varint."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _scalar_value(name: str, value: float) -> bytes:
    """One ``Summary.Value`` (tag and simple_value) as field 1 of a ``Summary``."""
    tag = _TAGS.get(name)
    if tag is None:
        raw = name.encode()
        tag = _TAGS[name] = b"\x0a" + _varint(len(raw)) + raw + b"\x15"
    return b"\x0a" + _varint(len(tag) + 4) + tag + _float32(value)


def _float32(value: float) -> bytes:
    """``value`` packed as a float32; beyond float32's range it is +-inf (as protobuf
    stores it), instead of an error that lost the whole batch of rows it came with."""
    try:
        return _FLOAT.pack(value)
    except OverflowError:
        return _FLOAT.pack(math.copysign(math.inf, value))


class EventFile:
    """One TensorBoard event file, written in the calling thread.

    A record is the serialized ``Event`` framed as TensorBoard reads it: its length, the
    masked CRC-32C of the length, the bytes, their masked CRC-32C. ``SummaryWriter`` hands
    each event to a second thread that checksums it in Python (about 15 us per small
    event); here the checksum is computed in C when ``google-crc32c`` is installed (it
    comes with the ``tensorboard`` extra) and the file is appended once per
    :meth:`flush`, so per-step rows cost the training loop little GIL time.

    Args:
        log_dir: the folder of the file.
        purge_step: for a resumed run: events from this step on in earlier files of the
            folder are dropped by TensorBoard (a session-start marker at that step).
    """

    def __init__(self, log_dir: Path, purge_step: int | None = None) -> None:
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog

        log_dir.mkdir(parents=True, exist_ok=True)
        name = (
            f"events.out.tfevents.{_file_stamp(log_dir):010d}.{socket.gethostname()}."
            f"{os.getpid()}.{next(_FILE_NUMBERS)}"
        )
        self.path = log_dir / name
        self._crc = _crc32c()
        self._pending: list[bytes] = []
        self._file = open(self.path, "ab")  # noqa: SIM115 (closed in close())
        self.write(Event(wall_time=time.time(), file_version="brain.Event:2"))
        if purge_step is not None:
            start = SessionLog(status=SessionLog.START)
            self.write(Event(wall_time=time.time(), step=purge_step, session_log=start))
        self.flush()

    def _masked(self, data: bytes) -> bytes:
        crc = self._crc(data)
        return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)

    def write(self, event: Any) -> None:
        """Queue one ``Event`` (written at the next :meth:`flush`)."""
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        self._pending.append(header + self._masked(header) + data + self._masked(data))

    def add_summary(
        self, summary: Any, step: int | None = None, wall_time: float | None = None
    ) -> None:
        """Queue a ``Summary`` as an event at ``step`` and ``wall_time`` (now by default)."""
        from tensorboard.compat.proto.event_pb2 import Event

        event = Event(summary=summary, wall_time=time.time() if wall_time is None else wall_time)
        if step is not None:
            event.step = int(step)
        self.write(event)

    def add_scalars(self, values: Mapping[str, float], step: int, wall_time: float) -> None:
        """Queue one event holding scalars, encoded directly (the bytes protobuf writes for
        the same ``Event``, without building message objects: a row costs a few us)."""
        body = b"".join(_scalar_value(name, float(value)) for name, value in values.items())
        summary = _varint(len(body)) + body
        at = b"\x10" + _varint(step) if step else b""  # proto3 leaves a zero step out
        data = b"\x09" + _DOUBLE.pack(wall_time) + at + b"\x2a" + summary
        header = struct.pack("<Q", len(data))
        self._pending.append(header + self._masked(header) + data + self._masked(data))

    def flush(self) -> None:
        """Append the queued records to the file (one write) and flush it."""
        if self._pending:
            self._file.write(b"".join(self._pending))
            self._pending = []
        self._file.flush()

    def close(self) -> None:
        self.flush()
        self._file.close()


class TensorBoardTracker(Tracker):
    """Writes scalars and HParams entries into the run folder itself.

    The event files sit in the run folder, so ``tensorboard --logdir <root>/<project>``
    names each run after its folder. Every value is a scalar under its metric name
    (``train_loss``, ``lr``, ``eval_loss_epoch``, your ``trainer.log`` names, results as
    ``test/accuracy``) with the optimizer step as x and the step's own wall time, so step
    and epoch curves overlay; each epoch row also writes ``epoch``. The HParams dashboard
    gets the hyperparameters when the run starts (a session start) and the run's status
    when it ends (a session end); its metrics are the run's scalars, whose last values it
    shows. No experiment summary is written: TensorBoard then builds the table from the
    sessions of every run under ``--logdir``, so runs with different hyperparameters
    compare in one table.

    Args:
        run_dir: the run folder (events are written there).
    """

    name = "tensorboard"

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "loggers=('tensorboard',) needs TensorBoard: pip install 'scramjet[tensorboard]'"
            ) from exc
        self.log_dir = Path(run_dir)
        self._events: EventFile | None = None
        self._writer: Any = None
        self._started = False
        self._status = "finished"
        self._purge_step: int | None = None
        self._session_start: Any = None  # the HParams session start, for a new event file
        self._restart_session = False

    @property
    def events(self) -> EventFile:
        """The event file scalars and HParams entries go to (a new one after :meth:`close`,
        or after the file was removed: see :meth:`reopen_removed_files`)."""
        self.reopen_removed_files()
        if self._events is None:
            self._events = EventFile(self.log_dir, self._purge_step)
            self._purge_step = None
            if self._restart_session and self._session_start is not None:
                self._events.add_summary(self._session_start)  # the HParams session again
            self._restart_session = False
        return self._events

    def reopen_removed_files(self) -> None:
        """The event file removed (the run folder deleted while training): its handle would
        write on into the removed file, so the next scalars go to a new event file (the
        folder created again if needed), which starts the HParams session again."""
        if self._events is None or self._events.path.exists():
            return
        removed, self._events = self._events, None
        removed.close()
        self._restart_session = self._started
        self._note(
            f"TensorBoard: its event file {removed.path.name} was removed with the scalars "
            f"written to it; the later ones go to a new event file in {self.log_dir}"
        )

    @property
    def writer(self) -> Any:
        """A ``SummaryWriter`` on the run folder, for anything else (images, histograms):
        its own event file beside the scalars', shown by TensorBoard as the same run."""
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(self.log_dir), flush_secs=30)
        return self._writer

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Start the HParams session with the hyperparameters (scalars and strings; None
        and lists as their text, the only other types HParams takes)."""
        from torch.utils.tensorboard.summary import hparams

        kept = {k: v if isinstance(v, _HPARAM_TYPES) else str(v) for k, v in params.items()}
        _, start, _ = hparams(kept, {})
        self._session_start = start
        self.events.add_summary(start)
        self.events.flush()
        self._started = True

    def log_metrics(self, rows: Sequence[MetricRow]) -> None:
        """Add every value as a scalar at the row's step and wall time: one event per row
        holding all its values (what ``add_scalar`` per value writes, in fewer records)."""
        events = self.events
        for row in rows:
            values = row["metrics"]
            if row["scope"] == "epoch":  # a value the user named "epoch" is kept as given
                values = {"epoch": float(row["epoch"]), **values}
            events.add_scalars(values, row["step"], row["time"])
        events.flush()

    def log_results(self, name: str, results: Mapping[str, float], step: int) -> None:
        """Add each number as the scalar ``<name>/<metric>``."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = [
            Summary.Value(tag=f"{name}/{metric}", simple_value=float(value))
            for metric, value in results.items()
        ]
        self.events.add_summary(Summary(value=values), step)
        self.events.flush()

    def truncate(self, step: int, epoch: int) -> None:
        """A resumed run: TensorBoard drops the events after ``step`` (a purge marker at the
        start of the next event file), so the curves read as one run."""
        self.close_files()
        self._purge_step = step + 1

    def set_status(self, status: str) -> None:
        """Kept for the HParams session's end."""
        self._status = status

    def close(self) -> None:
        """End the HParams session with the run's status, flush and close the event file."""
        self.reopen_removed_files()
        if self._started and (self._events is not None or self._restart_session):
            self.events.add_summary(_session_end(self._status))
        self.close_files()

    def close_files(self) -> None:
        """Flush and close the event files (later calls open new ones)."""
        if self._events is not None:
            self._events.close()
            self._events = None
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None


def _session_end(status: str) -> Any:
    """The HParams session-end summary with the run's status."""
    from tensorboard.plugins.hparams import api_pb2
    from torch.utils.tensorboard.summary import hparams

    _, _, end = hparams({}, {})
    # HParams knows success and failure: an interrupted run did not finish.
    done = status in ("finished", "upload-failed")
    code = api_pb2.STATUS_SUCCESS if done else api_pb2.STATUS_FAILURE
    return _with_status(end, code)


def _with_status(summary: Any, code: int) -> Any:
    from tensorboard.plugins.hparams import plugin_data_pb2

    value = summary.value[0]
    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
    data.session_end_info.status = code
    value.metadata.plugin_data.content = data.SerializeToString()
    return summary
