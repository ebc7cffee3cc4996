"""TensorBoard, read back with TensorBoard's own readers: run named after the run folder,
the CSV's names, steps, values and wall times, epoch scalars at the global step, HParams
sessions, results logged after the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from logger_runs import csv_series, tracked_run


def test_tensorboard_reads_back_what_metrics_csv_says(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    exp = tracked_run(tmp_path, ("csv", "tensorboard"))
    mux = EventMultiplexer()
    mux.AddRunsFromDirectory(str(tmp_path / "proj"))
    mux.Reload()
    assert list(mux.Runs()) == [exp.run_dir.name], "the run is named after its folder"
    acc = mux.GetAccumulator(exp.run_dir.name)
    csv = csv_series(exp.run_dir)
    tags = set(acc.Tags()["scalars"])
    assert tags == set(csv) | {"epoch", "test/accuracy", "test/per_class/a"}
    for name, points in csv.items():
        events = acc.Scalars(name)
        assert [e.step for e in events] == [s for s, _, _ in points], name
        assert [e.value for e in events] == pytest.approx([v for _, v, _ in points], rel=1e-6)
        assert [e.wall_time for e in events] == pytest.approx([t for *_, t in points], abs=2e-3)
    assert len({e.wall_time for e in acc.Scalars("train_loss")}) == 12, "one time per step"
    assert [e.step for e in acc.Scalars("eval_loss_epoch")] == [6, 12]  # the global step
    assert [(e.step, e.value) for e in acc.Scalars("epoch")] == [(6, 1.0), (12, 2.0)]
    assert [e.value for e in acc.Scalars("test/accuracy")] == [0.75]

    content = acc.PluginTagToContent("hparams")
    data = {tag: plugin_data_pb2.HParamsPluginData.FromString(c) for tag, c in content.items()}
    start = data["_hparams_/session_start_info"].session_start_info.hparams
    assert start["lr"].number_value == 0.2 and start["width"].number_value == 16
    assert start["note"].string_value == "baseline"
    assert start["layers"].string_value == "[16, 8]" and start["seed"].string_value == "None"
    assert start["optimizer"].string_value == "SGD"
    assert start["optimizer.lr"].number_value == 0.2
    assert start["batch_size"].number_value == 16 and start["precision"].string_value
    assert "is_local_process_zero" not in start and "capturable" not in start
    end = data["_hparams_/session_end_info"].session_end_info
    assert end.status == api_pb2.STATUS_SUCCESS


@pytest.mark.parametrize("counter", [0, 9, 99])
def test_a_resumed_run_replaces_the_steps_after_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counter: int
) -> None:
    # TensorBoard reads a folder's event files in name order: two files made in the same
    # second by one process were ordered by their counter as text (".10" before ".9"), so
    # the purge marker came first and the old steps stayed (a failure that came and went
    # with how many trackers the process had made before).
    import itertools

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from scramjet.tracking.loggers import tensorboard
    from scramjet.tracking.loggers.base import MetricRow
    from scramjet.tracking.loggers.tensorboard import TensorBoardTracker

    monkeypatch.setattr(tensorboard, "_FILE_NUMBERS", itertools.count(counter))

    def rows(steps: range, value: float) -> list[MetricRow]:
        return [
            MetricRow(scope="step", step=s, epoch=1, time=1000.0 + s, metrics={"loss": value})
            for s in steps
        ]

    first = TensorBoardTracker(tmp_path)
    first.log_metrics(rows(range(1, 11), 1.0))  # crashed after step 10, checkpoint at 5
    first.close()
    resumed = TensorBoardTracker(tmp_path)
    resumed.truncate(5, 1)
    resumed.log_metrics(rows(range(6, 9), 2.0))
    resumed.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [
        *[(s, 1.0) for s in range(1, 6)],
        *[(s, 2.0) for s in range(6, 9)],
    ]


@pytest.mark.parametrize("step", [0, 5, 127, 128, 300_000, 2**40])
def test_direct_scalar_events_are_the_bytes_protobuf_writes(tmp_path: Path, step: int) -> None:
    """Per-step rows skip building protobuf messages; the records must still be exactly
    TensorBoard's, and the files readable by its own record reader (checksums included)."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from scramjet.tracking.loggers.tensorboard import EventFile

    values = {"train_loss": 0.25, "lr": 1e-3, "a" * 200: -7.5, "ünïcode/x": 3.0, "zero": 0.0}
    expected = Event(
        wall_time=1_700_000_000.123456,
        step=step,
        summary=Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()]),
    ).SerializeToString()
    events = EventFile(tmp_path)
    events.add_scalars(values, step, 1_700_000_000.123456)
    record = events._pending[-1]
    assert record[12:-4] == expected
    assert record[8:12] == masked_crc32c(record[:8]).to_bytes(4, "little")
    assert record[-4:] == masked_crc32c(expected).to_bytes(4, "little")
    events.close()
    read = list(RawEventFileLoader(str(events.path)).Load())
    assert len(read) == 2 and read[1] == expected  # the file-version event, then ours
