"""DeepSpeed on CPU, started by mpirun (the mpirun form of an MPIJob): the ranks find each other through MPI
(mpi4py: rank, size and rank 0's address), then talk over torch.distributed's gloo backend. A linear model
learns y = 3x - 1 from synthetic data under ZeRO stage 2 (optimizer state and gradients partitioned across
the ranks) for a few steps. Every rank prints its host, then the outcome of a check whose value is exact: the
sum of (rank + 1) over all ranks, and whether every rank ends with the same parameters."""

import socket
import sys

import deepspeed
import torch
import torch.distributed as dist

STEPS = 50
CONFIG = {
    "train_micro_batch_size_per_gpu": 64,
    "gradient_accumulation_steps": 1,
    "zero_optimization": {"stage": 2},
    "zero_allow_untested_optimizer": True,  # a plain torch optimizer (DeepSpeed's own Adam needs compiled ops)
    "steps_per_print": STEPS,
}

deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=True)
rank, size = dist.get_rank(), dist.get_world_size()
torch.set_num_threads(1)
print(f"Rank {rank} on host {socket.gethostname()}", flush=True)

torch.manual_seed(0)  # the same starting model on every rank
model = torch.nn.Linear(1, 1)
generator = torch.Generator().manual_seed(1 + rank)  # each rank its own shard of the data
x = torch.rand(64, 1, generator=generator)
y = 3 * x - 1
engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
                                       config=CONFIG)
losses = []
for _ in range(STEPS):
    loss = torch.nn.functional.mse_loss(engine(x), y)
    engine.backward(loss)
    engine.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    losses.append(mean.item() / size)

total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
params = torch.cat([p.detach().flatten() for p in engine.module.parameters()])
gathered = [torch.empty_like(params) for _ in range(size)]
dist.all_gather(gathered, params)
same = all(torch.equal(g, params) for g in gathered)
print(f"rank {rank} of {size}: allreduce sum {total.item():g}, parameters equal on all ranks: {same}", flush=True)
ok = same and total.item() == size * (size + 1) / 2 and losses[-1] < losses[0] / 10
if rank == 0:
    print(f"deepspeed: world size {size}, ZeRO stage {engine.zero_optimization_stage()}, "
          f"loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    print("deepspeed: OK" if ok else "deepspeed: FAILED", flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
