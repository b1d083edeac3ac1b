"""Horovod with PyTorch on CPU, started by mpirun (the mpirun form of an MPIJob): a linear model learns
y = 3x - 1 from synthetic data, each rank on its own shard, for a few steps; gradients are averaged by
Horovod's allreduce over MPI. Every rank prints its host, then the outcome of a check whose value is exact:
the sum of (rank + 1) over all ranks, and whether every rank ends with the same parameters."""

import socket
import sys

import horovod.torch as hvd
import torch

STEPS = 50

hvd.init()
rank, size = hvd.rank(), hvd.size()
torch.set_num_threads(1)
print(f"Rank {rank} on host {socket.gethostname()}", flush=True)

torch.manual_seed(0)  # the same starting model on every rank; broadcast below makes it certain
model = torch.nn.Linear(1, 1)
generator = torch.Generator().manual_seed(1 + rank)  # each rank its own shard of the data
x = torch.rand(64, 1, generator=generator)
y = 3 * x - 1

optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                     named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
losses = []
for _ in range(STEPS):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(hvd.allreduce(loss.detach(), name="loss").item())  # the mean over the ranks

total = hvd.allreduce(torch.tensor([rank + 1.0]), op=hvd.Sum, name="ranks").item()
params = torch.cat([p.detach().flatten() for p in model.parameters()])
same = bool(torch.equal(hvd.allgather(params.unsqueeze(0)), params.repeat(size, 1)))
print(f"rank {rank} of {size}: allreduce sum {total:g}, parameters equal on all ranks: {same}", flush=True)
ok = same and total == size * (size + 1) / 2 and losses[-1] < losses[0] / 10
if rank == 0:
    print(f"horovod: world size {size}, loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    print("horovod: OK" if ok else "horovod: FAILED", flush=True)
hvd.shutdown()
sys.exit(0 if ok else 1)
