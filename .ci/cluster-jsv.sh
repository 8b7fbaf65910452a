#!/bin/bash
# Grid Engine job submission verifier of the cluster in a box (.ci/cluster.sh sets it as
# the qmaster's jsv_url): TSUBAME4.0's resource types requested as TSUBAME4.0 takes them.
# There `#$ -l node_f=2` is two whole nodes; plain Grid Engine would read it as two units
# on one host (a consumable is counted per slot).  A job that asks for N units of one
# resource type and names no parallel environment is rewritten:
# - node_f=N: `-pe node N*S`, S the slots of one node (PE `node`: allocation_rule S), so
#   the job holds N whole nodes with all their slots (mpirun may start up to S ranks on
#   each), as a TSUBAME4.0 node_f job holds its nodes;
# - a fraction (node_h, ..., cpu_4) N: `-pe fill N` with one unit per slot, packed as far
#   as a node's capacity of that type allows (systems/cluster/system.yaml,
#   gridengine.resource_types).
# A job with a `-pe` of its own keeps it, its units counted per slot (`-l node_f=1 -pe mpi
# N`: N distinct nodes, one slot each).  Two resource types in one job are refused, as
# TSUBAME4.0 takes one; more whole nodes than the cluster has are refused at once rather
# than left pending for ever.
COMMON=$SGE_ROOT/$SGE_CELL/common
TYPES_FILE=$COMMON/umstudy_resource_types   # "NAME PER_NODE" lines
NODE_SLOTS=$(cat "$COMMON/umstudy_node_slots")
NODES=$(cat "$COMMON/umstudy_nodes")

jsv_on_start() { return; }

jsv_on_verify() {
  local name n asked="" units=""
  while read -r name _; do
    n=$(jsv_sub_get_param l_hard "$name")
    [ -n "$n" ] || continue
    [ -z "$asked" ] || { jsv_reject "one resource type per job (asked: $asked and $name)"; return; }
    asked=$name; units=$n
  done < "$TYPES_FILE"
  if [ -z "$asked" ] || [ -n "$(jsv_get_param pe_name)" ]; then
    jsv_accept "no resource type, or a parallel environment of its own"
    return
  fi
  case "$units" in ''|*[!0-9]*|0) jsv_reject "$asked=$units: a positive number of units"; return;; esac
  if [ "$asked" = node_f ] && [ "$units" -gt "$NODES" ]; then
    jsv_reject "node_f=$units: this cluster has $NODES nodes"
    return
  fi
  if [ "$asked" = node_f ]; then
    jsv_set_param pe_name node
    jsv_set_param pe_min $((units * NODE_SLOTS))
    jsv_set_param pe_max $((units * NODE_SLOTS))
    jsv_sub_del_param l_hard node_f
    jsv_correct "node_f=$units: -pe node $((units * NODE_SLOTS)) ($units whole nodes)"
  else
    jsv_set_param pe_name fill
    jsv_set_param pe_min "$units"
    jsv_set_param pe_max "$units"
    jsv_sub_add_param l_hard "$asked" 1
    jsv_correct "$asked=$units: -pe fill $units with $asked=1 per slot"
  fi
}

. "$SGE_ROOT/util/resources/jsv/jsv_include.sh"
jsv_main
