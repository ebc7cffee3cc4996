# ruff: noqa: UP008  (the brochure writes super(Class, self); kept as written)
"""nebulae's Multiverse example from the brochure, run on CPU with gloo.

Only the imports differ from the brochure (``GPU`` is bound to the CPU engine because
this machine has no GPU); the brochure's placeholders ("define architecture",
"define training step", ...) are filled with a tiny real model and data. Prints one
JSON line with what the test checks.
"""

import json

import torch
import torch.nn.functional as F

import scramjet.compat.nebulae as neb
from scramjet.compat.nebulae.astro import dock
from scramjet.compat.nebulae.cockpit import CPU as GPU
from scramjet.compat.nebulae.cockpit import Engine, TimeMachine
from scramjet.runtime.distributed import gather_object

is_distributed = True


def launch(mv=None):  ## <======[1]
    mv.init()  ## <========[2]
    # ------ #
    # defined Dashboard
    ng = Engine(device=GPU, ngpu=mv.nworld)  ## <=======[3]
    tm = TimeMachine(save_path="./ckpt", ckpt_path="./ckpt")
    # ------ Fuel ----- #
    # define dataset Tanks (here: each world reads its own half of a fixed tensor set,
    # reshuffled with a new order every epoch)
    torch.manual_seed(0)
    data_x, data_z = torch.randn(64, 8), torch.randint(0, 4, (64,))
    sampler = torch.utils.data.DistributedSampler(
        torch.utils.data.TensorDataset(data_x, data_z), num_replicas=mv.nworld, rank=mv.rank
    )
    mpe = 4

    class Net(dock.Craft):
        def __init__(self, nclass, scope):
            super(Net, self).__init__(scope)
            self.fc1 = torch.nn.Linear(8, 16)
            self.fc2 = torch.nn.Linear(16, nclass)

        def run(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    class Train(dock.Craft):
        def __init__(self, net, scope="TRAIN"):
            super(Train, self).__init__(scope)
            self.net = net
            self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

        def run(self, x, z):
            loss = F.cross_entropy(self.net(x), z)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            loss = mv.reduce(loss)  ## <=======[4]
            return loss

    class Dev(dock.Craft):
        def __init__(self, net, scope="DEVELOP"):
            super(Dev, self).__init__(scope)
            self.net = net

        def run(self, x, z, idx):
            with neb.Nozzle():
                loss = F.cross_entropy(self.net(x), z)
            loss = mv.reduce(loss)  ## <=======[4]
            return loss

    # ----- # Launcher ----- #
    net = Net(4, "cnn")
    net.gear(ng)
    net = mv.sync(net)  ## <====[5]
    train = Train(net)
    dev = Dev(net)
    orders = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        order = list(sampler)
        orders.append(order)
        for mile in range(mpe):
            idx = order[mile * 8 : (mile + 1) * 8]
            train(data_x[idx], data_z[idx])
        dev(data_x, data_z, 0)
    if mv.rank == 0:
        tm.drop(net.module if hasattr(net, "module") else net)
    summed = mv.reduce(torch.tensor(float(mv.rank + 1)), aggregate=True)
    mean = mv.reduce(torch.tensor(float(mv.rank + 1)))
    weights = torch.cat([p.detach().flatten() for p in net.parameters()])
    every = gather_object({"weights": weights.tolist(), "order_change": orders[0] != orders[1]})
    return {
        "world": mv.nworld,
        "same_weights": all(e["weights"] == every[0]["weights"] for e in every),
        "orders_differ_between_epochs": all(e["order_change"] for e in every),
        "sum_is_twice_mean": float(summed) == 3.0 and float(mean) == 1.5,
    }


if __name__ == "__main__":
    if is_distributed:
        mv = neb.cockpit.Multiverse(launch, 2)  ##
        result = mv()  # _______[6]
    else:
        result = launch()
    print(json.dumps(result))
