"""Command line: run the local control plane in the background.

    python -m hack.devcluster up --dir .cluster [--nodes 3] [--gpus-per-node 8 [--gpu-nodes 1]]
    python -m hack.devcluster status --dir .cluster
    python -m hack.devcluster down --dir .cluster [--keep-logs]

`up` leaves the components running after it exits and records them in DIR/state.json; `down` stops
exactly those processes (PID and start time must match) and removes the runtime data.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
from pathlib import Path
from types import FrameType

from .cluster import LocalCluster
from .kwok import REPO_ROOT
from .nodes import NodePool
from .processes import http_get, is_running, rss_of
from .rest import client_context
from .wait import HarnessError
from .workdir import read_state, recorded_processes, remove_runtime_data, stop_recorded

DEFAULT_CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"


def stop_and_clean(work_dir: Path, keep_logs: bool) -> int:
    """Stop what DIR/state.json records (only processes that still run, with the recorded start
    time), remove the runtime data; returns how many processes were stopped."""
    state = read_state(work_dir)
    stopped = stop_recorded(state) if state else 0
    if work_dir.is_dir():
        remove_runtime_data(work_dir, owned=False, keep_logs=work_dir / "logs" if keep_logs else None)
    return stopped


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def cmd_up(args: argparse.Namespace) -> int:
    work_dir = Path(args.dir).resolve()
    state = read_state(work_dir)
    if state is not None:
        recs = recorded_processes(state)
        if recs and all(is_running(r) for r in recs):
            print(f"already running: {state['server']} (pids {' '.join(str(r.pid) for r in recs)})")
            print(f"export KUBECONFIG={state['kubeconfig']}")
            return 0
        print(f"[harness] {work_dir}/state.json is stale: cleaning up", file=sys.stderr)
        stop_and_clean(work_dir, keep_logs=False)
    crds = [Path(c) for c in args.crd] if args.crd else ([DEFAULT_CRD] if DEFAULT_CRD.exists() else [])
    pool = NodePool(count=args.nodes, gpus_per_node=args.gpus_per_node, gpu_nodes=args.gpu_nodes)
    shutil.rmtree(work_dir / "logs", ignore_errors=True)  # fresh logs; kept if `up` fails
    cluster = LocalCluster(work_dir, nodes=pool, crds=[] if args.no_crds else crds,
                           apiserver_flags=args.apiserver_flag, detach=True, keep_logs=work_dir / "logs")
    for sig in (signal.SIGTERM, signal.SIGHUP):  # Ctrl-C already raises KeyboardInterrupt
        signal.signal(sig, _raise_interrupt)
    cluster.start()  # stops and removes everything itself if it fails or is interrupted
    print(f"local control plane up in {cluster.timings['total']:.1f}s: {cluster.server}, "
          f"{pool.count} nodes, logs in {cluster.logs_dir}")
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    work_dir = Path(args.dir).resolve()
    stopped = stop_and_clean(work_dir, keep_logs=args.keep_logs)
    print(f"stopped {stopped} processes" + (f"; logs kept in {work_dir / 'logs'}" if args.keep_logs else ""))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    work_dir = Path(args.dir).resolve()
    state = read_state(work_dir)
    if state is None:
        print(f"no cluster recorded in {work_dir}")
        return 1
    recs = recorded_processes(state)
    for r in recs:
        running = is_running(r)
        rss = f"{rss_of(r.pid) / 2**20:7.1f} MiB" if running else ""
        print(f"{r.name:24} pid {r.pid:<8} {'running' if running else 'gone':8} {rss}")
    if "server" in state:
        pki = work_dir / "pki"
        try:
            status, body = http_get(f"{state['server']}/readyz",
                                    client_context(pki / "ca.crt", pki / "admin.crt", pki / "admin.key"))
            readyz = f"{status} {body.strip()}"
        except OSError as err:
            readyz = f"unreachable ({err})"
        print(f"apiserver {state['server']} /readyz: {readyz}")
        print(f"export KUBECONFIG={state['kubeconfig']}")
    return 0 if recs and all(is_running(r) for r in recs) else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hack.devcluster", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the control plane in the background")
    down = sub.add_parser("down", help="stop it and remove its runtime data")
    status = sub.add_parser("status", help="show its processes and health")
    for s in (up, down, status):
        s.add_argument("--dir", default=".cluster", help="work directory (default: .cluster)")
    up.add_argument("--nodes", type=int, default=3, help="number of fake nodes (default: 3)")
    up.add_argument("--gpus-per-node", type=int, default=0, help="nvidia.com/gpu capacity per GPU node")
    up.add_argument("--gpu-nodes", type=int, default=None, help="how many nodes get GPUs (default: all)")
    up.add_argument("--crd", action="append", default=[], help=f"CRD file to install (default: {DEFAULT_CRD.name})")
    up.add_argument("--no-crds", action="store_true", help="install no CRD")
    up.add_argument("--apiserver-flag", action="append", default=[], help="extra kube-apiserver flag")
    down.add_argument("--keep-logs", action="store_true", help="keep DIR/logs")
    up.set_defaults(func=cmd_up)
    down.set_defaults(func=cmd_down)
    status.set_defaults(func=cmd_status)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except HarnessError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: everything started was stopped", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
