/* Monte Carlo estimate of pi, as upstream's examples/v2beta1/pi/pi.cc prints it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char *argv[]) {
  int rank, workers, name_len;
  char hostname[MPI_MAX_PROCESSOR_NAME];
  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &workers);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Get_processor_name(hostname, &name_len);
  if (rank == 0) printf("Workers: %d\n", workers);
  printf("Rank %d on host %s\n", rank, hostname);
  fflush(stdout);

  const long iterations = 20000000;
  unsigned int seed = 1234u + 7919u * (unsigned int)rank;
  long count = 0;
  for (long i = 0; i < iterations; i++) {
    double x = (double)rand_r(&seed) / RAND_MAX, y = (double)rand_r(&seed) / RAND_MAX;
    if (x * x + y * y <= 1.0) count++;
  }
  long total = 0;
  MPI_Reduce(&count, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    double pi = 4.0 * (double)total / ((double)workers * (double)iterations);
    printf("pi is approximately %.16f\n", pi);
  }
  MPI_Finalize();
  return 0;
}
