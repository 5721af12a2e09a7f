#!/usr/bin/env bash
set -u
OUT=${OUT:-$PWD/cuda-out}; mkdir -p "$OUT"
tar -C .devtree/gpu -xJf .devtree/gpu/bundle.tar.xz
bundle=$PWD/.devtree/gpu/bundle
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export OPAL_PREFIX=$bundle/$(cat "$bundle/ompi_prefix")
export PMIX_MCA_mca_base_component_disable_dlopen=1 PMIX_MCA_pcompress_base_silence_warning=1
export STRATA_MPIRUN=$OPAL_PREFIX/bin/mpirun PATH=$OPAL_PREFIX/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sigs() { for p in "$@"; do echo "pid $p $(tr '\0' ' ' </proc/$p/cmdline | cut -c1-60) rank=$(tr '\0' '\n' </proc/$p/environ | grep '^OMPI_COMM_WORLD_RANK=' )"; grep -E "SigBlk|SigIgn|SigCgt" /proc/$p/status | tr '\n' ' '; echo; for t in /proc/$p/task/*; do echo "$(cat $t/comm):$(grep SigBlk $t/status | awk '{print $2}')"; done | sort | uniq -c | tr '\n' ' '; echo; done; }
for dev in cuda cpu; do
  echo "=== $dev"
  $bundle/bin/strata serve --model tests/data/models/llama --device $dev --tp-size 2 --port 30178 >"$OUT/serve_$dev.log" 2>&1 &
  pid=$!
  for i in $(seq 1 90); do curl -sf localhost:30178/health >/dev/null && break; sleep 1; done
  mpi=$(pgrep -P $pid); ranks=$(pgrep -P $mpi | tr '\n' ' ')
  sigs $pid $mpi $ranks
  kill -TERM $pid; sleep 4
  if kill -0 $pid 2>/dev/null; then
    echo "still running 4 s after SIGTERM to the launcher"; kill -USR1 $mpi; sleep 3
    if kill -0 $pid 2>/dev/null; then echo "still running after SIGUSR1 to mpirun"
      for r in $ranks; do tr '\0' '\n' </proc/$r/environ | grep -q '^OMPI_COMM_WORLD_RANK=0' && r0=$r; done
      kill -USR1 $r0; sleep 3
      kill -0 $pid 2>/dev/null && echo "still running after SIGUSR1 to rank 0" || echo "stopped after SIGUSR1 to rank 0"
    else echo "stopped after SIGUSR1 to mpirun"; fi
  else echo "stopped after SIGTERM"; fi
  kill -9 $pid $mpi $ranks 2>/dev/null; sleep 1
  tail -3 "$OUT/serve_$dev.log" | cut -c1-200
done
