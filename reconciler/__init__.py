"""The MPIJob reconciler: watches MPIJobs and their children and drives each job through its life."""
