"""Hugging Face models the way their users bring them, beyond ``test_hf_models.py``.

Models are built from tiny configs and a word-level tokenizer is trained on in-memory
text, so nothing is downloaded. What is checked:

- ``predict`` over batches padded per batch (``DataCollatorForLanguageModeling``) joins
  outputs whose sequence dimension differs: padded to the longest with -100, each row equal
  to calling the model on its batch.
- A model built with ``return_dict=False`` returns ``(loss, logits, ...)`` when given
  ``labels``: that loss is trained on and evaluated, and a ``loss_func`` never sees the
  loss as if it were logits; without ``labels`` (and no ``loss_func``) the error says
  the batch needs them.
- ``predict`` builds no key/value cache (Hugging Face models keep one in their output
  unless told ``use_cache=False``), so none is held for every batch.
- ``predict`` on an encoder-decoder model (T5) with ``labels`` in the batch gives the
  teacher-forced logits, as the model computes them from the labels.
- Result packages take a Hugging Face output (its ``logits``) and dict samples (their
  ``labels``), with a ``collate_fn`` for samples of different lengths.
- ``Experiment(hyperparams=config)`` with a ``PretrainedConfig`` records its fields.
- ``predict`` on two processes whose batches are padded to different lengths on each rank
  (slow).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tests.common.hf_text import (
    quiet_transformers,  # noqa: F401  (autouse fixture)
    sentences,
    word_tokenizer,
)
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DataCollatorForLanguageModeling,
    DataCollatorForSeq2Seq,
    DataCollatorWithPadding,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
)

from scramjet import Trainer
from scramjet.metrics import ClassificationResults, PerplexityResults


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    return word_tokenizer()


def encoded(tokenizer: PreTrainedTokenizerFast, n: int, seed: int = 0) -> list[dict[str, Any]]:
    return [
        {"input_ids": e["input_ids"], "attention_mask": e["attention_mask"]}
        for e in (tokenizer(s) for s in sentences(n, seed))
    ]


def gpt2(vocab: int, seed: int = 0) -> GPT2LMHeadModel:
    config = GPT2Config(
        vocab_size=vocab, n_positions=32, n_embd=16, n_layer=1, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return GPT2LMHeadModel(config)


def trainer_for(model: torch.nn.Module, loss_func: Any = None) -> Trainer:
    return Trainer(model, loss_func, torch.optim.AdamW(model.parameters(), lr=1e-3), callbacks=[])


# ------------------------------------------------------------------ predict, dynamic padding
def test_predict_joins_batches_padded_to_different_lengths(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    data = encoded(tokenizer, 10)
    collate = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    model = gpt2(len(tokenizer))
    predicted = trainer_for(model).predict(data, per_device_batch_size=4, collate_fn=collate)
    longest = max(len(d["input_ids"]) for d in data)
    assert predicted.logits.shape == (10, longest, len(tokenizer))
    model.eval()
    with torch.no_grad():
        for start in range(0, 10, 4):
            batch = collate(data[start : start + 4])
            direct = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            width = batch["input_ids"].shape[1]
            rows = predicted.logits[start : start + 4]
            torch.testing.assert_close(rows[:, :width], direct.logits)
            assert (rows[:, width:] == -100).all()


def test_predict_keeps_no_key_value_cache_per_batch(tokenizer: PreTrainedTokenizerFast) -> None:
    ids = torch.randint(5, len(tokenizer), (12, 6), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": row, "labels": row} for row in ids]
    predicted = trainer_for(gpt2(len(tokenizer))).predict(data, per_device_batch_size=4)
    assert predicted.logits.shape == (12, 6, len(tokenizer))
    cache = [v for k, v in predicted.items() if k != "logits"]
    assert cache == [], f"predict kept {[type(c).__name__ for c in cache]} besides the logits"


# ------------------------------------------------------------------ return_dict=False
def tuple_bert() -> BertForSequenceClassification:
    config = BertConfig(
        vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, num_labels=2, return_dict=False,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return BertForSequenceClassification(config)


def token_data(n: int = 24) -> tuple[list[dict[str, torch.Tensor]], torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 20, (n, 8), generator=g)
    labels = (ids == 7).any(dim=1).long()
    return [{"input_ids": i, "labels": y} for i, y in zip(ids, labels)], ids, labels


def test_tuple_output_with_labels_trains_and_evaluates_on_its_own_loss() -> None:
    model = tuple_bert()
    data, ids, labels = token_data()
    trainer = trainer_for(model)
    trainer.train(data, num_epochs=1, per_device_batch_size=8)
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 1
    trainer.evaluate(data, per_device_batch_size=8)
    model.eval()
    with torch.no_grad():
        direct = model(input_ids=ids, labels=labels)[0]
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") == pytest.approx(
        float(direct), rel=1e-5
    )
    predicted = trainer.predict(data, per_device_batch_size=8)  # labels left out: (logits,)
    assert isinstance(predicted, tuple) and predicted[0].shape == (24, 2)


def test_tuple_output_loss_is_not_passed_to_loss_func_as_logits() -> None:
    model = tuple_bert()
    data, _, _ = token_data()
    seen: list[tuple[int, ...]] = []

    def loss_func(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        seen.append(tuple(logits.shape))
        return torch.nn.functional.cross_entropy(logits, targets)

    trainer = trainer_for(model, loss_func)
    with pytest.warns(UserWarning, match="returned its own 'loss'"):
        trainer.train(data, num_epochs=1, per_device_batch_size=8)
    assert seen == [], "the model's own loss (first element) is the loss, as with ModelOutput"


def test_missing_labels_error_says_the_model_needs_labels() -> None:
    model = tuple_bert()
    data = [{"input_ids": d["input_ids"]} for d in token_data(8)[0]]
    with pytest.raises(TypeError) as error:
        trainer_for(model).train(data, num_epochs=1, per_device_batch_size=4)
    message = str(error.value)
    assert "tuple" in message and "'labels'" in message and "loss_func" in message


# ------------------------------------------------------------------ encoder-decoder predict
def test_seq2seq_predict_gives_teacher_forced_logits_from_labels() -> None:
    config = T5Config(
        vocab_size=20, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
        decoder_start_token_id=0, pad_token_id=0, dropout_rate=0.0,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = T5ForConditionalGeneration(config)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, 20, (6, 5), generator=g)
    data = [{"input_ids": i, "labels": i.flip(0)} for i in ids]
    predicted = trainer_for(model).predict(data, per_device_batch_size=4)
    model.eval()
    with torch.no_grad():
        direct = model(input_ids=ids, labels=ids.flip(1)).logits
    torch.testing.assert_close(predicted.logits, direct)


# ------------------------------------------------------------------ result packages
def bert(num_labels: int = 3) -> BertForSequenceClassification:
    config = BertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, num_labels=num_labels,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return BertForSequenceClassification(config)


def test_result_package_takes_a_hf_output_and_dict_samples() -> None:
    model = bert()
    data, ids, _ = token_data(20)
    labels = torch.arange(20) % 3
    data = [{**d, "labels": y} for d, y in zip(data, labels)]
    trainer = trainer_for(model)
    results = ClassificationResults(3).evaluate(trainer, data, per_device_batch_size=8)
    model.eval()
    with torch.no_grad():
        expected = (model(input_ids=ids).logits.argmax(1) == labels).float().mean()
    assert results["accuracy"] == pytest.approx(float(expected))
    predicted = trainer.predict(data, per_device_batch_size=8)
    assert ClassificationResults(3)(predicted, labels)["accuracy"] == results["accuracy"]


def test_result_package_evaluate_uses_the_collate_fn(tokenizer: PreTrainedTokenizerFast) -> None:
    model = bert(num_labels=2)
    data = [{**d, "labels": i % 2} for i, d in enumerate(encoded(tokenizer, 10))]
    trainer = trainer_for(model)
    collate = DataCollatorWithPadding(tokenizer)
    results = ClassificationResults(2).evaluate(
        trainer, data, per_device_batch_size=4, collate_fn=collate
    )
    predicted = trainer.predict(data, per_device_batch_size=4, collate_fn=collate)
    labels = torch.tensor([d["labels"] for d in data])
    assert results == ClassificationResults(2)(predicted.logits, labels)


def test_perplexity_package_pads_targets_of_different_lengths(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    data = encoded(tokenizer, 6)
    data = [{**d, "labels": d["input_ids"]} for d in data]
    collate = DataCollatorForSeq2Seq(tokenizer)  # labels padded with -100
    trainer = trainer_for(gpt2(len(tokenizer)))
    got = PerplexityResults(ignore_index=-100, shift_labels=False).evaluate(
        trainer, data, per_device_batch_size=4, collate_fn=collate
    )["perplexity"]
    predicted = trainer.predict(data, per_device_batch_size=4, collate_fn=collate).logits
    losses, count = 0.0, 0
    for row, d in zip(predicted, data):
        target = torch.tensor(d["labels"])
        losses += float(
            torch.nn.functional.cross_entropy(row[: len(target)], target, reduction="sum")
        )
        count += len(target)
    assert got == pytest.approx(float(torch.exp(torch.tensor(losses / count))), rel=1e-4)


# ------------------------------------------------------------------ tracking
def test_experiment_takes_a_hf_config_as_hyperparams(tmp_path: Any) -> None:
    from scramjet.tracking import Experiment

    config = BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1)
    exp = Experiment("hf", "bert", root=tmp_path, hyperparams=config)
    assert exp.hyperparams["hidden_size"] == 16
    assert exp.hyperparams["num_hidden_layers"] == 1


# ------------------------------------------------------------------ two processes
PREDICT_JOB = """
import json, sys
import torch
from scramjet import Trainer
from scramjet.runtime import distributed as dist

class Echo(torch.nn.Module):  # a token model: one row of logits per position
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))
    def forward(self, input_ids):
        return {"logits": input_ids.float()[..., None] * self.w}

def collate(samples):  # pads each batch to its own longest sequence, as HF collators do
    width = max(len(s["input_ids"]) for s in samples)
    ids = [s["input_ids"] + [0] * (width - len(s["input_ids"])) for s in samples]
    return {"input_ids": torch.tensor(ids)}

# rank 0 (samples 0, 2, 4) holds sequences of 2 tokens, rank 1 (1, 3, 5) of 5
data = [{"input_ids": [i + 1] * (2 if i % 2 == 0 else 5)} for i in range(6)]
model = Echo()
trainer = Trainer(model, None, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])
out = trainer.predict(data, per_device_batch_size=3, collate_fn=collate)["logits"]
if dist.get_rank() == 0:
    with open(sys.argv[1], "w") as f:
        json.dump(out[..., 0].tolist(), f)
"""


@pytest.mark.distributed
@pytest.mark.slow
def test_predict_on_two_processes_joins_sequences_of_different_lengths(tmp_path: Any) -> None:
    import json

    from tests.common.torchrun import run_torchrun

    job, out = tmp_path / "job.py", tmp_path / "out.json"
    job.write_text(PREDICT_JOB)
    done = run_torchrun(job, str(out), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())
    expected = [[i + 1] * (2 if i % 2 == 0 else 5) + [-100] * (0 if i % 2 else 3) for i in range(6)]
    assert rows == expected
