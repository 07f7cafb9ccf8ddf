#!/usr/bin/python3
"""A small character-level transformer language model, trained from Python with a compiled step.

The model of `smelt demo-lm` (token and position embeddings, two pre-norm blocks of causal
self-attention and a GELU MLP, a linear head), trained on a plain-text file every Debian system
has (base-files' /usr/share/common-licenses/GPL-3) with smelt.compile_training_step (forward and
backward as one replayed plan) and AdamW. Prints the loss as it goes, writes a checkpoint and the
loss curve (CSV), and samples a few lines at the end.

    PYTHONPATH=build/python python3 examples/train_char_lm.py [--steps 600] [--out build/char-lm]
"""
import argparse
import math
import os
import random
import time

import smelt
import smelt.nn.functional as F
from smelt import nn


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.d, self.heads = d, heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        qkv = self.qkv(self.ln1(x))

        def heads(part):
            return qkv[:, :, part * d:(part + 1) * d].reshape(b, t, self.heads, hd).permute(0, 2, 1, 3)

        positions = smelt.arange(t)
        future = positions.reshape(1, t) > positions.reshape(t, 1)  # j attends to <= j only
        mask = smelt.where(future, smelt.full((t, t), float("-inf")), smelt.zeros((t, t)))
        scores = heads(0) @ heads(1).transpose(2, 3) * (1.0 / math.sqrt(hd)) + mask
        context = (F.softmax(scores, -1) @ heads(2)).permute(0, 2, 1, 3).reshape(b, t, d)
        y = x + self.proj(context)
        return y + self.down(F.gelu(self.up(self.ln2(y))))


class CharLM(nn.Module):
    def __init__(self, vocab, context, d, heads):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d)
        self.positions = nn.Embedding(context, d)
        self.block1 = Block(d, heads)
        self.block2 = Block(d, heads)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions(smelt.arange(ids.shape[1]))
        return self.head(self.ln(self.block2(self.block1(x))))


def lm_loss(model, ids, following):
    logits = model(ids)
    return F.cross_entropy(logits.reshape(-1, logits.shape[2]), following.reshape(-1))


@smelt.no_grad()
def sample(model, prompt, chars, context, count, rng):
    model.eval()
    ids = list(prompt)
    out = []
    for _ in range(count):
        window = smelt.tensor([ids[-context:]])
        logits = model(window)[0, -1]
        probs = F.softmax(logits / 0.8, 0).numpy()
        pick = rng.choices(range(len(probs)), weights=probs)[0]
        ids.append(pick)
        out.append(chars[pick])
    model.train()
    return "".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="/usr/share/common-licenses/GPL-3")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--context", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="build/char-lm")
    args = parser.parse_args()

    with open(args.corpus, encoding="utf-8", errors="replace") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    ids = [index[c] for c in text]
    smelt.manual_seed(args.seed)
    model = CharLM(len(chars), args.context, 64, 4)
    print(f"corpus: {args.corpus}, {len(text)} characters, {len(chars)} distinct; "
          f"model: {model.num_parameters()} parameters")
    opt = smelt.optim.AdamW(model.parameters(), lr=args.lr)
    step = smelt.compile_training_step(model, lambda x, y: lm_loss(model, x, y))

    rng = random.Random(args.seed + 1)
    curve = []
    start = time.perf_counter()
    for s in range(1, args.steps + 1):
        starts = [rng.randrange(len(ids) - args.context - 1) for _ in range(args.batch_size)]
        x = smelt.tensor([ids[a:a + args.context] for a in starts])
        y = smelt.tensor([ids[a + 1:a + args.context + 1] for a in starts])
        opt.zero_grad()
        loss = step(x, y).item()
        opt.step()
        curve.append(loss)
        if s % 50 == 0 or s == args.steps:
            rate = s * args.batch_size * args.context / (time.perf_counter() - start)
            print(f"step {s:5d}/{args.steps}  loss {loss:.3f}  {rate:.0f} characters/s", flush=True)

    os.makedirs(args.out, exist_ok=True)
    smelt.io.save_module(os.path.join(args.out, "char_lm.safetensors"), model)
    with open(os.path.join(args.out, "loss_curve.csv"), "w") as f:
        f.write("step,loss\n" + "".join(f"{i + 1},{v}\n" for i, v in enumerate(curve)))
    at = text.find("The ")
    at = at if 0 <= at and at + 16 <= len(text) else 0
    prompt = text[at:at + 16]
    print(f'sampled after "{prompt}":')
    print(prompt + sample(model, ids[at:at + 16], chars, args.context, 240, rng))
    print(f"final loss: {curve[-1]:.3f} (chance: {math.log(len(chars)):.3f})")


if __name__ == "__main__":
    main()
