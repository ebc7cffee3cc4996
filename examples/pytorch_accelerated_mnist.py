# examples/vision/train_mnist.py from the pytorch-accelerated README, run with scramjet.
#
# Only the Trainer import differs from the original. The MNIST download is replaced by
# `generated_mnist`, an in-repo stand-in with the same shapes (1x28x28 images in [0, 1],
# 10 classes), so the example runs offline. Sizes can be made smaller for quick runs:
#
#     SCRAMJET_EXAMPLE_SAMPLES=1200 SCRAMJET_EXAMPLE_EPOCHS=2 python examples/pytorch_accelerated_mnist.py
import os

import torch
from torch import nn, optim
from torch.utils.data import TensorDataset, random_split

from scramjet import Trainer

NUM_SAMPLES = int(os.environ.get("SCRAMJET_EXAMPLE_SAMPLES", "60000"))
NUM_EPOCHS = int(os.environ.get("SCRAMJET_EXAMPLE_EPOCHS", "8"))


def generated_mnist(num_samples: int) -> TensorDataset:
    """MNIST-shaped data: each class is a fixed random stroke pattern plus pixel noise."""
    g = torch.Generator().manual_seed(0)
    patterns = (torch.rand(10, 1, 28, 28, generator=g) > 0.5).float()
    labels = torch.randint(0, 10, (num_samples,), generator=g)
    noise = torch.rand(num_samples, 1, 28, 28, generator=g)
    images = (0.7 * patterns[labels] + 0.3 * noise).clamp(0, 1)
    return TensorDataset(images, labels)


class MNISTModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(in_features=784, out_features=128),
            nn.ReLU(),
            nn.Linear(in_features=128, out_features=64),
            nn.ReLU(),
            nn.Linear(in_features=64, out_features=10),
            nn.LogSoftmax(dim=1),
        )

    def forward(self, input):
        return self.main(input.view(input.shape[0], -1))


dataset = generated_mnist(NUM_SAMPLES)
num_validation = NUM_SAMPLES // 12  # 55000 / 5000 for the full 60000 samples
train_dataset, validation_dataset = random_split(
    dataset, [NUM_SAMPLES - num_validation, num_validation]
)
model = MNISTModel()
optimizer = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
loss_func = nn.CrossEntropyLoss()

trainer = Trainer(
    model,
    loss_func=loss_func,
    optimizer=optimizer,
)

trainer.train(
    train_dataset=train_dataset,
    eval_dataset=validation_dataset,
    num_epochs=NUM_EPOCHS,
    per_device_batch_size=32,
)
