#!/usr/bin/env python3
"""PyTorch's run of examples/gpt: the same model, initialisation, optimizer and data.

    python3 bench/torch_gpt_reference.py                    # 2000 steps, as `gpt` runs
    python3 bench/torch_gpt_reference.py --threads=2 --steps=200 --eval_every=100

The character-level GPT of examples/gpt/model.h, written with torch.nn:

  tok   nn.Embedding(vocab, width)       N(0, 1)
  pos   a [context, width] table         N(0, 0.02)
  block pre-LayerNorm: x + proj(attn(ln1(x))), then h + mlp_proj(gelu(mlp_fc(ln2(h))))
        causal attention over `heads` heads from one qkv Linear (q, k, v rows in
        that order), the MLP through 4 width, exact (erf) GELU
  ln_f, head nn.Linear(width, vocab)     no weight tying

Every Linear's weight Xavier-uniform, every bias zero, LayerNorms ones and
zeros (eps 1e-5). AdamW (betas 0.9, 0.999, eps 1e-8, decoupled weight decay
on every parameter, as Tandem's) at --lr with a linear warm-up over
--warmup steps times a cosine from --lr to 0 over --steps (Tandem's
WarmedUpLr), gradients clipped to norm --clip_grad_norm, --batch_size
windows a step drawn without replacement from every window of the training
text.

The data are examples/gpt/corpus.h's: every regular file of --corpus (a
folder: .dat and .u8 names, symbolic links, subfolders and other non-regular
entries skipped; or one file), in byte order of the names, concatenated;
the vocabulary the distinct bytes; the first 90% (rounded) train, the rest
validate; the validation loss over --val_windows windows spread evenly over
the validation text (start i = floor(i * (n - context) / count)), or every
non-overlapping window with 0. The bigram baseline (add-one smoothing) is
printed beside it.

Prints, like the example: a line per evaluation, the bigram baseline, a
sample, then

    result bench=torch_gpt threads=2 steps=2000 step_ms=... val_loss=...
    step_ms=...
    val_loss=...

step_ms is the mean time of a training step (forward, backward, clipping,
update), evaluations left out; on a GPU (--device=cuda) each step is timed
to its end on the device (torch.cuda.synchronize), attention is
F.scaled_dot_product_attention, and --precision is fp32 (TF32 off), tf32
or bf16 (forward and loss under torch.autocast to bfloat16, float32
parameters, as Tandem's bf16); --precision=bf16 on the CPU is CPU autocast. --threads sets torch's intra-op threads and,
before torch is imported and unless already set, OPENBLAS_NUM_THREADS and
OMP_NUM_THREADS (Debian's python3-torch runs float32 GEMMs in the system
BLAS).
"""

import argparse
import math
import os
import sys
import time

DEFAULT_CORPUS = "/usr/share/games/fortunes"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS,
                        help="a folder of text files, or one file")
    parser.add_argument("--val_windows", type=int, default=512,
                        help="validation windows, spread evenly; 0: every non-overlapping one")
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch_size", type=int, default=12)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight_decay", type=float, default=0.1)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--clip_grad_norm", type=float, default=1.0, help="0: off")
    parser.add_argument("--eval_every", type=int, default=500, help="0: at the end only")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads")
    parser.add_argument("--sample_length", type=int, default=500)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    args = parser.parse_args()
    if min(args.context, args.heads, args.width, args.steps, args.batch_size,
           args.threads) < 1 or min(args.layers, args.val_windows, args.warmup,
                                    args.eval_every, args.sample_length) < 0:
        parser.error("sizes, --steps, --batch_size and --threads must be at least 1; "
                     "--layers, --val_windows, --warmup, --eval_every, --sample_length >= 0")
    if args.width % args.heads != 0:
        parser.error(f"--width={args.width} is not a multiple of --heads={args.heads}")
    return args


def corpus_files(path):
    """The files examples/gpt reads, in its order (ListCorpus's rules)."""
    if not os.path.isdir(path):
        return [path]
    files = []
    for name in sorted(os.listdir(path), key=lambda n: n.encode("utf-8", "surrogateescape")):
        full = os.path.join(path, name)
        if name.endswith((".dat", ".u8")) or os.path.islink(full) or not os.path.isfile(full):
            continue
        files.append(full)
    return files


def load_text(path):
    if not os.path.exists(path):
        sys.exit(f"torch_gpt_reference: the corpus {path} does not exist: install Debian's "
                 "fortunes, or pass --corpus=DIR or --corpus=FILE")
    files = corpus_files(path)
    if not files:
        sys.exit(f"torch_gpt_reference: the corpus folder {path} holds no text file to read")
    text = b""
    for f in files:
        with open(f, "rb") as handle:
            text += handle.read()
    return files, text


def bigram_loss(train, evaluated, vocab):
    counts = [[1.0] * vocab for _ in range(vocab)]
    totals = [float(vocab)] * vocab
    for a, b in zip(train, train[1:]):
        counts[a][b] += 1.0
        totals[a] += 1.0
    nll = 0.0
    for a, b in zip(evaluated, evaluated[1:]):
        nll -= math.log(counts[a][b] / totals[a])
    return nll / (len(evaluated) - 1)


def main():
    args = parse_args()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = args.precision == "tf32"

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    def autocast():
        return torch.autocast(args.device, dtype=torch.bfloat16,
                              enabled=args.precision == "bf16")

    files, text = load_text(args.corpus)
    vocab_bytes = sorted(set(text))
    vocab = len(vocab_bytes)
    token_of = [0] * 256
    for i, b in enumerate(vocab_bytes):
        token_of[b] = i
    tokens = bytes(token_of[b] for b in text)
    n_train = int(math.floor(len(tokens) * 0.9 + 0.5))  # llround of a positive number
    train_tokens, val_tokens = tokens[:n_train], tokens[n_train:]
    bigram = bigram_loss(train_tokens, val_tokens, vocab)
    train = torch.tensor(list(train_tokens), dtype=torch.long)
    val = torch.tensor(list(val_tokens), dtype=torch.long)
    T = args.context
    train_windows = len(train) - T
    val_all = len(val) - T
    if train_windows < 1 or val_all < 1:
        sys.exit(f"torch_gpt_reference: too little text for windows of {T + 1} bytes")
    if args.val_windows > 0:
        count = min(args.val_windows, val_all)
        val_starts = torch.tensor([i * val_all // count for i in range(count)])
    else:
        val_starts = torch.arange(0, val_all, T)
    offsets = torch.arange(T)

    def batch(data, starts):
        idx = starts[:, None] + offsets[None, :]
        return data[idx].to(device), data[idx + 1].to(device)

    class Block(nn.Module):
        def __init__(self, width, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(width, eps=1e-5)
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)
            self.ln2 = nn.LayerNorm(width, eps=1e-5)
            self.mlp_fc = nn.Linear(width, 4 * width)
            self.mlp_proj = nn.Linear(4 * width, width)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            shape = (b, t, self.heads, c // self.heads)
            q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True) \
                if hasattr(F, "scaled_dot_product_attention") else attention(q, k, v)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp_proj(F.gelu(self.mlp_fc(self.ln2(x))))

    def attention(q, k, v):  # torch < 2.0
        t = q.shape[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, args.width)  # N(0, 1)
            self.pos = nn.Parameter(torch.randn(T, args.width) * 0.02)
            self.blocks = nn.ModuleList(Block(args.width, args.heads) for _ in range(args.layers))
            self.ln_f = nn.LayerNorm(args.width, eps=1e-5)
            self.head = nn.Linear(args.width, vocab)
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform_(m.weight)
                    nn.init.zeros_(m.bias)

        def forward(self, ids):
            x = self.tok(ids) + self.pos[: ids.shape[1]]
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    model = Gpt().to(device)
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=args.weight_decay)

    def lr_at(step):  # Tandem's WarmedUpLr with the cosine schedule
        ramp = min(1.0, (step + 1) / args.warmup) if args.warmup > 0 else 1.0
        return ramp * args.lr * (1 + math.cos(math.pi * step / args.steps)) / 2

    @torch.no_grad()
    def evaluate():
        model.eval()
        total = 0.0
        for i in range(0, len(val_starts), 256):
            x, y = batch(val, val_starts[i:i + 256])
            with autocast():
                logits = model(x)
            total += F.cross_entropy(logits.float().view(-1, vocab), y.view(-1),
                                     reduction="sum").item()
        model.train()
        return total / (len(val_starts) * T)

    print(f"data: {args.corpus}: {len(files)} file(s), {len(text)} bytes; {len(train)} train / "
          f"{len(val)} validation bytes; vocabulary {vocab} bytes; validation on "
          f"{len(val_starts)} windows")
    print(f"model: torch {torch.__version__}, {args.layers} blocks of width {args.width}, "
          f"{args.heads} heads, context {T} ({params} parameters), {args.threads} thread(s)")
    order = torch.randperm(train_windows)
    position = 0
    train_seconds, interval_loss, interval_steps, val_loss = 0.0, 0.0, 0, float("nan")
    for step in range(args.steps):
        if position + args.batch_size > len(order):
            order, position = torch.randperm(train_windows), 0
        x, y = batch(train, order[position:position + args.batch_size])
        position += args.batch_size
        sync()
        start = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        with autocast():
            loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.clip_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
        optimizer.step()
        sync()
        train_seconds += time.perf_counter() - start
        interval_loss += loss.item()
        interval_steps += 1
        done = step + 1
        if done == args.steps or (args.eval_every > 0 and done % args.eval_every == 0):
            val_loss = evaluate()
            print(f"step {done:6d}/{args.steps}  train_loss {interval_loss / interval_steps:.4f}"
                  f"  val_loss {val_loss:.4f}  ({train_seconds:.1f} s training)", flush=True)
            interval_loss, interval_steps = 0.0, 0
    step_ms = 1000.0 * train_seconds / args.steps
    print(f"bigram baseline (add-one smoothing): val_loss {bigram:.4f}; model: val_loss "
          f"{val_loss:.4f} nats/char")
    if args.sample_length > 0:
        generator = torch.Generator().manual_seed(args.seed + 1)
        ids = [token_of[ord("\n")] if ord("\n") in vocab_bytes else 0]
        out = bytearray()
        model.eval()
        with torch.no_grad():
            for _ in range(args.sample_length):
                logits = model(torch.tensor([ids[-T:]], device=device))[0, -1].float().cpu()
                if args.temperature > 0:
                    p = F.softmax(logits.double() / args.temperature, dim=-1)
                    token = int(torch.multinomial(p, 1, generator=generator))
                else:
                    token = int(logits.argmax())
                ids.append(token)
                out.append(vocab_bytes[token])
        print(f"sample (temperature {args.temperature}):")
        sys.stdout.flush()
        sys.stdout.buffer.write(bytes(out) + b"\n--- end of sample\n")
        sys.stdout.buffer.flush()
    print(f"result bench=torch_gpt device={args.device} precision={args.precision} "
          f"batch={args.batch_size} threads={args.threads} steps={args.steps} "
          f"step_ms={step_ms:.2f} val_loss={val_loss:.4f}")
    print(f"step_ms={step_ms:.2f}")
    print(f"val_loss={val_loss:.4f}")


if __name__ == "__main__":
    main()
