"""Scale side by side (issue 36): one job of W workers (1,000 and 10,000 by default), 1,000 jobs of 4 workers
submitted at once, and one job whose ConfigMap cannot fit, for each operator alone on one local control plane, in
turn (the order alternates each round), beside the API server's own floor for the same pods (C_sched).

Every figure comes from something that cannot stop early: the API server's audit log (the MPIJob POSTs, the
operator's pod creates and their answers, every request it made by verb and resource, the ConfigMap bodies it
wrote) and counts checked by LIST once the pods are there, never a watch that the API server may end under load.
For each scenario and operator:
- time from the first MPIJob POST to the last worker created (audit timestamps of the POST and of the operator's
  last pod create answered 201), and to every pod of the namespace Running (a LIST of the pods not Running finds
  none, and every worker was created: polled each second, so to within a second);
- the operator's pod creates answered 201 and 409 (AlreadyExists), and every request it made by verb and resource;
- ConfigMap bytes written: the request bodies of its ConfigMap creates, updates and patches (the audit policy
  records the request body of ConfigMaps only, never of Secrets);
- CPU: utime + stime of ``/proc/<pid>/stat`` (the whole process, every thread) from just before the first POST
  until every pod is Running and the process is idle again (under 0.05 CPU-s in a second, at most 60 s), printed
  per 1,000 pods; peak and final RSS (VmHWM, VmRSS);
- the EndpointSlices of the namespace (count, endpoints);
- the CPU-seconds each control-plane component (kube-apiserver, kube-scheduler, kube-controller-manager, etcd, kwok)
  spent from the first POST until every pod was Running.
The floor (``floor``) is a raw client creating the same worker pods, 32 in flight, timed from its first create.
``floor-service`` does the same after creating each job's headless Service, as an operator does: a Service that
selects the pods makes kube-controller-manager keep their EndpointSlices and kube-scheduler spread them (its default
PodTopologySpread constraints apply to pods a Service selects, and it counts the matching pods on every node for each
pod it places). ``--compare-floors`` runs ours beside both floors into scale-floors.json, with its own summary.
The overflow scenario POSTs a job of 6,000 workers with a 30-character namespace and a 40-character name: ours
with its webhook (refused at the POST) and without it (the reconciler alone), the Go operator (which has none).

Both operators run with raised client limits (``--kube-api-qps=1000 --kube-api-burst=1000``) and the control
plane's kube-scheduler and kube-controller-manager with theirs raised (200 QPS, 400 burst; their defaults are
50/100 and 20/30). kwok nodes of 1,000 pods each, enough for the largest scenario.
Usage: ``python -m hack.bench.scale [--operators go,ours,floor,floor-service] [--rounds 3] [--workers 1000,10000]
[--jobs 1000]``;
it writes hack/bench/results/scale.json (date, commit, command, every run), the summary of docs/benchmarks.md and
its scale plot.
"""
