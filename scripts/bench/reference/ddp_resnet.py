#!/usr/bin/env python3
"""PyTorch DDP reference for the training-throughput benchmark (scripts/bench/train.sh).

Written for PyTorch 2.13 (the project's venv: <repo>/.venv/bin/torchrun); needs torch only.

Trains the same ResNet as mxrun's bundled trainer (build/bin/train) on the same kind of
data path, so the two can be timed side by side:

  * model: torchvision's ResNet layout (BasicBlock / Bottleneck; conv1, bn1, layer1..4, fc;
    bias-free convolutions; Kaiming-normal fan_out convolutions, BatchNorm weight 1 and
    bias 0, nn.Linear's default for fc) with a CIFAR stem: 3x3 stride-1 conv, no max-pool.
    --torchvision uses torchvision.models.<model> with the same stem instead, when
    torchvision can be imported (width 64 only; the project's venv has no torchvision, so
    there it falls back to the local ResNet, and says so on stderr).
  * data: a synthetic CIFAR-shaped uint8 set held in memory; per step this rank's
    DistributedSampler (shuffle=True, seed 0) indices, random crop with 4-pixel zero
    padding, horizontal flip and per-channel normalisation, done on batch tensors in the
    main process (no DataLoader worker processes).
  * DistributedDataParallel with its defaults (bucket_cap_mb 25, broadcast_buffers True),
    SGD lr 0.1 momentum 0.9 weight decay 1e-4 (multi-tensor "foreach" kernels on CUDA, its
    default there), cross-entropy.
  * on CUDA: --amp bf16|fp16 (autocast; GradScaler for fp16), --channels_last and
    --cudnn_benchmark, as the bundled trainer has them.

With --ckpt_dir, rank 0 saves the model, optimizer and step there every --ckpt_every steps
(torch.save to a temporary file, then os.replace), and every rank resumes from it when it exists
(a restart under torchrun or mxrun), skipping the batches already trained on: the recovery
benchmark's reference (scripts/bench/recovery.sh).

Rank 0 prints JSON lines on stdout, each with "time" (seconds since the Unix epoch):
  {"event":"start", ...}                               once, before training
  {"event":"step","step":S,"images_per_sec":R,...}     every --log_every steps; R is the
      global images of those steps (every rank's batches) over their wall time
  {"event":"done","step":S}                            at the end
  {"event":"memory","max_allocated_mib":M}             at the end, on CUDA

Run with torchrun (env:// rendezvous), e.g.
  torchrun --standalone --nproc_per_node=2 ddp_resnet.py --width 8 --max_steps 6
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

MODELS = {
    # name: (bottleneck, blocks per stage)
    "resnet18": (False, (2, 2, 2, 2)),
    "resnet34": (False, (3, 4, 6, 3)),
    "resnet50": (True, (3, 4, 6, 3)),
    "resnet101": (True, (3, 4, 23, 3)),
    "resnet152": (True, (3, 8, 36, 3)),
}
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
PAD = 4
SIDE = 32


# ---------------------------------------------------------------- model
def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def conv1x1(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(cin, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(cin, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)   # stride on the 3x3, as torchvision
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision.models.ResNet with a CIFAR stem and a configurable first-stage width."""

    def __init__(self, model="resnet18", width=64, num_classes=10):
        super().__init__()
        bottleneck, blocks = MODELS[model]
        block = Bottleneck if bottleneck else BasicBlock
        self.conv1 = conv3x3(3, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.inplanes = width
        self.layer1 = self._make_layer(block, width, blocks[0], 1)
        self.layer2 = self._make_layer(block, width * 2, blocks[1], 2)
        self.layer3 = self._make_layer(block, width * 4, blocks[2], 2)
        self.layer4 = self._make_layer(block, width * 8, blocks[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_model(args, rank=0):
    """Returns (model, implementation name)."""
    if args.torchvision:
        try:
            import torchvision
        except ImportError as e:
            if rank == 0:
                print(f"ddp_resnet.py: --torchvision: cannot import torchvision ({e}); "
                      "using the local ResNet", file=sys.stderr)
        else:
            if args.width != 64:
                sys.exit(f"ddp_resnet.py: --torchvision builds width 64 only, not --width {args.width}")
            model = getattr(torchvision.models, args.model)(num_classes=10)
            model.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
            nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
            model.maxpool = nn.Identity()
            return model, f"torchvision {torchvision.__version__}"
    return ResNet(args.model, args.width, 10), "local"


# ---------------------------------------------------------------- data
def make_synthetic(n, seed=1000, chunk=4096):
    """N x 3 x 32 x 32 uint8 images, labels i % 10: a class colour plus Gaussian noise.

    Side effect worth knowing when comparing: freeing the chunk temporaries (up to 32 MiB)
    raises glibc's dynamic mmap/trim thresholds, so later activations are recycled on the
    heap instead of being unmapped and faulted in again every step. Most real Python
    training programs get the same effect incidentally (dataset loading, imports)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 10
    levels = torch.tensor([70.0, 120.0, 170.0])
    c = torch.arange(10)
    colours = torch.stack([levels[c % 3], levels[(c // 3) % 3], levels[(c // 2) % 3]], 1)  # 10 x 3
    images = torch.empty(n, 3, SIDE, SIDE, dtype=torch.uint8)
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        x = colours[labels[s:e]][:, :, None, None] + 40.0 * torch.randn(e - s, 3, SIDE, SIDE, generator=g)
        images[s:e] = x.clamp_(0, 255).to(torch.uint8)
    return images, labels


class IndexOnly(torch.utils.data.Dataset):
    """What DistributedSampler needs of a dataset: its length."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def augment(batch, gen, mean, std):
    """Random crop (4-pixel zero padding), horizontal flip and normalisation of a uint8
    B x 3 x 32 x 32 batch, vectorised over the batch; returns float32 on batch's device."""
    b = batch.shape[0]
    dev = batch.device
    padded = F.pad(batch, (PAD, PAD, PAD, PAD))                       # B x 3 x 40 x 40, zeros
    offs = torch.randint(0, 2 * PAD + 1, (2, b), generator=gen).to(dev)
    flip = (torch.randint(0, 2, (b,), generator=gen) == 1).to(dev)
    ar = torch.arange(SIDE, device=dev)
    rows = offs[0][:, None] + ar                                       # B x 32
    cols = offs[1][:, None] + torch.where(flip[:, None], SIDE - 1 - ar, ar)
    out = padded[torch.arange(b, device=dev)[:, None, None, None],
                 torch.arange(3, device=dev)[None, :, None, None],
                 rows[:, None, :, None],
                 cols[:, None, None, :]]                               # B x 3 x 32 x 32
    return (out.float().div_(255.0) - mean).div_(std)


# ---------------------------------------------------------------- training
def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet18", choices=sorted(MODELS))
    p.add_argument("--width", type=int, default=64, help="channels of layer1 (64 as torchvision)")
    p.add_argument("--torchvision", action="store_true",
                   help="use torchvision.models.<model> (CIFAR stem) when torchvision is installed")
    p.add_argument("--synthetic_train", type=int, default=50000, help="synthetic training images")
    p.add_argument("--batch_size", type=int, default=128, help="images per worker per step")
    p.add_argument("--max_steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--log_every", type=int, default=50, help="throughput line every K steps")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight_decay", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ckpt_dir", default="", help="checkpoint folder (empty: none)")
    p.add_argument("--ckpt_every", type=int, default=0, help="checkpoint every N steps (0: never)")
    p.add_argument("--backend", default=None, choices=["gloo", "nccl"],
                   help="default: gloo on CPU, nccl on CUDA")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"], help="CUDA only")
    p.add_argument("--channels_last", action="store_true")
    p.add_argument("--cudnn_benchmark", action="store_true",
                   help="torch.backends.cudnn.benchmark = True (the bundled trainer's default on CUDA)")
    a = p.parse_args()
    for name in ("width", "synthetic_train", "batch_size", "epochs", "log_every"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.max_steps < 0:
        p.error("--max_steps must be >= 0")
    if a.amp != "off" and a.device != "cuda":
        p.error(f"--amp {a.amp} needs --device cuda")
    if a.backend is None:
        a.backend = "nccl" if a.device == "cuda" else "gloo"
    if a.backend == "nccl" and a.device != "cuda":
        p.error("--backend nccl needs --device cuda")
    return a


def main():
    args = parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        torch.backends.cudnn.benchmark = args.cudnn_benchmark
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(args.backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    cuda = device.type == "cuda"
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format

    def now():
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def say(**record):
        if rank == 0:
            print(json.dumps({**record, "time": time.time()}), flush=True)

    images, labels = make_synthetic(args.synthetic_train)
    torch.manual_seed(args.seed)
    model, impl = build_model(args, rank)
    model = model.to(device, memory_format=fmt)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    criterion = nn.CrossEntropyLoss()
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    scaler = torch.amp.GradScaler("cuda") if args.amp == "fp16" else None

    sampler = DistributedSampler(IndexOnly(args.synthetic_train), num_replicas=world, rank=rank,
                                 shuffle=True, seed=args.seed)
    steps_per_epoch = math.ceil(len(sampler) / args.batch_size)
    gen = torch.Generator().manual_seed(args.seed * 1000003 + rank)
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    pin = cuda

    say(event="start", model=args.model, impl=impl, width=args.width,
        parameters=sum(p.numel() for p in model.parameters() if p.requires_grad),
        device=str(device), backend=args.backend, world_size=world, batch_size=args.batch_size,
        steps_per_epoch=steps_per_epoch, amp=args.amp, channels_last=args.channels_last,
        torch=torch.__version__)

    step = 0
    ckpt = os.path.join(args.ckpt_dir, "checkpoint.pt") if args.ckpt_dir else ""
    if ckpt and os.path.exists(ckpt):
        # Tensors, numbers and the optimizer's plain settings only: the safe loader is enough.
        state = torch.load(ckpt, map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
        say(event="resume", step=step, restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    resume_at = step
    seen = 0  # batches passed over, to skip those trained before the restart
    ddp.train()
    window_start = now()
    window_images = 0
    done = False
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)), dtype=torch.int64)
        for first in range(0, len(order), args.batch_size):
            seen += 1
            if seen <= resume_at:
                continue
            idx = order[first:first + args.batch_size]
            x, y = images[idx], labels[idx]
            if pin:
                x, y = x.pin_memory(), y.pin_memory()
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            x = augment(x, gen, mean, std).contiguous(memory_format=fmt)
            with torch.autocast(device_type=device.type, dtype=amp_dtype or torch.bfloat16,
                                enabled=amp_dtype is not None):
                logits = ddp(x)
            loss = criterion(logits.float(), y)
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
            step += 1
            window_images += idx.numel() * world
            if ckpt and args.ckpt_every and step % args.ckpt_every == 0 and rank == 0:
                os.makedirs(args.ckpt_dir, exist_ok=True)
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "step": step}, ckpt + ".tmp")
                os.replace(ckpt + ".tmp", ckpt)
            if step % args.log_every == 0:
                t = now()
                say(event="step", step=step, epoch=epoch, loss=float(loss.detach()),
                    images_per_sec=window_images / max(t - window_start, 1e-9), world_size=world)
                window_images = 0
                window_start = now()
            if args.max_steps and step >= args.max_steps:
                done = True
                break
        if done:
            break

    dist.barrier()
    say(event="done", step=step)
    if cuda:
        say(event="memory", max_allocated_mib=torch.cuda.max_memory_allocated(device) / 2**20,
            max_reserved_mib=torch.cuda.max_memory_reserved(device) / 2**20)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
