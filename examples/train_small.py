"""A few training steps of a small model using both attnbwd ops, timed against plain PyTorch autograd and
torch.compile of the same model in the same run; alone or data-parallel under torchrun.

    python3 examples/train_small.py --out single.json
    ATTNBWD_CACHE_DIR=/tmp/shared-cache torchrun --nproc_per_node=2 examples/train_small.py \
        --out ddp.json --compare single.json

(PYTHONPATH=python ATTNBWD_LIBRARY=build/libattnbwd.so from a build tree, nothing after pip install .)

The model: RegionAwareSelfAttention (problem 2), then a multi-head attention whose probabilities are
masked_softmax_dropout (problem 1), a projection and a mean-squared error against a target. Each step's global
batch is --shards shards, each drawn (data and dropout masks) from a seed of (step, shard); a single process runs
the shards one after another and adds their gradients, torchrun's ranks take a share of them each and add the
gradients with one all-reduce: the two runs' losses are then the same (--compare checks, bit for bit where the
kernels are deterministic). Each rank runs on its own GPU (LOCAL_RANK), or all on one when there are fewer GPUs
(said in the output; gloo then instead of NCCL). At the end every rank's kernels are gathered: with one shared
cache folder each kernel is compiled by one rank only, the others read it from the disk cache."""

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from attnbwd.torch import MASK_FILL, RegionAwareSelfAttention, kernels, masked_softmax_dropout

HEADS1, HEAD_DIM1 = 8, 64  # the problem-1 attention's heads


class SmallModel(torch.nn.Module):
    """impl "attnbwd": both attentions through attnbwd's ops; "torch": the same forward in plain PyTorch."""

    def __init__(self, p, precision):
        super().__init__()
        self.edit_attn = RegionAwareSelfAttention(dropout=p, precision=precision)
        self.qk = torch.nn.Linear(1024, 2 * HEADS1 * HEAD_DIM1)
        self.v = torch.nn.Linear(1024, HEADS1 * HEAD_DIM1)
        self.proj = torch.nn.Linear(HEADS1 * HEAD_DIM1, 1024)
        self.p = p
        self.impl = "attnbwd"

    def edit_attention_torch(self, x, erm):
        """RegionAwareSelfAttention's forward in PyTorch ops (autograd's backward)."""
        a = self.edit_attn
        B, T, C = x.shape
        q, k, v = (x @ a.qkv_weight.t() + a.qkv_bias).view(B, T, 3, 16, 64).permute(2, 0, 3, 1, 4)
        mi, mj = erm[:, None, :, None], erm[:, None, None, :]
        s = (q @ k.transpose(-1, -2)) * a.scale + a.edit_region_bias[:, :T, :T]
        s = s + a.within_edit_bias * (mi * mj) + a.cross_edit_bias * (mi * (1 - mj) + (1 - mi) * mj)
        probs = F.dropout(s.softmax(-1), self.p, self.training)
        return (probs @ v).transpose(1, 2).reshape(B, T, C) @ a.out_weight.t() + a.out_bias

    def forward(self, x, erm, mask):
        B, T, _ = x.shape
        h = self.edit_attn(x, erm) if self.impl == "attnbwd" else self.edit_attention_torch(x, erm)
        q, k = self.qk(h).view(B, T, 2, HEADS1, HEAD_DIM1).permute(2, 0, 3, 1, 4)
        v = self.v(h).view(B, T, HEADS1, HEAD_DIM1).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * HEAD_DIM1 ** -0.5  # [B, H, T, T]
        if self.impl == "attnbwd":
            probs = masked_softmax_dropout(scores, mask, self.p, self.training)
        else:
            probs = F.dropout(scores.masked_fill(~mask, MASK_FILL).softmax(-1), self.p, self.training)
        return self.proj((probs @ v).transpose(1, 2).reshape(B, T, -1)) + x


def shard_data(step, shard, B, T, device, seed):
    """A shard's inputs and the seed its dropout masks are drawn from."""
    s = seed * 100003 + step * 1009 + shard
    g = torch.Generator(device=device).manual_seed(s)
    x = torch.randn(B, T, 1024, device=device, generator=g)
    erm = torch.randint(0, 2, (B, T), device=device, generator=g).float()
    mask = (torch.rand(B, 1, 1, T, device=device, generator=g) > 0.1).expand(B, 1, T, T).contiguous()
    target = torch.randn(B, T, 1024, device=device, generator=g)
    return s, (x, erm, mask), target


def train(model, forward, args, device, rank, world, shards_here):
    """args.steps SGD steps; returns (the global losses, each step's compute seconds on this rank)."""
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    params = [p for p in model.parameters()]
    losses, times = [], []
    for step in range(args.steps):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=device)
        for shard in shards_here:
            seed, inputs, target = shard_data(step, shard, args.batch // args.shards, args.seq_len, device, args.seed)
            torch.manual_seed(seed)  # the dropout masks: the same draw for this shard in any run
            loss = F.mse_loss(forward(*inputs), target) / args.shards
            loss.backward()
            total += loss.detach()
        torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
        if world > 1:  # one all-reduce of every gradient and the loss
            flat = torch.cat([p.grad.reshape(-1) for p in params] + [total.reshape(1)])
            dist.all_reduce(flat)
            at = 0
            for p in params:
                p.grad.copy_(flat[at:at + p.numel()].view_as(p.grad))
                at += p.numel()
            total = flat[-1]
        opt.step()
        losses.append(float(total))
    return losses, times


def median_ms(times, warmup):
    return 1e3 * statistics.median(times[warmup:] or times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8, help="global batch (all shards)")
    ap.add_argument("--shards", type=int, default=2, help="shards of the global batch; a multiple of the ranks")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--precision", default="tf32", choices=["tf32", "fp16", "fp32"])
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-steps", type=int, default=12, help="steps of each timed variant (first 3 warm-ups)")
    ap.add_argument("--out", help="write the losses, step times and kernel counts (JSON) here (rank 0)")
    ap.add_argument("--compare", help="a single-process run's --out file: the losses must equal its losses")
    args = ap.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    n_gpus = torch.cuda.device_count()
    device = torch.device("cuda", local % n_gpus)
    torch.cuda.set_device(device)
    shared = world > n_gpus
    if world > 1:
        dist.init_process_group("gloo" if shared else "nccl", rank=rank, world_size=world,
                                device_id=None if shared else device)
    if args.shards % world:
        raise SystemExit(f"--shards {args.shards} is not a multiple of the {world} ranks")
    shards_here = range(rank * args.shards // world, (rank + 1) * args.shards // world)
    print(f"rank {rank}/{world} on {device} ({torch.cuda.get_device_name(device)}), shards {list(shards_here)}"
          + (f"; {n_gpus} GPU(s) for {world} ranks: ranks share a GPU" if shared else ""), flush=True)

    torch.backends.cuda.matmul.allow_tf32 = True  # the forward's products in TF32, as the backward's
    torch.manual_seed(args.seed)
    model = SmallModel(args.dropout, args.precision).to(device)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    losses, times = train(model, model, args, device, rank, world, shards_here)

    # Step times of the variants (this rank, one shard a step, no all-reduce), each from the same weights.
    timed = {}
    variants = [("attnbwd", "attnbwd", False), ("pytorch autograd", "torch", False),
                ("torch.compile", "torch", True), ("attnbwd + torch.compile", "attnbwd", True)]
    timing_args = argparse.Namespace(**dict(vars(args), steps=args.time_steps, shards=1, batch=args.batch // args.shards))
    for name, impl, compiled in variants:
        model.load_state_dict(init)
        model.impl = impl
        forward = torch.compile(model, fullgraph=True) if compiled else model
        _, t = train(model, forward, timing_args, device, rank, 1, range(1))
        timed[name] = median_ms(t, 3)
    model.impl = "attnbwd"

    mine = [{"rank": rank, "device": str(device), "cache_key": info["cache_key"], "origin": info["origin"],
             "name": info["name"]} for _, info in kernels()]
    everyone = [None] * world
    if world > 1:
        dist.all_gather_object(everyone, mine)
    else:
        everyone = [mine]
    if rank == 0:
        all_kernels = [k for r in everyone for k in r]
        keys = {k["cache_key"] for k in all_kernels}
        compiled = [k["cache_key"] for k in all_kernels if k["origin"] == "compile"]
        once = len(compiled) == len(set(compiled))
        print(f"losses: {' '.join(f'{v:.6f}' for v in losses)}")
        print(f"step time (forward + backward + SGD, batch {args.batch // args.shards}, T {args.seq_len}, median of "
              f"{args.time_steps - 3}): " + ", ".join(f"{k} {v:.2f} ms" for k, v in timed.items()))
        for r, ks in enumerate(everyone):
            print(f"rank {r}: {len(ks)} kernels, {sum(k['origin'] == 'compile' for k in ks)} compiled, "
                  f"{sum(k['origin'] == 'disk' for k in ks)} from the disk cache")
        print(f"{len(keys)} distinct kernels, {len(compiled)} compiles across {world} rank(s): "
              f"{'each compiled at most once' if once else 'SOME COMPILED TWICE'}")
        result = {"world": world, "gpus": n_gpus, "shared_gpu": shared, "losses": losses, "step_ms": timed,
                  "kernels": everyone, "compiled_once": once, "args": vars(args)}
        ok = once
        if args.compare:
            ref = json.load(open(args.compare))["losses"]
            worst = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses, ref))
            same = losses == ref
            print(f"losses against {args.compare}: {'bit for bit equal' if same else f'max relative difference {worst:.2e}'}")
            result["compare"] = {"equal": same, "max_rel_diff": worst}
            ok = ok and worst <= 1e-5 and len(ref) == len(losses)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
        if not ok:
            raise SystemExit(1)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
