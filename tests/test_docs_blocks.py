"""Every ```python block of README.md and docs/*.md runs.

A block is either complete, and runs as a script exactly as written, or it is a fragment
marked on the line just before its fence::

    <!-- fragment: needs training-objects -->
    <!-- fragment: needs training-objects, own-loop -->

The script of a fragment starts with the named preludes (``PRELUDES`` below: the user
code the page leaves out, such as a model or a dataset); ``previous-block`` stands for the
python block before it on the same page. Every block runs in its own subprocess
(``sys.executable``, CPU only) in a fresh temporary folder, after the small files it reads
have been generated there. ``EXTRAS`` adds assertions after some blocks, an S3 server for
those that upload, the ``gpu`` marker for those that need GPUs and ``slow`` for those that
need a server or start several processes (``pytest -m slow`` runs them). The blocks run a
few at a time (``SCRAMJET_DOC_JOBS``, default 4), so the default run stays short on a
2-core machine.
"""

from __future__ import annotations

import ast
import builtins
import logging
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PREVIOUS = "previous-block"
BLOCK_TIMEOUT_S = 180
MARKER = re.compile(
    r"^<!--\s*fragment:\s*needs\s+(?P<names>[a-z0-9_-]+(?:\s*,\s*[a-z0-9_-]+)*)\s*-->$"
)
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>\S*)\s*$")


# ----------------------------------------------------------------------------- blocks
@dataclass(frozen=True)
class Block:
    page: str  # path relative to the repository root
    line: int  # 1-based line of the opening fence
    code: str
    needs: tuple[str, ...] = ()  # prelude names; empty for a complete block

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def parse_page(page: str, text: str) -> tuple[list[Block], list[str]]:
    """The python blocks of a page's text, and the problems with its fragment markers."""
    lines = text.splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    claimed: set[int] = set()  # lines of markers that sit right before a python fence
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            problems.append(f"{page}:{i + 1}: a code fence that is never closed")
            break
        if opening["lang"] == "python":
            needs: tuple[str, ...] = ()
            before = lines[i - 1].strip() if i else ""
            if marker := MARKER.match(before):
                needs = tuple(n.strip() for n in marker["names"].split(","))
                claimed.add(i - 1)
            indent = opening["indent"]
            body = [
                line[len(indent) :] if line.startswith(indent) else line
                for line in lines[i + 1 : end]
            ]
            blocks.append(Block(page, i + 1, "\n".join(body) + "\n", needs))
        i = end + 1
    for number, line in enumerate(lines):
        if "fragment:" in line and "<!--" in line and number not in claimed:
            problems.append(
                f"{page}:{number + 1}: {line.strip()!r} is not a marker the test reads: write "
                f"'<!-- fragment: needs NAME[, NAME] -->' on the line just before a ```python fence"
            )
    return blocks, problems


def all_blocks() -> tuple[list[Block], list[str]]:
    blocks: list[Block] = []
    problems: list[str] = []
    for path in PAGES:
        found, wrong = parse_page(path.relative_to(ROOT).as_posix(), path.read_text("utf-8"))
        blocks += found
        problems += wrong
    return blocks, problems


BLOCKS, MARKER_PROBLEMS = all_blocks()


def previous_block(block: Block) -> Block | None:
    same_page = [b for b in BLOCKS if b.page == block.page and b.line < block.line]
    return same_page[-1] if same_page else None


# ----------------------------------------------------------------------------- files
def make_photos(folder: Path) -> None:
    """photos/list.csv (image<TAB>label) and 24 JPEGs of 48 x 64 pixels, 3 classes."""
    import numpy as np
    from PIL import Image

    (folder / "photos" / "cat").mkdir(parents=True)
    rng = np.random.default_rng(0)
    rows = []
    for i in range(24):
        pixels = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / "photos" / "cat" / f"{i:03d}.jpg")
        rows.append(f"cat/{i:03d}.jpg\t{i % 3}\n")
    (folder / "photos" / "list.csv").write_text("image\tlabel\n" + "".join(rows))


FILES: dict[str, Callable[[Path], None]] = {"photos": make_photos}
# A block that names one of these files gets them generated, whatever else it needs.
FILE_TRIGGERS = {"photos/list.csv": "photos"}


# ----------------------------------------------------------------------------- preludes
@dataclass(frozen=True)
class Prelude:
    code: str
    files: tuple[str, ...] = ()  # keys of FILES the code reads


TRAINING_OBJECTS = """\
import torch
from torch import nn
from scramjet import DEFAULT_CALLBACKS, Trainer
from scramjet.callbacks import SaveTrainingStateCallback


def make_dataset(n, seed):  # 1 x 28 x 28 "images", labels a linear model can learn
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 28, 28, generator=g)
    return torch.utils.data.TensorDataset(x, x.flatten(1)[:, :10].argmax(1))


def build_model():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 10))


train_ds = train_data = data = make_dataset(128, 0)
val_ds = eval_ds = test_ds = make_dataset(33, 1)
model = build_model()
loss_func = loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
restarting = False  # e.g. from a --resume flag
"""

CHECKPOINT_STATE = """\
import torch
from torch import nn

model = nn.Sequential()
model.add_module("encoder", nn.Linear(8, 16))
model.add_module("head", nn.Linear(16, 2))
optimizer = opt = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = sched = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
step, epoch, total_steps = 0, 0, 2001
val_loss = v = 0.5
"""

PRELUDES: dict[str, Prelude] = {
    # model, loss_func/loss_fn, optimizer, train_ds/train_data/data, val_ds/eval_ds/test_ds,
    # build_model(), restarting; torch, nn, Trainer, DEFAULT_CALLBACKS, SaveTrainingStateCallback
    "training-objects": Prelude(TRAINING_OBJECTS),
    "trainer": Prelude(TRAINING_OBJECTS + "trainer = Trainer(model, loss_func, optimizer)\n"),
    # a model with an `encoder`, its optimizer and scheduler, a step, an epoch, a metric
    "checkpoint-state": Prelude(CHECKPOINT_STATE),
    "checkpoint-manager": Prelude(
        CHECKPOINT_STATE
        + "from scramjet.checkpoint import CheckpointManager\n\n"
        + 'manager = CheckpointManager("checkpoints")\n'
        + 'state = {"model": model, "optimizer": optimizer}\n'
    ),
    # a module-level function for launch() and its argument
    "train-fn": Prelude(
        textwrap.dedent("""\
        import torch
        from scramjet.runtime import get_rank, init_distributed, reduce


        def train_fn(cfg):
            init_distributed()
            return float(reduce(torch.tensor(float(get_rank()) * cfg["scale"]), "sum"))


        cfg = {"scale": 1.0}
        """)
    ),
    # your own training loop's pieces
    "own-loop": Prelude(
        textwrap.dedent("""\
        import random

        epochs, mpe, batch_size = 2, 5, 64
        train_step = evaluate = random.random
        """)
    ),
    # image files and their labels
    "image-files": Prelude(
        textwrap.dedent("""\
        from pathlib import Path

        paths = sorted(str(p) for p in Path("photos").rglob("*.jpg"))
        labels = [i % 3 for i in range(len(paths))]
        """),
        files=("photos",),
    ),
    # a Dataset class, an instance of it and a random augmentation of its samples
    "dataset-class": Prelude(
        textwrap.dedent("""\
        import torch


        class Images(torch.utils.data.Dataset):
            def __len__(self):
                return 16

            def __getitem__(self, i):
                return torch.full((3, 8, 8), float(i)), i % 2


        def random_flip(sample):
            image, label = sample
            return (image.flip(-1) if torch.rand(()) < 0.5 else image), label


        dataset = Images()
        """)
    ),
    # an accelerated model and one batch of a hand-written loop
    "accelerated-step": Prelude(
        textwrap.dedent("""\
        import torch
        from scramjet.accel import accelerate_model

        model = accelerate_model(torch.nn.Linear(8, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loss_fn = torch.nn.functional.cross_entropy
        x, y = torch.randn(4, 8), torch.tensor([0, 1, 0, 1])
        """)
    ),
    # the loss of a training step
    "loss": Prelude("import torch\n\nloss = torch.tensor(0.25)\n"),
    # a dataset of 33 samples, a model and the device
    "eval-data": Prelude(
        textwrap.dedent("""\
        import torch
        from torch.utils.data import DataLoader
        from scramjet.runtime import default_device, eval_sampler, gather_for_metrics

        device = default_device()
        dataset = torch.randn(33, 4)
        model = torch.nn.Linear(4, 2).to(device)
        """)
    ),
}


# ----------------------------------------------------------------------------- extras
@dataclass(frozen=True)
class Extra:
    """What one block needs beyond its preludes, found by a snippet of its code."""

    page: str
    snippet: str
    s3: bool = False  # an S3 server with the bucket "my-bucket", AWS_* variables set
    gpus: int = 0  # CUDA devices it needs (marked gpu; skipped where fewer are present)
    slow: bool = False  # a service or several processes: run with -m slow
    check: str = ""  # appended to the script
    stdout: tuple[str, ...] = ()  # lines the run must print


EXTRAS = [
    Extra(
        "README.md",
        'precision="bf16"',
        check="""\
assert len(logits) == len(val_ds) == 33
assert len(trainer.run_history.get_metric_values("eval_loss_epoch")) == 8
""",
    ),
    Extra(
        "README.md",
        "class MyTrainer(Trainer):",
        check="""\
class Pairs(torch.utils.data.Dataset):  # dict samples, as the hook expects
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return {"image": train_ds[i][0], "label": train_ds[i][1]}


trainer = MyTrainer(model, loss_func, optimizer, callbacks=[])
trainer.train(Pairs(), num_epochs=1, per_device_batch_size=4)
assert trainer.state.global_step == 4
""",
    ),
    Extra(
        "README.md",
        "class PrintEveryUpdate(TrainerCallback):",
        check="""\
import torch
from scramjet import Trainer

model = torch.nn.Linear(4, 2)
data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.arange(16) % 2)
trainer = Trainer(model, torch.nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1),
                  callbacks=[PrintEveryUpdate()])
trainer.train(data, num_epochs=1, max_num_train_steps=200, per_device_batch_size=1)
""",
        stdout=("100", "200"),
    ),
    Extra(
        "README.md",
        "partial(OneCycleLR",
        check="assert isinstance(trainer.scheduler, OneCycleLR)\n",
    ),
    Extra(
        "README.md",
        'resume_from="ckpt"',
        check="""\
from pathlib import Path

assert sorted(Path("ckpt").glob("*.pt")), "checkpoints were written"
assert trainer.state.global_step == 10 * 16
""",
    ),
    Extra(
        "README.md",
        'scope="encoder"',
        check="assert manager.latest_path is not None and manager.best_path is not None\n",
    ),
    Extra(
        "README.md",
        "result = launch(train_fn",
        slow=True,
        check='if __name__ == "__main__":\n    assert result == 1.0, result\n',
    ),
    Extra("README.md", "select_gpus(2", gpus=2),
    Extra("README.md", "shard_model(build_model())", check="assert len(preds) == len(test_ds)\n"),
    Extra("README.md", "@accelerate_model()", check="assert Net.__name__ == 'Net'\n"),
    Extra(
        "README.md",
        'pack("photos"',
        check="assert tuple(images.shape[1:]) == (3, 224, 224) and len(labels) == 24\n",
    ),
    Extra(
        "README.md",
        "def to_xy(samples):",
        check="""\
import math

history = trainer.run_history.get_metric_values("train_loss_epoch")
assert len(history) == 10 and all(math.isfinite(v) for v in history)
assert train.epoch == 9  # the Trainer moved the augmentations' epoch
""",
    ),
    Extra(
        "README.md",
        "ClassificationResults().evaluate",
        s3=True,
        slow=True,
        check="""\
assert (exp.run_dir / "report.html").is_file()
assert exp.upload_report is not None and exp.upload_report.ok, exp.upload_report
""",
    ),
    Extra(
        "README.md",
        'Dashboard(log_path="./aerolog/trainer", window=5, span=60)',
        check="""\
from pathlib import Path

for folder in ("aerolog/trainer", "aerolog/own-loop"):
    assert {"loss.png", "loss.csv"} <= {p.name for p in Path(folder).iterdir()}, folder
assert not Path("aerolog/loss.csv").exists(), "the two halves write to separate folders"
""",
    ),
    Extra(
        "docs/acceleration.md",
        "recover_backward(model, exc)",
        check="assert all(p.grad is not None for p in model.parameters())\n",
    ),
    Extra(
        "docs/acceleration.md",
        "class CachedImages(Images)",
        check="""\
assert len(ds) == len(CachedImages()) == 16
assert ds[3][1] == CachedImages()[3][1] == 1
""",
    ),
    Extra(
        "docs/checkpoint.md",
        'monitor="val_loss", mode="min"',
        check="assert len(manager.checkpoints()) == 3  # steps 0, 1000, 2000 (keep_last=3)\n",
    ),
    Extra("docs/checkpoint.md", "barrier()", check="assert manager.latest_path is not None\n"),
    Extra(
        "docs/dashboard.md",
        'record="runs.txt"',
        check='from pathlib import Path\n\nassert Path("aerolog/runs.txt").is_file()\n',
    ),
    Extra(
        "docs/data.md",
        "Compose(Flip(), Crop(), seed=0)",
        check="assert tuple(images.shape[1:]) == (224, 224, 3) and len(labels) == 24\n",
    ),
    Extra("docs/distributed.md", "# train.py", stdout=("rank 0 of 1: loss 0.2500",)),
    Extra(
        "docs/distributed.md",
        "gather_for_metrics(preds",
        check="assert all_preds.shape == (33, 2)\n",
    ),
    Extra(
        "docs/distributed.md",
        'save_checkpoint("big.pt")',
        check='from pathlib import Path\n\nassert Path("big.pt").is_file()\n',
    ),
    Extra(
        "docs/distributed.md",
        "def work(scale):",
        slow=True,
        check='if __name__ == "__main__":\n    assert total == 10.0, total\n',
    ),
    Extra(
        "docs/resume.md",
        '"runs/exp1/checkpoints", every_n_steps=500, keep_last=3',
        check="assert trainer.state.global_step == 10 * 2\n",
    ),
    Extra(
        "docs/tracking.md",
        'Experiment("mnist", "mlp", root="runs"',
        check="assert (exp.run_dir / 'report.html').is_file()\n",
    ),
    Extra(
        "docs/tracking.md",
        'storage="s3://my-bucket/experiments"',
        s3=True,
        slow=True,
        check="Trainer(model, loss_func, optimizer, callbacks=[exp]).train(train_ds, num_epochs=1)\n",
        stdout=("uploaded and verified: s3://my-bucket/experiments/mnist/",),
    ),
    Extra(
        "docs/streaming.md",
        "ds = PackedDataset(url, cache_dir=",
        check="assert ds._pins == {} and ds.downloaded_bytes() > 0\n",
        stdout=("8 True 1", "[0, 0, 0, 0, 1, 1, 1, 1]"),
    ),
]


def extra_for(block: Block) -> Extra:
    found = [e for e in EXTRAS if e.page == block.page and e.snippet in block.code]
    return found[0] if found else Extra(block.page, "")


# ----------------------------------------------------------------------------- scripts
class UnknownPrelude(KeyError):
    pass


def prelude_chain(block: Block) -> tuple[list[str], set[str]]:
    """The code to run before ``block`` (in order) and the FILES keys it all reads."""
    codes: list[str] = []
    files = {key for trigger, key in FILE_TRIGGERS.items() if trigger in block.code}
    for name in block.needs:
        if name == PREVIOUS:
            before = previous_block(block)
            if before is None:
                raise UnknownPrelude(f"{block.id}: no python block before it on the page")
            more, more_files = prelude_chain(before)
            codes += [*more, before.code]
            files |= more_files
        elif name in PRELUDES:
            codes.append(PRELUDES[name].code)
            files |= set(PRELUDES[name].files)
        else:
            raise UnknownPrelude(
                f"{block.id}: no prelude named {name!r}; known: {sorted(PRELUDES)}"
            )
    return codes, files


def script_for(block: Block) -> tuple[str, int]:
    """The script's text and the script line on which the block's code starts."""
    codes, _ = prelude_chain(block)
    head = "".join(f"{code}\n" for code in codes) + f"# ---- {block.id}\n"
    check = extra_for(block).check
    tail = f"# ---- checks of {block.id}\n{check}" if check else ""
    return head + block.code + tail, head.count("\n") + 1


# ----------------------------------------------------------------------------- static checks
ALWAYS_DEFINED = set(dir(builtins)) | {"__name__", "__file__"}


def names(code: str) -> tuple[set[str], set[str]]:
    """(names the code binds anywhere, names it reads), ignoring scopes: a close bound."""
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read


def undefined_names(code: str, given: str = "") -> set[str]:
    bound, read = names(code)
    return read - bound - names(given)[0] - ALWAYS_DEFINED


def placeholders(code: str) -> list[int]:
    """Lines where ``...`` stands for a value (``f(x=...)``); a bare ``...`` statement is fine."""
    tree = ast.parse(code)
    statements = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and n.value is Ellipsis and id(n) not in statements
    ]


# ----------------------------------------------------------------------------- tests
def test_the_pages_have_python_blocks() -> None:
    pages = {b.page for b in BLOCKS}
    assert "README.md" in pages and len(BLOCKS) >= 20, pages


def test_every_block_is_complete_or_marked() -> None:
    """A block without a marker defines every name it reads; no block has ``x=...``."""
    problems = []
    for block in BLOCKS:
        try:
            ast.parse(block.code)
        except SyntaxError as error:
            problems.append(f"{block.id}: not valid Python ({error.msg}, line {error.lineno})")
            continue
        if lines := placeholders(block.code):
            problems.append(
                f"{block.id}: `...` stands for a value on block line(s) {lines}; write real code"
            )
        try:
            given = "\n".join(prelude_chain(block)[0])
        except UnknownPrelude:
            continue  # reported by test_markers_name_existing_preludes
        if missing := undefined_names(block.code, given):
            kind = "its preludes do not define" if block.needs else "it never defines"
            problems.append(
                f"{block.id}: reads {sorted(missing)}, which {kind}: make the block complete, "
                f"or mark it '<!-- fragment: needs NAME -->' with a prelude in {Path(__file__).name}"
            )
    assert not problems, "\n".join(problems)


def test_markers_name_existing_preludes() -> None:
    problems = list(MARKER_PROBLEMS)
    for block in BLOCKS:
        try:
            prelude_chain(block)
        except UnknownPrelude as error:
            problems.append(str(error.args[0]))
    used = {name for block in BLOCKS for name in block.needs}
    problems += [f"prelude {name!r} is used by no block" for name in sorted(set(PRELUDES) - used)]
    for extra in EXTRAS:
        hits = [b.id for b in BLOCKS if b.page == extra.page and extra.snippet in b.code]
        if len(hits) != 1:
            problems.append(
                f"EXTRAS entry {extra.page} {extra.snippet!r} matches {hits or 'no block'}"
            )
    assert not problems, "\n".join(problems)


def test_the_checker_catches_an_unmarked_fragment_and_a_placeholder() -> None:
    assert undefined_names("trainer.train(train_ds, num_epochs=1)") == {"trainer", "train_ds"}
    assert undefined_names("import torch\nx = torch.ones(2)\nprint(x, __name__)") == set()
    assert placeholders("f(a, b=...)\n...\nclass A: ...\n") == [1]
    text = "<!-- fragment: needs a, b -->\n```python\npass\n```\n"
    blocks, problems = parse_page("x.md", text)
    assert blocks[0].needs == ("a", "b") and blocks[0].line == 2 and not problems
    blocks, problems = parse_page("x.md", text.replace("-->\n", "-->\n\n"))
    assert blocks[0].needs == () and problems  # not on the line just before the fence


def block_params() -> Iterator[object]:
    for block in BLOCKS:
        extra = extra_for(block)
        marks = [pytest.mark.gpu] if extra.gpus else []
        marks += [pytest.mark.slow] if extra.slow else []
        yield pytest.param(block, id=block.id, marks=marks)


@dataclass
class Outcome:
    script: Path
    first_line: int
    returncode: int
    stdout: str
    stderr: str
    seconds: float


@dataclass
class BlockRunner:
    """Runs the selected blocks a few at a time; each test waits for its own.

    It starts every block the session selected, so the blocks' tests belong in one test
    process: `make test` keeps a file's tests together (`--dist loadfile`).
    """

    folder: Path
    env: dict[str, str]
    futures: dict[str, Future[Outcome]] = field(default_factory=dict)

    def run(self, block: Block) -> Outcome:
        work = self.folder / re.sub(r"\W", "_", block.id)
        work.mkdir()
        text, first_line = script_for(block)
        for key in sorted(prelude_chain(block)[1]):
            FILES[key](work)
        script = work / "block.py"
        script.write_text(text, encoding="utf-8")
        env = dict(self.env)
        if extra_for(block).gpus:
            env.pop("CUDA_VISIBLE_DEVICES", None)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, script.name],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
        seconds = time.perf_counter() - start
        return Outcome(script, first_line, done.returncode, done.stdout, done.stderr, seconds)


@pytest.fixture(scope="module")
def runner(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BlockRunner]:
    selected = [
        item.callspec.params["block"]
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_block_runs"
        and extra_for(item.callspec.params["block"]).gpus <= torch.cuda.device_count()
    ]
    # CPU only (a gpu block gets the GPUs back), one intra-op thread, no plot windows.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "CUDA_VISIBLE_DEVICES": ""}
    server = None
    if any(extra_for(block).s3 for block in selected):
        from tests.tracking.s3_helpers import S3Server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request
        server = S3Server()
        server.start()
        server.client().create_bucket(Bucket="my-bucket")
        env |= {
            "AWS_ENDPOINT_URL": server.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        env.pop("AWS_PROFILE", None)
    jobs = int(os.environ.get("SCRAMJET_DOC_JOBS", "4"))
    blocks = BlockRunner(tmp_path_factory.mktemp("blocks"), env)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        blocks.futures = {b.id: pool.submit(blocks.run, b) for b in selected}
        yield blocks
        for future in blocks.futures.values():
            future.cancel()
    if server is not None:
        server.stop()


@pytest.mark.parametrize("block", list(block_params()))
def test_block_runs(block: Block, runner: BlockRunner) -> None:
    if extra_for(block).gpus > torch.cuda.device_count():
        pytest.skip(f"needs {extra_for(block).gpus} CUDA devices")
    out = runner.futures[block.id].result()
    print(f"{block.id}: {out.seconds:.1f} s")
    assert out.returncode == 0, (
        f"{block.id} failed; script {out.script} (the block starts on its line "
        f"{out.first_line}):\n{out.stderr[-4000:]}"
    )
    lines = out.stdout.splitlines()
    for expected in extra_for(block).stdout:
        assert any(line.startswith(expected) for line in lines), (expected, out.stdout[-2000:])
