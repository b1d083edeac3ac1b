/* netcheck: checks that an MPIJob's ranks run on its workers and that the workers can talk.
 *
 * Every rank prints the host it runs on. Rank 0 then measures, with the first rank on another host:
 *   latency    half the round trip of an 8-byte ping-pong (average of 1,000)
 *   bandwidth  a 4 MiB ping-pong (average of 20), in MB/s one way
 * and all ranks time an MPI_Allreduce of 1 Mi doubles (average of 10) and check its sum.
 * It exits 1 when every rank runs on one host (the hostfile was not used) or the sum is wrong.
 * Build: mpicc -O2 -o netcheck netcheck.c        Run: mpirun -n <workers x slots> ./netcheck
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PING_ROUNDS = 1000, BULK_ROUNDS = 20, BULK_BYTES = 4 << 20, REDUCE_ROUNDS = 10, REDUCE_COUNT = 1 << 20 };

static double ping_pong(int rank, int peer, char *buffer, int bytes, int rounds) {
  MPI_Barrier(MPI_COMM_WORLD);
  double began = MPI_Wtime();
  for (int i = 0; i < rounds; i++) {
    if (rank == 0) {
      MPI_Send(buffer, bytes, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
      MPI_Recv(buffer, bytes, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == peer) {
      MPI_Recv(buffer, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buffer, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    }
  }
  return (MPI_Wtime() - began) / (2.0 * rounds);  /* seconds one way */
}

/* The first rank whose host differs from rank 0's, or -1. */
static int remote_peer(const char *hosts, int size) {
  for (int r = 1; r < size; r++)
    if (strcmp(hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME, hosts) != 0) return r;
  return -1;
}

static int check_allreduce(int rank, int size) {
  double *values = malloc(sizeof(double) * REDUCE_COUNT), *sums = malloc(sizeof(double) * REDUCE_COUNT);
  for (int i = 0; i < REDUCE_COUNT; i++) values[i] = rank + 1;
  MPI_Barrier(MPI_COMM_WORLD);
  double began = MPI_Wtime();
  for (int i = 0; i < REDUCE_ROUNDS; i++)
    MPI_Allreduce(values, sums, REDUCE_COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double took = (MPI_Wtime() - began) / REDUCE_ROUNDS;
  double expected = size * (size + 1) / 2.0;
  int wrong = 0;
  for (int i = 0; i < REDUCE_COUNT; i++) wrong += sums[i] != expected;
  if (rank == 0)
    printf("allreduce of %d doubles over %d ranks: %.1f ms, sum %s\n", REDUCE_COUNT, size, took * 1e3,
           wrong ? "WRONG" : "ok");
  free(values);
  free(sums);
  return wrong != 0;
}

int main(int argc, char *argv[]) {
  int rank, size, length;
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Get_processor_name(host, &length);
  char *hosts = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
  MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  int peer = rank == 0 ? remote_peer(hosts, size) : 0;
  MPI_Bcast(&peer, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; r++) printf("Rank %d on host %s\n", r, hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
    if (peer < 0) printf("netcheck: FAILED, all %d ranks run on %s: the hostfile was not used\n", size, host);
    fflush(stdout);
  }
  int failed = peer < 0;
  if (!failed) {
    char *buffer = calloc(BULK_BYTES, 1);
    double latency = ping_pong(rank, peer, buffer, 8, PING_ROUNDS);
    double bulk = ping_pong(rank, peer, buffer, BULK_BYTES, BULK_ROUNDS);
    if (rank == 0) {
      const char *other = hosts + (size_t)peer * MPI_MAX_PROCESSOR_NAME;
      printf("latency %s <-> %s: %.1f us\n", host, other, latency * 1e6);
      printf("bandwidth %s <-> %s: %.1f MB/s\n", host, other, BULK_BYTES / bulk / 1e6);
    }
    free(buffer);
    failed = check_allreduce(rank, size);
  }
  if (rank == 0) printf("netcheck: %s\n", failed ? "FAILED" : "OK");
  free(hosts);
  MPI_Finalize();
  return failed;
}
