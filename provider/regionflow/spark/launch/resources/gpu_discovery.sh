#!/bin/sh
# regionflow's GPU discovery script for Spark (spark.executor.resource.gpu.discoveryScript,
# spark.worker.resource.gpu.discoveryScript). Prints the GPUs nvidia-smi lists as Spark's
# ResourceInformation JSON, e.g. {"name": "gpu", "addresses": ["0","1"]}; on a host without
# nvidia-smi (or where it fails) it prints no address and exits 0, so Spark reports the shortfall.
addresses=""
if command -v nvidia-smi >/dev/null 2>&1; then
  for index in $(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null); do
    case "$index" in
      ''|*[!0-9]*) continue ;;
    esac
    addresses="${addresses:+$addresses,}\"$index\""
  done
fi
printf '{"name": "gpu", "addresses": [%s]}\n' "$addresses"
