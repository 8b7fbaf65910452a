#!/usr/bin/env bash
# A cluster in a box: N nodes on this one machine, each a network namespace + a UTS
# namespace (own address, own hostname), joined by a bridge whose links are shaped, with
# Slurm and Grid Engine both scheduling onto them.  Root only.
#   .ci/cluster.sh up [N] [--link-gbit X|auto]   start N nodes (default 4); stdout: only
#                                                `export VAR=...` lines (eval them)
#   .ci/cluster.sh down                          stop and remove everything `up` made
#   .ci/cluster.sh status                        what runs, the link rate, what was measured
#
# Layout (state under $UMSTUDY_CLUSTER_STATE, default /tmp/umstudy-cluster):
#   bridge umsbr0 10.213.0.1/24 in the root namespace (the user's shell reaches the nodes;
#   its alias names the state directory);
#   node i: netns ums-node<i>, hostname umsnode<i>, 10.213.0.<10+i> on veth umsveth<i> <-> eth0;
#   head: the controllers (slurmctld, sge_qmaster) run in the root network namespace under
#   the hostname umshead (a UTS namespace of its own), which resolves to 10.213.0.1.
#   Names resolve through a block in /etc/hosts between marker lines (Grid Engine checks
#   forward and reverse resolution of every host); `down` removes it.
# Link: tbf on both ends of each node's veth (node egress, bridge egress) at the rate
#   given by --link-gbit, $UMSTUDY_CLUSTER_LINK_GBIT, or systems/cluster/system.yaml
#   (facts.network.gbit_s, chosen by reframe/lib/umstudy/cluster.py: the papers'
#   link/memory-copy ratio applied to this machine; `auto` measures it now).  Bandwidth
#   only: this kernel has no netem, so no delay is added; the latency is what veth, the
#   bridge and the TCP stack give (measured at `up`, see `status`).
# Slurm: munged + slurmctld on the head, one `slurmd -N umsnode<i>` inside each node's
#   namespaces; MpiDefault=pmix.  Grid Engine: a cell of its own (SGE_ROOT under the state
#   directory, binaries from Debian's packages), sge_qmaster on the head, one sge_execd
#   per node, PEs `mpi` (one slot per node), `smp` (all slots on one node), `node` (whole
#   nodes) and `fill`, and TSUBAME4.0's resource types as consumables (data:
#   systems/cluster/system.yaml), requested as on TSUBAME4.0 (`-l node_f=N`: N whole
#   nodes; .ci/cluster-jsv.sh, the qmaster's job verifier).
# Exit 3 with "cluster: cannot start: <what is missing>" where it cannot run, after undoing
# what it had started.
set -euo pipefail
PROG=cluster
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
. "$HERE/lib.sh"

NET=10.213.0            # the private subnet, a /24
BR=umsbr0
# One cluster per machine (its names are fixed): the bridge's alias names its state
# directory, so `down` and `status` find it from any shell.
running_state() { sed -n 's/^umstudy-cluster //p' "/sys/class/net/$BR/ifalias" 2>/dev/null || true; }
STATE=${UMSTUDY_CLUSTER_STATE:-$(running_state)}
STATE=${STATE:-/tmp/umstudy-cluster}
HEAD=umshead
CELL=umstudy
HOSTS_BEGIN='# >>> umstudy cluster (.ci/cluster.sh) >>>'
HOSTS_END='# <<< umstudy cluster <<<'

log() { echo "cluster: $*" >&2; }

# What an MPI program on the nodes needs, exported by `up` and given to every Grid Engine
# job (sge_request): all of MPI through UCX on each node's eth0 (UCX's tcp transport):
# point-to-point too (pml/ucx, its transports and devices opened to tcp and eth0; btl
# self only), because Open MPI 4.1's ob1 over btl/tcp crashed one rank in about 20 in
# MPI_Init under load (a fragment from a peer dispatched before ob1 had registered its
# handler: a call through NULL in btl/tcp's receive handler, seen with gdb on the core);
# one-sided through osc/ucx (osc/rdma cannot make windows over btl/tcp; osc/pt2pt can,
# but measured 5-10x slower in NPB IS/CG); UCX without its shared-memory transports,
# which would otherwise join ranks of different "nodes" through this one kernel's memory
# and bypass the links.  Open MPI's own TCP (the runtime's out-of-band channel under
# mpirun) on the cluster's subnet.  (No comma in any value: Grid Engine's -v list
# cannot hold one.)
mpi_env() {
  cat <<EOF
OMPI_MCA_oob_tcp_if_include=$NET.0/24
OMPI_MCA_btl_tcp_if_include=$NET.0/24
OMPI_MCA_pml=ucx
OMPI_MCA_pml_ucx_tls=any
OMPI_MCA_pml_ucx_devices=any
OMPI_MCA_btl=self
OMPI_MCA_osc=ucx
UCX_TLS=^sm
UCX_NET_DEVICES=eth0
EOF
}
node_ip() { echo "$NET.$((10 + $1))"; }
# run CMD inside node I's network and UTS namespaces
in_node() { local i=$1; shift; nsenter --net="/run/netns/ums-node$i" --uts="$STATE/uts/umsnode$i" -- "$@"; }
# run CMD under the head's hostname (root network namespace)
in_head() { nsenter --uts="$STATE/uts/$HEAD" -- "$@"; }
nodes() { cat "$STATE/nodes" 2>/dev/null || echo 0; }
cluster_py() { PYTHONPATH="$ROOT/reframe/lib" python3 "$@"; }
# cannot_see LOG... -- MESSAGE: the logs' last lines on stderr, then cannot MESSAGE
cannot_see() {
  local f
  while [ "$1" != -- ]; do
    for f in $1; do [ -f "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done; shift
  done
  shift; cannot "$@"
}

# ---- network -----------------------------------------------------------------------
net_up() {
  local n=$1 gbit=$2 i ip
  ip link add "$BR" type bridge || cannot "no bridge (ip link add $BR type bridge failed)"
  ip link set "$BR" alias "umstudy-cluster $STATE"
  ip addr add "$NET.1/24" dev "$BR"
  ip link set "$BR" up
  for i in $(seq "$n"); do
    ip=$(node_ip "$i")
    ip netns add "ums-node$i" || cannot "no network namespaces (ip netns add failed)"
    ip link add "umsveth$i" type veth peer name "umsn$i" || cannot "no veth pairs (ip link add type veth failed)"
    ip link set "umsn$i" netns "ums-node$i"
    ip -n "ums-node$i" link set "umsn$i" name eth0
    ip -n "ums-node$i" addr add "$ip/24" dev eth0
    ip -n "ums-node$i" link set lo up
    ip -n "ums-node$i" link set eth0 up
    ip link set "umsveth$i" master "$BR"
    ip link set "umsveth$i" up
    shape "umsveth$i" "$gbit" "" || cannot "tc tbf failed on umsveth$i (kernel without sch_tbf?)"
    shape eth0 "$gbit" "ums-node$i" || cannot "tc tbf failed in ums-node$i (kernel without sch_tbf?)"
  done
}

# shape DEV GBIT [NETNS]: tbf at GBIT on DEV's egress.  Burst: 1 ms at the rate (at least
# 64 KiB, one GSO segment), so the timer's granularity does not cap the rate.
shape() {
  local dev=$1 gbit=$2 ns=$3 bits burst
  bits=$(python3 -c "print(int(float('$gbit') * 1e9))")
  burst=$(python3 -c "print(max(65536, int(float('$gbit') * 1e9 / 8 / 1000)))")
  tc ${ns:+-n "$ns"} qdisc replace dev "$dev" root tbf rate "${bits}bit" burst "$burst" latency 20ms
}

net_down() {
  local ns dev
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^ums-node[0-9]+$/ {print $1}'); do
    ip netns del "$ns" || true   # takes its end of the veth pair along
  done
  for dev in $(ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^umsveth[0-9]+(@|$)/ {sub(/@.*/, "", $2); print $2}'); do
    ip link del "$dev" 2>/dev/null || true
  done
  ip link del "$BR" 2>/dev/null || true
}

# ---- names: UTS namespaces and /etc/hosts ------------------------------------------------
# A UTS namespace outlives its process when bound onto a file (unshare --uts=FILE).
uts_make() {
  local name=$1
  mkdir -p "$STATE/uts"; touch "$STATE/uts/$name"
  unshare --uts="$STATE/uts/$name" hostname "$name" || cannot "no UTS namespaces (unshare --uts failed)"
}

uts_down() {
  local f
  for f in "$STATE"/uts/*; do
    [ -e "$f" ] || continue
    umount "$f" 2>/dev/null || true
    rm -f "$f"
  done
}

hosts_block_remove() {
  # Only our own lines go: the markers and "<subnet address> ums<name>" lines, compared
  # as strings, so nothing else in the file can match.  Rewritten in place: /etc/hosts
  # may be a bind mount (containers), which a rename would break.
  grep -qF -e "$HOSTS_BEGIN" -e "$HOSTS_END" /etc/hosts 2>/dev/null || return 0
  local kept
  kept=$(awk -v b="$HOSTS_BEGIN" -v e="$HOSTS_END" -v net="$NET." '
    $0 == b || $0 == e { next }
    NF == 2 && index($1, net) == 1 && $2 ~ /^ums(head|node[0-9]+)$/ { next }
    { print }' /etc/hosts)
  printf '%s\n' "$kept" > /etc/hosts
}

hosts_block_add() {
  local n=$1 i
  hosts_block_remove
  { echo "$HOSTS_BEGIN"
    echo "$NET.1 $HEAD"
    for i in $(seq "$n"); do echo "$(node_ip "$i") umsnode$i"; done
    echo "$HOSTS_END"; } >> /etc/hosts
}

# ---- Slurm ---------------------------------------------------------------------------------
slurm_up() {
  local n=$1 d=$STATE/slurm i p1 p2 mem cpus
  mkdir -p "$d"/{state,spool,log}
  start_munged "$d"
  read -r p1 p2 < <(free_ports 2 "$NET.1")
  cpus=$(nproc); [ "$cpus" -ge 8 ] || cpus=8
  mem=$(awk -v n="$n" '/MemTotal/ {print int($2/1024*0.8/n)}' /proc/meminfo)
  { slurm_conf_common "$d" "$HEAD" "$NET.1" "$p1" "$p2"
    cat <<CONF
SlurmdPidFile=$d/slurmd-%n.pid
SlurmdLogFile=$d/log/slurmd-%n.log
MpiDefault=pmix
# A job asking for more nodes than the cluster has is refused at submission, not left
# pending for ever.
EnforcePartLimits=ALL
# One /tmp for all nodes: Slurm's PMIx plugin names its per-step directory by job and
# step only, so each node gets its own base (TmpFS expands %n).
TmpFS=$d/tmp/%n
CONF
    for i in $(seq "$n"); do
      echo "NodeName=umsnode$i NodeAddr=$(node_ip "$i") NodeHostname=umsnode$i CPUs=$cpus RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=cluster Nodes=umsnode[1-$n] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
  } > "$d/slurm.conf"
  for i in $(seq "$n"); do mkdir -p "$d/spool/umsnode$i" "$d/tmp/umsnode$i"; done
  in_head slurmctld -f "$d/slurm.conf" || cannot_see "$d/log/slurmctld.log" -- "slurmctld did not start"
  for i in $(seq "$n"); do
    in_node "$i" slurmd -f "$d/slurm.conf" -N "umsnode$i" ||
      cannot_see "$d/log/slurmd-umsnode$i.log" -- "slurmd umsnode$i did not start"
  done
  local idle
  for _ in $(seq 60); do
    idle=$(SLURM_CONF=$d/slurm.conf sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
    [ "$idle" -ge "$n" ] && return 0
    sleep 1
  done
  cannot_see "$d/log/slurmctld.log" "$d/log/slurmd-*.log" -- "Slurm: $idle of $n nodes idle after 60 s"
}

# Jobs first: a running job's slurmstepd outlives slurmd.
slurm_cancel() {
  local d=$STATE/slurm
  [ -f "$d/slurm.conf" ] && [ -f "$d/slurmctld.pid" ] && slurm_cancel_all "$d/slurm.conf"
  return 0
}

# ---- Grid Engine -------------------------------------------------------------------------
# SGE_ROOT is a directory of our own: the Debian packages' binaries through the layout
# Grid Engine expects (bin/<arch>, utilbin/<arch>, util), and our cell beside them, so
# nothing under /var/lib/gridengine is touched and a site's own cell is left alone.
ge_env() {
  export SGE_ROOT=$STATE/sge SGE_CELL=$CELL
  export SGE_QMASTER_PORT="" SGE_EXECD_PORT=""
  [ -f "$STATE/sge/ports" ] && read -r SGE_QMASTER_PORT SGE_EXECD_PORT < "$STATE/sge/ports"
  return 0
}

ge_up() {
  local n=$1 r=$STATE/sge i arch
  local c=$r/$CELL
  arch=$(/usr/share/gridengine/util/arch)
  mkdir -p "$r/bin" "$r/utilbin" "$r/lib" "$c/common" "$c/spool/qmaster" "$c/tmp"
  ln -sfn /usr/lib/gridengine "$r/bin/$arch"
  ln -sfn /usr/lib/gridengine "$r/utilbin/$arch"
  ln -sfn /usr/share/gridengine/util "$r/util"
  free_ports 2 "$NET.1" > "$r/ports"
  ge_env
  # classic (flat file) spooling; daemons run as root (admin_user none); short names
  cat > "$c/common/bootstrap" <<EOF
admin_user              none
default_domain          none
ignore_fqdn             true
spooling_method         classic
spooling_lib            libspoolc
spooling_params         $c/common;$c/spool/qmaster
binary_path             $r/bin
qmaster_spool_dir       $c/spool/qmaster
security_mode           none
listener_threads        2
worker_threads          2
scheduler_threads       1
EOF
  echo "$HEAD" > "$c/common/act_qmaster"
  # Clients in the user's shell (root network namespace: they reach the head at $NET.1)
  # introduce themselves with this machine's hostname, which the qmaster must take for
  # the head (alias), and their requests arrive as from "localhost" (this machine's
  # loopback name), which must be an admin and submit host.  Both are the head: no
  # node's daemon connects from the root namespace.
  echo "$HEAD $(hostname)" > "$c/common/host_aliases"
  # Global configuration: Debian's default with the execd spool here, root's jobs
  # allowed (min_uid 0: tests run as root), scripts run by their #! line, quick load
  # reports so nodes appear within seconds.
  sed -e "s|^execd_spool_dir .*|execd_spool_dir        $c/spool|" \
      -e 's|^min_uid .*|min_uid                0|' -e 's|^min_gid .*|min_gid                0|' \
      -e 's|^shell_start_mode .*|shell_start_mode       unix_behavior|' \
      -e 's|^load_report_time .*|load_report_time       00:00:05|' \
      -e 's|^max_unheard .*|max_unheard            00:01:00|' \
      -e 's|^mailer .*|mailer                 /bin/true|' \
      -e "s|^jsv_url .*|jsv_url                script:$HERE/cluster-jsv.sh|" \
      /usr/share/gridengine/default-configuration > "$c/common/configuration.template"
  # the cell's first contents, spooled before the qmaster starts (as Debian's init_cluster)
  local h log=$STATE/sge/spool-init.log
  mkdir -p "$c/common/hosts"
  for h in "$HEAD" localhost; do printf 'hostname %s\n' "$h" > "$c/common/hosts/$h"; done
  { /usr/lib/gridengine/spoolinit classic libspoolc "$c/common;$c/spool/qmaster" init &&
    spool_defaults configuration "$c/common/configuration.template" &&
    spool_defaults complexes /usr/share/gridengine/util/resources/centry &&
    spool_defaults usersets /usr/share/gridengine/util/resources/usersets &&
    spool_defaults managers root &&
    spool_defaults adminhosts "$c/common/hosts" &&
    spool_defaults submithosts "$c/common/hosts"; } > "$log" 2>&1 ||
    cannot_see "$log" -- "Grid Engine's spool could not be initialised"
  in_head /usr/lib/gridengine/sge_qmaster || cannot_see "$c/spool/qmaster/messages" /tmp/qmaster_messages -- "sge_qmaster did not start"
  for _ in $(seq 30); do qstat >/dev/null 2>&1 && break; sleep 0.5; done
  qstat >/dev/null 2>&1 || cannot_see "$c/spool/qmaster/messages" /tmp/qmaster_messages -- "sge_qmaster does not answer"
  ge_configure "$n"
  for i in $(seq "$n"); do
    mkdir -p "$c/spool/umsnode$i" "$c/tmp/umsnode$i"
    in_node "$i" /usr/lib/gridengine/sge_execd ||
      cannot_see "$c/spool/umsnode$i/messages" /tmp/execd_messages -- "sge_execd on umsnode$i did not start"
  done
  local up
  for _ in $(seq 60); do
    up=$(qhost 2>/dev/null | awk '$1 ~ /^umsnode/ && $4 != "-"' | wc -l)
    [ "$up" -ge "$n" ] && return 0
    sleep 1
  done
  cannot_see "$c/spool/qmaster/messages" "$c/spool/umsnode*/messages" -- "Grid Engine: $up of $n execution hosts report after 60 s"
}

# qc ARGS...: qconf, its chatter into the state's log; on failure the log and exit 3
qc() {
  qconf "$@" >> "$STATE/sge/conf/qconf.log" 2>&1 ||
    cannot_see "$STATE/sge/conf/qconf.log" -- "qconf $* failed"
}

spool_defaults() { /usr/lib/gridengine/spooldefaults "$@"; }

# Hosts, complexes, PEs and the queue, through qconf (Grid Engine's admin interface).
ge_configure() {
  local n=$1 c=$SGE_ROOT/$CELL t=$STATE/sge/conf i list
  mkdir -p "$t"
  list=$(for i in $(seq "$n"); do printf 'umsnode%s ' "$i"; done)
  for i in $(seq "$n"); do qc -ah "umsnode$i"; qc -as "umsnode$i"; done
  # TSUBAME4.0's resource types, consumable per slot: `-l node_f=1 -pe mpi 4` takes one
  # whole node per rank.  How many of each a node here holds comes from the data.
  local types; types=$(cluster_py -m umstudy.cluster --ge-resource-types)
  echo "$types" > "$c/common/umstudy_resource_types"   # read by .ci/cluster-jsv.sh
  qconf -sc > "$t/complexes"
  echo "$types" | while read -r name _; do
    printf '%-14s %-10s INT <= YES YES 0 0\n' "$name" "$name" >> "$t/complexes"
  done
  qc -Mc "$t/complexes"
  local values; values=$(echo "$types" | awk '{printf "%s%s=%s", (NR>1?",":""), $1, $2}')
  for i in $(seq "$n"); do
    printf 'hostname umsnode%s\nload_scaling NONE\ncomplex_values %s\nuser_lists NONE\nxuser_lists NONE\nprojects NONE\nxprojects NONE\nusage_scaling NONE\nreport_variables NONE\n' \
      "$i" "$values" > "$t/exec-umsnode$i"
    qc -Ae "$t/exec-umsnode$i"
  done
  printf 'group_name @allhosts\nhostlist %s\n' "$list" > "$t/allhosts"
  qc -Ahgrp "$t/allhosts"
  # mpi: one slot per node (allocation_rule 1), ranks started by qrsh -inherit (Open
  # MPI's gridengine support); smp: all slots on one node; node: whole nodes, fill: as
  # many on a node as fit (TSUBAME4.0's resource types, .ci/cluster-jsv.sh).
  local slots; slots=$(nproc); [ "$slots" -ge 8 ] || slots=8
  echo "$slots" > "$c/common/umstudy_node_slots"
  echo "$n" > "$c/common/umstudy_nodes"
  for pe in "mpi 1" "smp \$pe_slots" "node $slots" "fill \$fill_up"; do
    set -- $pe
    printf 'pe_name %s\nslots 9999\nuser_lists NONE\nxuser_lists NONE\nstart_proc_args NONE\nstop_proc_args NONE\nallocation_rule %s\ncontrol_slaves TRUE\njob_is_first_task FALSE\nurgency_slots min\naccounting_summary FALSE\nqsort_args NONE\n' \
      "$1" "$2" > "$t/pe-$1"
    qc -Ap "$t/pe-$1"
  done
  # Scheduling every second, not every 15 s.
  qconf -ssconf | sed -e 's/^schedule_interval .*/schedule_interval 0:0:1/' \
    -e 's/^flush_submit_sec .*/flush_submit_sec 1/' -e 's/^flush_finish_sec .*/flush_finish_sec 1/' \
    > "$t/sconf"
  qc -Msconf "$t/sconf"
  # One queue on every node: as many slots as a Slurm node has CPUs; no load threshold (all
  # nodes share this machine's load); each node's TMPDIR on its own (one /tmp for all).
  local tmpdirs; tmpdirs=$(for i in $(seq "$n"); do printf ',[umsnode%s=%s]' "$i" "$c/tmp/umsnode$i"; done)
  cat > "$t/queue" <<EOF
qname                 all.q
hostlist              @allhosts
seq_no                0
load_thresholds       NONE
suspend_thresholds    NONE
nsuspend              1
suspend_interval      00:05:00
priority              0
min_cpu_interval      00:05:00
processors            UNDEFINED
qtype                 BATCH INTERACTIVE
ckpt_list             NONE
pe_list               mpi smp node fill
rerun                 FALSE
slots                 $slots
tmpdir                /tmp$tmpdirs
shell                 /bin/bash
prolog                NONE
epilog                NONE
shell_start_mode      unix_behavior
starter_method        NONE
suspend_method        NONE
resume_method         NONE
terminate_method      NONE
notify                00:00:60
owner_list            NONE
user_lists            NONE
xuser_lists           NONE
subordinate_list      NONE
complex_values        NONE
projects              NONE
xprojects             NONE
calendar              NONE
initial_state         default
s_rt                  INFINITY
h_rt                  INFINITY
s_cpu                 INFINITY
h_cpu                 INFINITY
s_fsize               INFINITY
h_fsize               INFINITY
s_data                INFINITY
h_data                INFINITY
s_stack               INFINITY
h_stack               INFINITY
s_core                INFINITY
h_core                INFINITY
s_rss                 INFINITY
h_rss                 INFINITY
s_vmem                INFINITY
h_vmem                INFINITY
EOF
  qc -Aq "$t/queue"
  # Every job gets the MPI environment (a site's default request; `-v` lists cannot
  # hold commas, and none of these values has one).
  echo "-v $(mpi_env | paste -sd, -)" > "$c/common/sge_request"
}

ge_cancel() {
  local c=$STATE/sge/$CELL
  [ -f "$c/spool/qmaster/qmaster.pid" ] || return 0
  ge_env
  qdel -u '*' >/dev/null 2>&1 || true
  for _ in $(seq 20); do [ -z "$(qstat -u '*' 2>/dev/null)" ] && break; sleep 0.5; done
}

# ---- link measurement ----------------------------------------------------------------------
# MPI between two nodes with the project's own ping-pong (coarray-bench's cab-pingpong,
# its raw MPI-3 RMA get: MPI_Get + flush + barrier, so the small-message figure is a get's
# round trip with its barrier, as the program documents), through Slurm as any job:
# 8-byte latency and 4 MiB bandwidth, 3 runs each; JSON in $STATE/link.json.  (Get,
# not put: a put's time includes the target's polling, get's only the link and the
# origin's MPI.)
measure_link() {
  local gbit=$1 build=${UMSTUDY_BUILD:-$ROOT/build/default} out=$STATE/link.json
  local prog=$build/coarray-bench/cab-pingpong raw=$STATE/link.raw.jsonl
  if [ "$(nodes)" -lt 2 ]; then
    echo "{\"measured\": false, \"reason\": \"one node: no link to measure\", \"link_gbit\": $gbit}" > "$out"
    return 0
  fi
  if [ ! -x "$prog" ]; then
    echo "{\"measured\": false, \"reason\": \"$prog not built (make build, or set UMSTUDY_BUILD)\", \"link_gbit\": $gbit}" > "$out"
    log "link not measured: $prog not built"
    return 0
  fi
  local rc=0 size loops env_words
  mapfile -t env_words < <(mpi_env)
  : > "$raw"
  for _ in 1 2 3; do
    for size in 8 4M; do
      [ "$size" = 8 ] && loops=200 || loops=20
      env SLURM_CONF="$STATE/slurm/slurm.conf" "${env_words[@]}" timeout 120 \
        srun -N 2 --ntasks-per-node=1 --mpi=pmix "$prog" --ops get --raw --min "$size" --max "$size" \
        --loop "$loops" --trials 1 --check-rounds 0 >> "$raw" 2>>"$STATE/link.err" || rc=$?
      [ "$rc" = 0 ] || break 2
    done
  done
  cluster_py -m umstudy.cluster --summarize-pingpong "$raw" --link-gbit "$gbit" --status "$rc" > "$out"
}

# ---- up / down / status -----------------------------------------------------------------
exports() {
  local q e
  read -r q e < "$STATE/sge/ports"
  cat <<EOF
export UMSTUDY_CLUSTER_STATE=$STATE
export SLURM_CONF=$STATE/slurm/slurm.conf
export SGE_ROOT=$STATE/sge
export SGE_CELL=$CELL
export SGE_QMASTER_PORT=$q
export SGE_EXECD_PORT=$e
EOF
  mpi_env | sed 's/^/export /'
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

is_up() {
  [ -f "$STATE/up" ] && alive "$STATE/slurm/slurmctld.pid" && alive "$STATE/sge/$CELL/spool/qmaster/qmaster.pid"
}

valid_gbit() {
  python3 -c 'import sys; sys.exit(not float(sys.argv[1]) > 0)' "$1" 2>/dev/null ||
    { echo "cluster: link rate $1 is not a positive number of Gbit/s (or auto)" >&2; exit 2; }
}

# link_gbit ASKED: the rate asked for (a number), measured now (auto), or the system file's
link_gbit() {
  case "$1" in
    '') cluster_py -m umstudy.cluster --default-gbit ;;
    auto) cluster_py -m umstudy.cluster --measure --gbit ;;
    *) echo "$1" ;;
  esac
}

up() {
  local n=4 asked=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --link-gbit) asked=${2:-}; shift 2 ;;
      --link-gbit=*) asked=${1#*=}; shift ;;
      [0-9]*) n=$1; shift ;;
      *) echo "usage: $0 up [N] [--link-gbit X|auto]" >&2; exit 2 ;;
    esac
  done
  case "$n" in ''|*[!0-9]*) echo "cluster: N=$n is not a number of nodes (1..64)" >&2; exit 2;; esac
  [ "$n" -ge 1 ] && [ "$n" -le 64 ] || { echo "cluster: N=$n is not a number of nodes (1..64)" >&2; exit 2; }
  [ -n "$asked" ] || asked=${UMSTUDY_CLUSTER_LINK_GBIT:-}
  case "$asked" in ''|auto) ;; *) valid_gbit "$asked" ;; esac
  need_root "namespaces, a bridge and daemons that run jobs as their owners"
  need_cmds "iproute2, util-linux" ip tc unshare nsenter python3
  need_cmds "Debian: apt-get install slurmctld slurmd slurm-client munge; .ci/setup-system.sh does" \
    munged slurmctld slurmd srun sinfo squeue scancel
  need_cmds "Debian: apt-get install gridengine-master gridengine-exec gridengine-client; .ci/setup-system.sh does" \
    qconf qsub qstat qhost qdel
  [ -x /usr/lib/gridengine/sge_qmaster ] || cannot "/usr/lib/gridengine/sge_qmaster not found (gridengine-master)"
  [ -x /usr/lib/gridengine/sge_execd ] || cannot "/usr/lib/gridengine/sge_execd not found (gridengine-exec)"
  need_cmds "Debian: apt-get install openmpi-bin" mpirun
  local other; other=$(running_state)
  [ -z "$other" ] || [ "$other" = "$STATE" ] ||
    cannot "a cluster is up already, state $other (UMSTUDY_CLUSTER_STATE=$other .ci/cluster.sh down)"
  if is_up; then
    log "already up ($(nodes) nodes, state $STATE)"
    exports; return 0
  fi
  if [ -e "$STATE" ] || [ -n "$other" ]; then log "stale state in $STATE: cleaning it first"; down_all; fi
  # what is not ours must not be taken, nor undone by the cleanup below
  ip link show "$BR" >/dev/null 2>&1 && cannot "a link named $BR exists already (not made by this script)"
  ip netns list | grep -q '^ums-node' && cannot "namespaces ums-node* exist already (not made by this script)"
  ip -4 route show | grep -q "^$NET\.0/24" && cannot "$NET.0/24 is already routed here (ip route): the cluster's subnet is taken"
  local gbit; gbit=$(link_gbit "$asked")
  local t0=$SECONDS
  mkdir -p "$STATE"
  echo "$n" > "$STATE/nodes"; echo "$gbit" > "$STATE/link_gbit"
  trap 'rc=$?; if [ $rc -ne 0 ]; then
          if [ -n "${UMSTUDY_CLUSTER_KEEP_FAILED:-}" ]; then log "partial start kept (UMSTUDY_CLUSTER_KEEP_FAILED): run down"
          else log "undoing a partial start"; down_all; fi; fi' EXIT
  log "network: bridge $BR $NET.1, $n nodes, links shaped to $gbit Gbit/s each way (tbf; no delay: no netem)"
  net_up "$n" "$gbit"
  uts_make "$HEAD"
  for i in $(seq "$n"); do uts_make "umsnode$i"; done
  hosts_block_add "$n"
  log "slurm: slurmctld on $HEAD, slurmd on umsnode[1-$n]"
  slurm_up "$n"
  log "grid engine: sge_qmaster on $HEAD, sge_execd on umsnode[1-$n]"
  ge_up "$n"
  log "link: MPI ping-pong umsnode1 <-> umsnode2"
  measure_link "$gbit"
  touch "$STATE/up"
  trap - EXIT
  log "up in $((SECONDS - t0)) s; $(cluster_py -m umstudy.cluster --describe "$STATE/link.json")"
  exports
}

# Everything `up` made, whatever state it is in; harmless when nothing is there.
down_all() {
  local i pids
  slurm_cancel || true
  ge_cancel || true
  # The daemons, all at once.  Their state is thrown away below, so one that has not
  # finished its orderly shutdown in 3 s (sge_qmaster takes about 7) is killed.
  stop_pidfiles -w 3 "$STATE"/slurm/slurmd-*.pid "$STATE/slurm/slurmctld.pid" \
    "$STATE"/sge/$CELL/spool/umsnode*/execd.pid "$STATE/sge/$CELL/spool/qmaster/qmaster.pid" \
    "$STATE/slurm/munge/munged.pid"
  # whatever still runs inside the nodes' namespaces was started by the cluster (jobs,
  # their children): end it by pid
  for i in $(seq 64); do
    [ -e "/run/netns/ums-node$i" ] || continue
    pids=$(ip netns pids "ums-node$i" 2>/dev/null || true)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
  done
  uts_down
  net_down
  hosts_block_remove
  case "$STATE" in /|'') ;; *) rm -rf "$STATE" ;; esac
}

down() {
  [ "$(id -u)" = 0 ] || { echo "cluster: down needs root" >&2; exit 3; }
  local other; other=$(running_state)
  if [ -n "$other" ] && [ "$other" != "$STATE" ]; then
    echo "cluster: the cluster that is up has its state in $other, not $STATE: UMSTUDY_CLUSTER_STATE=$other $0 down" >&2
    exit 3
  fi
  local t0=$SECONDS
  down_all
  log "down in $((SECONDS - t0)) s"
}

status() {
  if [ ! -e "$STATE" ]; then echo "cluster: down (no state in $STATE)"; return 0; fi
  local n; n=$(nodes)
  if is_up; then echo "cluster: up, $n nodes, state $STATE"; else echo "cluster: NOT fully up (state $STATE; run down, then up)"; fi
  echo "link: $(cat "$STATE/link_gbit" 2>/dev/null) Gbit/s per node each way (tbf), no added delay"
  local f
  for f in "$STATE/slurm/munge/munged.pid" "$STATE/slurm/slurmctld.pid" "$STATE"/slurm/slurmd-*.pid \
           "$STATE/sge/$CELL/spool/qmaster/qmaster.pid" "$STATE/sge/$CELL/spool/"umsnode*/execd.pid; do
    [ -e "$f" ] || continue
    if alive "$f"; then echo "  running  pid $(cat "$f")  ${f#"$STATE"/}"; else echo "  DEAD     ${f#"$STATE"/}"; fi
  done
  if alive "$STATE/slurm/slurmctld.pid"; then
    SLURM_CONF=$STATE/slurm/slurm.conf sinfo -h -N -o '  slurm %N %t, %c cpus' 2>/dev/null || true
  fi
  if alive "$STATE/sge/$CELL/spool/qmaster/qmaster.pid"; then
    ge_env; qhost 2>/dev/null | sed 's/^/  ge /' || true
  fi
  [ -f "$STATE/link.json" ] && { echo "measured:"; sed 's/^/  /' "$STATE/link.json"; }
  return 0
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up [N] [--link-gbit X|auto] | down | status" >&2; exit 2 ;;
esac
