#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, for the Slurm tests: Debian's slurm-wlm and
# munge (installed with apt-get only when missing), a generated slurm.conf with two stand-in GPUs
# and eight shards, state under DIR. Run as root.
#   bash tests/slurm/cluster.sh start DIR   # prints the SLURM_CONF line to export
#   bash tests/slurm/cluster.sh stop DIR
set -euo pipefail
cmd="${1:?start|stop}"
DIR="$(mkdir -p "${2:?DIR}" && cd "$2" && pwd)"

stop() {
    # Jobs first: their slurmstepd processes outlive the daemons.
    if [ -f "$DIR/slurmctld.pid" ]; then
        SLURM_CONF="$DIR/slurm.conf" scancel --full --quiet --user=root 2>/dev/null || true
        sleep 1
    fi
    for p in slurmd slurmctld munged; do
        [ -f "$DIR/$p.pid" ] && kill "$(cat "$DIR/$p.pid")" 2>/dev/null || true
    done
    sleep 1
    for p in slurmd slurmctld munged; do
        [ -f "$DIR/$p.pid" ] && kill -9 "$(cat "$DIR/$p.pid")" 2>/dev/null || true
        rm -f "$DIR/$p.pid"
    done
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: cluster.sh start|stop DIR" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "error: the test cluster runs its daemons as root" >&2; exit 1; }

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "==> installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq slurm-wlm munge >/dev/null; } ||
        { echo "error: apt-get could not install slurm-wlm and munge" >&2; exit 1; }
fi

HOST="$(hostname -s)"
CPUS="$(nproc)"
MEM_MB="$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))"
mkdir -p "$DIR"/{munge,state,spool,log,dev}
touch "$DIR/dev/nvidia0" "$DIR/dev/nvidia1"

# munge: its own key, socket and files, so a system munged (if any) is left alone.
[ -f "$DIR/munge/munge.key" ] || dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
chmod 0700 "$DIR/munge"; chmod 0400 "$DIR/munge/munge.key"
munged --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
    --pid-file="$DIR/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/seed" --force

cat > "$DIR/gres.conf" <<CONF
AutoDetect=off
Name=gpu File=$DIR/dev/nvidia[0-1]
Name=shard Count=8
CONF
cat > "$DIR/slurm.conf" <<CONF
ClusterName=dryml-test
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# A requeued job may start again once its old credential has expired: cred_expire (120 s by
# default) is that wait, then the next scheduling pass; 10 s here (a requeue test: 178 -> 25 s).
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=10
CredType=cred/munge
SlurmctldPort=$(( 20000 + RANDOM % 20000 ))
SlurmdPort=$(( 40000 + RANDOM % 20000 ))
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
SchedulerType=sched/backfill
# Slurm waits up to 3 s (batch_sched_delay) before starting queued batch jobs on freed CPUs;
# short test jobs and sweep tasks would spend most of their time in that wait.
SchedulerParameters=batch_sched_delay=0
GresTypes=gpu,shard
ReturnToService=2
MpiDefault=none
# Memory is watched every second and a job over its --mem is killed (state OUT_OF_MEMORY):
# without cgroups this is how Slurm enforces --mem.
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=1
JobAcctGatherParams=OverMemoryKill
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:2,shard:8 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$DIR/slurm.conf"
slurmctld -c -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
    if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
        echo "SLURM_CONF=$SLURM_CONF"
        exit 0
    fi
    sleep 0.2
done
echo "error: the node did not come up; logs in $DIR/log" >&2
tail -20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
stop
exit 1
