"""A Hugging Face user's checks: does a ``transformers`` model train and score correctly?

Models come from tiny configs and a word-level tokenizer is trained on in-memory text, so
nothing is downloaded. What is checked:

- Result packages score each prediction against its own target when the collate function
  pads on the left (decoder-only models, ``padding_side="left"``) or makes the targets
  itself (``DataCollatorForLanguageModeling``'s ``labels``), also on two processes, where
  each rank batches its own share (slow); a ``return_dict=False`` model's tuple is scored by
  its logits.
- A ``loss_func`` that the model's own loss leaves unused is named in one warning.
- Text metrics given a model's output or token ids say what they received and to decode.
- A dataset with ``__getitem__`` and ``__len__`` but no ``Dataset`` base trains, as a
  DataLoader would read it.
- ``PerplexityResults(shift_labels=True)`` scores a causal language model's logits at ``t``
  against the token at ``t + 1``, as the model's own loss does (also through ``evaluate``);
  without it, such a model's output is scored unshifted with a warning that says so.
"""

from __future__ import annotations

import warnings
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
    BertForTokenClassification,
    DataCollatorForLanguageModeling,
    DataCollatorForSeq2Seq,
    DataCollatorForTokenClassification,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
)

from scramjet import Trainer
from scramjet.metrics import (
    BleuResults,
    ClassificationResults,
    PerplexityResults,
    QAResults,
    RougeResults,
)


def tagged(tok: PreTrainedTokenizerFast, n: int) -> list[dict[str, Any]]:
    """Token classification samples: tag 1 on 'cat' and 'dog', lists of different lengths."""
    animals = {tok.convert_tokens_to_ids(w) for w in ("cat", "dog")}
    data = []
    for text in sentences(n):
        enc = tok(text)
        ids = enc["input_ids"]
        data.append(
            {
                "input_ids": ids,
                "attention_mask": enc["attention_mask"],
                "labels": [int(i in animals) for i in ids],
            }
        )
    return data


def tiny_bert_tagger(vocab: int, seed: int = 0) -> BertForTokenClassification:
    config = BertConfig(
        vocab_size=vocab, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32, num_labels=2,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return BertForTokenClassification(config)


def tiny_gpt2(vocab: int, seed: int = 0) -> GPT2LMHeadModel:
    config = GPT2Config(
        vocab_size=vocab, n_positions=32, n_embd=16, n_layer=1, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return GPT2LMHeadModel(config)


def plain_trainer(model: torch.nn.Module, loss_func: Any = None) -> Trainer:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return Trainer(model, loss_func, optimizer, callbacks=[])


# ------------------------------------------------------------------ result packages
def test_result_package_scores_left_padded_predictions_against_their_own_targets() -> None:
    tok = word_tokenizer(padding_side="left")
    data = tagged(tok, 20)
    collate = DataCollatorForTokenClassification(tok)
    model = tiny_bert_tagger(len(tok))
    trainer = plain_trainer(model)

    scored = ClassificationResults().evaluate(
        trainer, data, per_device_batch_size=8, collate_fn=collate
    )

    correct = total = 0
    model.eval()
    for start in range(0, len(data), 8):
        batch = collate(data[start : start + 8])
        labels = batch.pop("labels")
        with torch.no_grad():
            predicted = model(**batch).logits.argmax(-1)
        scored_positions = labels != -100
        correct += int((predicted[scored_positions] == labels[scored_positions]).sum())
        total += int(scored_positions.sum())
    assert scored["accuracy"] == pytest.approx(correct / total)
    assert sum(map(sum, scored["confusion_matrix"])) == total


def test_result_package_reads_targets_the_collate_function_makes() -> None:
    tok = word_tokenizer()
    data = [{"input_ids": tok(text)["input_ids"]} for text in sentences(12)]  # no labels
    collate = DataCollatorForLanguageModeling(tok, mlm=False)
    model = tiny_gpt2(len(tok))
    trainer = plain_trainer(model)
    trainer.train(data, num_epochs=1, per_device_batch_size=4, collate_fn=collate)

    scored = PerplexityResults(shift_labels=True).evaluate(trainer, data, per_device_batch_size=4)

    output = trainer.predict(data, per_device_batch_size=4)
    labels = torch.full(output.logits.shape[:2], -100)
    for start in range(0, len(data), 4):
        batch_labels = collate(data[start : start + 4])["labels"]
        labels[start : start + 4, : batch_labels.shape[1]] = batch_labels
    expected = PerplexityResults(shift_labels=True).compute(output.logits, labels)
    assert scored["perplexity"] == pytest.approx(expected["perplexity"], rel=1e-5)


def test_perplexity_of_a_causal_lm_scores_each_position_against_the_next_token() -> None:
    tok = word_tokenizer()
    data = [{"input_ids": tok(text)["input_ids"]} for text in sentences(12)]
    collate = DataCollatorForLanguageModeling(tok, mlm=False)
    model = tiny_gpt2(len(tok))
    trainer = plain_trainer(model)
    trainer.train(data, num_epochs=1, per_device_batch_size=12, collate_fn=collate)

    package = PerplexityResults(shift_labels=True)
    scored = package.evaluate(trainer, data, per_device_batch_size=12)

    model.eval()
    with torch.no_grad():  # one batch: the model's own loss is the mean over every token
        own_loss = model(**collate(data)).loss
    assert scored["perplexity"] == pytest.approx(float(own_loss.exp()), rel=1e-4)
    output = trainer.predict(data, per_device_batch_size=12)
    labels = collate(data)["labels"]
    assert package.compute(output.logits, labels)["perplexity"] == (
        pytest.approx(scored["perplexity"], rel=1e-6)
    )
    with pytest.warns(UserWarning, match=r"shift_labels=True"):
        unshifted = PerplexityResults().compute(output, labels)  # a CausalLMOutput...
    assert unshifted["perplexity"] != pytest.approx(scored["perplexity"], rel=1e-2)


def test_result_package_scores_the_logits_of_a_return_dict_false_model() -> None:
    config = BertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, num_labels=2, return_dict=False,
    )  # fmt: skip
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    ids = torch.randint(4, 32, (20, 8))
    labels = (ids == 7).any(dim=1).long()
    data = [{"input_ids": i, "labels": y} for i, y in zip(ids, labels)]
    trainer = plain_trainer(model)

    scored = ClassificationResults().evaluate(trainer, data, per_device_batch_size=8)

    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids)[0]  # (logits,): a tuple
    assert scored == ClassificationResults()(logits, labels)
    with torch.no_grad():  # (loss, logits): the logits are scored, not the loss
        with_loss = model(input_ids=ids, labels=labels)
    assert ClassificationResults()(with_loss, labels) == scored


# ------------------------------------------------------------------ the loss that is trained on
def test_a_loss_func_left_unused_by_the_models_own_loss_is_named_in_one_warning() -> None:
    config = BertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, num_labels=3,
    )  # fmt: skip
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    ids = torch.randint(4, 32, (16, 8))
    weighted = torch.nn.CrossEntropyLoss(weight=torch.tensor([10.0, 1.0, 1.0]))
    with_labels = [{"input_ids": i, "labels": int(i[0] % 3)} for i in ids]
    trainer = plain_trainer(model, weighted)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(with_labels, num_epochs=2, per_device_batch_size=4)
    unused = [w for w in caught if "loss_func CrossEntropyLoss is not used" in str(w.message)]
    assert len(unused) == 1, [str(w.message) for w in caught]
    assert "'targets'" in str(unused[0].message) and "loss_func=None" in str(unused[0].message)
    assert unused[0].filename == __file__

    # the way out it names: targets under 'targets' are scored by loss_func, unweighted no more
    with_targets = [{"input_ids": i, "targets": int(i[0] % 3)} for i in ids]
    trainer = plain_trainer(model, weighted)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer.evaluate(with_targets, per_device_batch_size=16)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    expected = weighted(logits, torch.tensor([int(i[0] % 3) for i in ids]))
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") == pytest.approx(
        float(expected), rel=1e-5
    )


# ------------------------------------------------------------------ datasets
class ColumnRows:
    """A column store read by row, as dataset libraries offer: ``__getitem__`` and
    ``__len__``, no ``torch.utils.data.Dataset`` base and no ``__iter__``."""

    def __init__(self, columns: dict[str, Any]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {name: values[index] for name, values in self.columns.items()}


def test_a_dataset_with_getitem_and_len_but_no_dataset_base_trains() -> None:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, num_labels=2,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    ids = torch.randint(4, 32, (16, 8))
    rows = ColumnRows({"input_ids": list(ids), "labels": [int((i == 7).any()) for i in ids]})
    trainer = plain_trainer(model)
    trainer.train(rows, num_epochs=1, per_device_batch_size=8, eval_dataset=rows)
    assert len(trainer.run_history.get_metric_values("eval_loss_epoch")) == 1
    assert trainer.predict(rows).logits.shape == (16, 2)


# ------------------------------------------------------------------ text metrics
def test_text_metrics_given_a_models_output_say_what_they_received_and_to_decode() -> None:
    tok = word_tokenizer()
    data = [{**tok(text), "labels": tok(text)["input_ids"]} for text in sentences(6)]
    collate = DataCollatorForSeq2Seq(tok)
    config = T5Config(
        vocab_size=len(tok), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
        pad_token_id=0, decoder_start_token_id=0,
    )  # fmt: skip
    trainer = plain_trainer(T5ForConditionalGeneration(config))
    texts = sentences(6)
    for package in (BleuResults(), RougeResults(), QAResults()):
        with pytest.raises(TypeError, match=r"received Seq2SeqLMOutput.*batch_decode"):
            package.evaluate(trainer, data, per_device_batch_size=3, collate_fn=collate)
        with pytest.raises(TypeError, match=r"y_true.*received Tensor of shape \(6, 4\)"):
            package.compute(texts, torch.zeros(6, 4, dtype=torch.long))
        with pytest.raises(TypeError, match=r"received one str"):
            package.compute(texts[0], [texts[0]])
    assert RougeResults().compute(texts, [[t] for t in texts])["rouge1_f1"] == 1.0


# ------------------------------------------------------------------ two processes
LEFT_PADDED_JOB = """
import json, sys
import torch
from scramjet import Trainer
from scramjet.metrics import ClassificationResults
from scramjet.runtime import distributed as dist

class Echo(torch.nn.Module):  # token logits [-x, x]: class 1 where the token id is odd
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))
    def forward(self, input_ids):
        x = (input_ids % 2).float() * 2 - 1
        return {"logits": torch.stack([-x, x], dim=-1) * self.w}

def collate(samples):  # pads on the LEFT to the batch's longest, labels with -100
    width = max(len(s["input_ids"]) for s in samples)
    pad = [width - len(s["input_ids"]) for s in samples]
    return {
        "input_ids": torch.tensor([[2] * p + s["input_ids"] for p, s in zip(pad, samples)]),
        "labels": torch.tensor([[-100] * p + s["labels"] for p, s in zip(pad, samples)]),
    }

# lengths differ within every rank's batches; every label is right for its own token
data = []
for i in range(7):
    ids = [2 * i + 1 + k for k in range(1 + i % 4)]
    data.append({"input_ids": ids, "labels": [t % 2 for t in ids]})
model = Echo()
trainer = Trainer(model, None, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])
scored = ClassificationResults().evaluate(trainer, data, per_device_batch_size=2, collate_fn=collate)
if dist.get_rank() == 0:
    with open(sys.argv[1], "w") as f:
        json.dump(scored, f)
"""


@pytest.mark.distributed
@pytest.mark.slow
def test_result_package_on_two_processes_aligns_left_padded_targets(tmp_path: Any) -> None:
    import json

    from tests.common.torchrun import run_torchrun

    job, out = tmp_path / "job.py", tmp_path / "out.json"
    job.write_text(LEFT_PADDED_JOB)
    done = run_torchrun(job, str(out), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    scored = json.loads(out.read_text())
    tokens = sum(1 + i % 4 for i in range(7))
    assert scored["accuracy"] == 1.0
    assert sum(map(sum, scored["confusion_matrix"])) == tokens
