#!/bin/bash
# As upstream's build/base/entrypoint.sh: the launcher waits until its own name and the hostfile's
# names resolve, then runs the command. Works as root and as uid 1000.
set -e
resolve_host() {
  local host=$1 backoff=0.1 counter=0
  until getent hosts "$host" >/dev/null; do
    if (( counter == 10 )); then echo "Couldn't resolve $host"; return 0; fi
    sleep "$backoff"
    echo "Couldn't resolve $host... Retrying"
    counter=$((counter + 1))
    backoff=$(awk "BEGIN {print $backoff + $backoff}")
  done
  echo "Resolved $host"
}
if [[ "${K_MPI_JOB_ROLE:-}" == launcher && -f /etc/mpi/hostfile ]]; then
  resolve_host "$HOSTNAME"
  while read -r host _; do
    [[ -n "$host" ]] && resolve_host "${host%%:*}"
  done < /etc/mpi/hostfile
fi
exec "$@"
