# examples/vision/train_mnist.py
import os

# The only changes to pytorch-accelerated's README example are these two imports: the
# Trainer comes from scramjet, and MNIST (with transforms) from an offline stand-in with the
# same shapes, since this machine cannot download the real dataset.
from generated_mnist import MNIST, transforms
from torch import nn, optim
from torch.utils.data import random_split

from scramjet import Trainer


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


dataset = MNIST(os.getcwd(), download=True, transform=transforms.ToTensor())
train_dataset, validation_dataset = random_split(dataset, [55000, 5000])
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
    num_epochs=8,
    per_device_batch_size=32,
)
