#!/usr/bin/python3
"""The digits CNN of `smelt demo`, trained from Python.

Same data (data/digits.csv.gz, seeded 80/20 split), same model (models::digits_cnn, written here
as a Python subclass of smelt.nn.Module, its layers made in the same order so the seeded
initialization draws the same numbers), same optimizer (Adam, lr 3e-3, cosine-annealed), same
batches (batch 64, shuffled with seed + 1). With the same seed it should reach the demo's accuracy.

    PYTHONPATH=build/python python3 examples/train_digits.py [--epochs 20] [--seed 0]
"""
import argparse
import time

import smelt
import smelt.nn.functional as F
from smelt import nn


class DigitsCNN(nn.Module):
    """(N, 1, 8, 8) images -> (N, 10) logits, as models::digits_cnn."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(self.conv2(self.conv1(x).relu()).relu(), 2)
        return self.fc2(self.fc1(x.flatten(1)).relu())


def images(rows):
    """Pixels 0..16 as (N, 1, 8, 8) in [0, 1]."""
    return rows.reshape(-1, 1, 8, 8) / 16.0


@smelt.no_grad()
def accuracy(model, dataset):
    model.eval()
    correct = 0
    for inputs, targets in smelt.data.DataLoader(dataset, batch_size=256):
        correct += (model(images(inputs)).argmax(1) == targets).long().sum().item()
    return correct / len(dataset)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    smelt.manual_seed(args.seed)
    digits = smelt.data.load_digits()
    train, test = smelt.data.train_test_split(digits, 0.8, seed=args.seed)
    print(f"digits: {len(train)} train / {len(test)} test images (8x8)")
    model = DigitsCNN()
    print(f"model: {model.num_parameters()} parameters")
    opt = smelt.optim.Adam(model.parameters(), lr=args.lr)
    loader = smelt.data.DataLoader(train, batch_size=args.batch_size, shuffle=True, seed=args.seed + 1)
    schedule = smelt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs)

    train_seconds = []
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        total = 0.0
        for inputs, targets in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(images(inputs)), targets)
            loss.backward()
            opt.step()
            total += loss.item()
        schedule.step()
        train_seconds.append(time.perf_counter() - t0)
        print(f"epoch {epoch:2d}/{args.epochs}: loss {total / len(loader):.4f}, "
              f"test acc {100 * accuracy(model, test):.1f}%, train {1e3 * train_seconds[-1]:.0f} ms")
    train_seconds.sort()
    print(f"train time per epoch: median {1e3 * train_seconds[len(train_seconds) // 2]:.0f} ms, "
          f"best {1e3 * train_seconds[0]:.0f} ms")
    print(f"test accuracy: {100 * accuracy(model, test):.1f}%")


if __name__ == "__main__":
    main()
