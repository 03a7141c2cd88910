#!/usr/bin/env bash
# One lent GPU slot in one command: what the open work still needs measured on a GPU, in
# order, each step bounded so that the whole ends inside SECONDS, each result written under OUT
# as soon as it exists (what a killed command leaves there still comes back).
#
#   scripts/gpu_slot.sh OUT [SECONDS]        (default 540: one 10-minute command with room)
#
#   slot.txt       read this first: the machine, torch and the commit; then, as each ends,
#                  1. the CUDA test that a compiled, graphed run starts without torch's
#                     "capturable=True can impair performance" warning (tests/test_optim.py);
#                  2. E1's exit (below);
#                  3. each E1 run's time-left estimate against its wall clock
#                     (scripts/eta_check.py), ten runs sharing the GPU as seeds.py runs them
#   e1/            E1 (docs/hopper.md): Hopper-v4 Gaussian MBPO, seeds 0-4, amp=auto against
#                  amp=off tf32=false agent.act_sync_every=1, ten processes under CUDA MPS
#                  (scripts/seeds.py under a budget that ends inside SECONDS): its report and
#                  metrics bundle, rewritten every 30 s
#   e1.log         seeds.py's own lines
#   failures.txt   only if an E1 run failed: the last 40 lines of each such run's output
# Eight files at most (a GPU lease brings back at most eight).
#
# DEVICE=cpu COMPILE=false SEEDS=0 BASE="env=pendulum key=value ..." CAMPAIGN=DIR try it on a
# CPU with tiny runs (BASE replaces the Hopper-v4 overrides; CAMPAIGN: the runs' folder;
# PYTHON: the interpreter). Exit status: E1's (seeds.py's), 0 when E1 was left out.
set -u
shopt -s nullglob
if [ $# -lt 1 ] || ! [[ ${2:-540} =~ ^[0-9]+$ ]]; then
    echo "usage: $0 OUT [SECONDS]   (SECONDS: a whole number, e.g. 540)" >&2
    exit 2
fi
out=$1 total=${2:-540}
end=$((SECONDS + total))
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
mkdir -p "$out"
device=${DEVICE:-cuda} campaign=${CAMPAIGN:-/tmp/flowmbpo_e1}
# (BASE: split at spaces, each a key=value override of every E1 run; no glob expansion)
read -ra config <<<"${BASE:-env=hopper env.version=v4}"
config+=("device=$device" "compile=${COMPILE:-true}")

log="$out/slot.txt"
{
    echo "== $(date -u '+%F %T') UTC, commit $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null)"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -2
    else
        echo "no nvidia-smi"
    fi
    "$python" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$log" 2>&1

if [ "$device" = cuda ]; then
    echo "== the capturable warning test" >>"$log"
    timeout -k 10 150 "$python" -m pytest -q -p no:cacheprovider -m cuda "$here/../tests/test_optim.py" \
        -k capturable >>"$log" 2>&1
    echo "== exit $?" >>"$log"
fi

# The checks after the campaign get a minute; seeds.py's budget (at least 150 s, its own
# floor) counts its runs' stops, each given --grace 30 s to write its checkpoint.
budget=$((end - SECONDS - 60))
if [ "$budget" -lt 150 ]; then
    echo "E1 left out: ${budget} s left" >>"$log"
    exit 0
fi
"$python" "$here/seeds.py" "$campaign" --seeds "${SEEDS:-0-4}" --procs 10 --budget "${budget}s" \
    --grace 30 --report "$out/e1" --report-every 30 --variant "model=gaussian" \
    --variant "model=gaussian amp=off tf32=false agent.act_sync_every=1" "${config[@]}" \
    >"$out/e1.log" 2>&1
e1=$?
echo "== E1 exit $e1 at $(date -u +%T)" >>"$log"
# A run that failed: the end of its own output (its log, outside OUT, would be lost)
failed=$(sed -n 's/^  its output: //p' "$out/e1.log")
if [ -n "$failed" ]; then
    while IFS= read -r runlog; do
        echo "== $runlog"
        tail -n 40 "$runlog"
    done <<<"$failed" >"$out/failures.txt" 2>&1
fi

for run in "$campaign"/runs/*/seed_*; do
    left=$((end - SECONDS))
    if [ "$left" -lt 5 ]; then
        echo "== time's up: the other runs' estimates left out"
        break
    fi
    echo "== $run"
    timeout $((left < 15 ? left : 15)) "$python" "$here/eta_check.py" "$run" --rows 6 2>&1
done >>"$log"
exit "$e1"
