#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, with accounting, for the Slurm launcher's tests
# (tests/experiments/test_slurm.py) and for trying `--launcher slurm` by hand. Needs root and
# Debian's packages (installed here when missing). Idempotent: a daemon already running is left
# alone, so running it twice is harmless. No systemd: each daemon is started here, in order
# (munged, mariadbd, slurmdbd, slurmctld, slurmd), each with a bounded wait.
#
#   sudo scripts/local_slurm.sh            # then: sinfo; python -m experiments.mazes --launcher slurm ...
#
# submitit reads job states through sacct only, so accounting (slurmdbd and a MariaDB bound to
# 127.0.0.1) is part of it: without it a cancelled job would never be seen as done.
set -euo pipefail

WAIT_SECONDS=60
HOST=$(hostname)
CPUS=$(nproc)
MEMORY_MB=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
DB_PASSWORD=slurm-local-test   # the database listens on 127.0.0.1 only

say() { echo "local_slurm: $*"; }
fail() { echo "local_slurm: $*" >&2; exit 1; }
wait_for() {  # wait_for WHAT COMMAND...: run COMMAND every 0.2 s until it succeeds, for at most WAIT_SECONDS
    local what=$1; shift
    local deadline=$((SECONDS + WAIT_SECONDS))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || fail "$what not up after ${WAIT_SECONDS} s"
        sleep 0.2
    done
}
running() { pgrep -x "$1" >/dev/null; }

[[ $(id -u) == 0 ]] || fail "needs root (it installs packages and starts daemons)"
if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null || ! command -v mariadbd >/dev/null; then
    say "installing slurm-wlm, slurmdbd, munge and mariadb-server"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm slurmdbd munge mariadb-server >/dev/null
fi

# munge: the authentication every Slurm daemon and command uses
[[ -s /etc/munge/munge.key ]] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=128 2>/dev/null; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
mkdir -p /run/munge && chown munge:munge /run/munge
running munged || runuser -u munge -- /usr/sbin/munged
wait_for munge bash -c "munge -n | unmunge"

# MariaDB for accounting, on 127.0.0.1 only
mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
if ! running mariadbd; then
    setsid /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 >/var/log/mariadbd-local-slurm.log 2>&1 < /dev/null &
fi
wait_for mariadb mariadb-admin ping
mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASSWORD
StorageLoc=slurm_acct_db
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurm/slurmdbd.pid
CONF
chmod 600 /etc/slurm/slurmdbd.conf

# One node with this machine's CPUs and memory; cores are handed out one by one (cons_tres,
# CR_Core), so jobs of one CPU run side by side. linuxproc and no task plugin: no cgroups needed.
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/none
NodeName=$HOST CPUs=$CPUS RealMemory=$MEMORY_MB State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

running slurmdbd || /usr/sbin/slurmdbd
wait_for slurmdbd sacctmgr -n show cluster
sacctmgr -n show cluster format=cluster | grep -qw local || sacctmgr -i add cluster local >/dev/null

running slurmctld || /usr/sbin/slurmctld
wait_for slurmctld scontrol ping
running slurmd || /usr/sbin/slurmd
# slurmctld reports a dead slurmd's node as idle for minutes: check slurmd itself, then the node.
wait_for slurmd bash -c "pgrep -x slurmd && sinfo -h -n $HOST -o %T | grep -Eq '^(idle|mixed|allocated)'"
say "up: $(sinfo -h -o '%P %D %T %C') (partition, nodes, state, CPUs allocated/idle/other/total)"
