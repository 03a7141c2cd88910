#!/usr/bin/env bash
# The table "Many runs on one GPU, with and without CUDA MPS" (docs/benchmarks.md): one
# scripts/seeds.py invocation per row, all in one campaign folder (Hopper-v4 at MBPO's
# settings, seeds 0..P-1), so that a row's runs continue where the row before left them and
# only the first row pays the cold compiles. Each row is stopped after its seconds as a
# scheduler would stop it (SIGTERM: every run stops with its checkpoint); its rates are
# taken past the random steps and past each process's first logged interval (its first model
# fit or resume, compiles and graph captures), so rows of fresh and continued runs compare.
#
#   scripts/mps_table.sh FOLDER REPORT SECONDS ROW...    ROW = RUNS:MPS:SECONDS[:BATCH]
#
# e.g. 10:on:110 (ten runs, a process each, under MPS) or 10:on:110:5 (ten runs as two
# processes of five seeds batched, seeds.py --batch 5; such a row's runs are a campaign of their
# own, FOLDER-b5, so that each batch's seeds stand at one step).
#
# SECONDS bounds the whole table: a row that would end past it is shortened, or left out if
# under a minute would be left. The report (REPORT/summary.md; REPORT-bN for rows of batches
# of N) has one footer line per row.
# EXTRA="key=value ..." adds overrides; DEVICE=cpu COMPILE=false and tiny settings in EXTRA
# try the script on a CPU.
set -u
if [ $# -lt 4 ]; then
    echo "usage: $0 FOLDER REPORT SECONDS RUNS:MPS:SECONDS[:BATCH]..." >&2
    exit 2
fi
folder=$1 report=$2 total=$3
shift 3
end=$((SECONDS + total)) used=""
here=$(cd "$(dirname "$0")" && pwd)
# Every row's runs and each report: Hopper-v4, no evaluations, no snapshots (EXTRA: split at spaces)
config=(env=hopper env.version=v4 "device=${DEVICE:-cuda}" "compile=${COMPILE:-true}" logger.every=250
    eval.every=1000000 checkpoint.pool=false checkpoint.snapshots=false ${EXTRA:-})
for row in "$@"; do
    IFS=: read -r runs mps seconds batch <<<"$row"
    batch=${batch:-1}
    procs=$(((runs + batch - 1) / batch)) where=$folder rep=$report
    [ "$batch" -gt 1 ] && where="$folder-b$batch" rep="$report-b$batch"
    case " $used " in *" $where:$rep "*) ;; *) used="$used $where:$rep" ;; esac
    left=$((end - SECONDS - 20)) # (a stop takes seconds: the runs' checkpoints)
    [ "$seconds" -gt "$left" ] && seconds=$left
    if [ "$seconds" -lt 60 ]; then
        echo "== $runs runs, $procs processes, MPS $mps: left out (${left} s left)"
        continue
    fi
    echo "== $runs runs, $procs processes ($batch seeds each), MPS $mps, ${seconds} s, from $(date -u +%T)"
    timeout -s TERM -k 60 "$seconds" python3 "$here/seeds.py" "$where" --batch "$batch" \
        --seeds "0-$((runs - 1))" --procs "$procs" --mps "$mps" --steps 15000 --grace 45 \
        --report "$rep" --report-every 30 "${config[@]}"
    echo "== exit $? at $(date -u +%T)"
done
for pair in $used; do # each campaign's report: its footer lines, one per row
    where=${pair%%:*} rep=${pair#*:}
    python3 "$here/seeds.py" "$where" --report "$rep" --report-only "${config[@]}"
    grep "past the random steps" "$rep/summary.md"
done
