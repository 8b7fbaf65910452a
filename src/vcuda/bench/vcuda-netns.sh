#!/usr/bin/env bash
# vcuda-netns: P003's layout on one GPU machine — the client on one "node", one
# vcuda-server per GPU on each of N other "nodes" — where the nodes are network + UTS
# namespaces of this machine joined by veth pairs to a private bridge, so every byte
# between client and servers crosses a network interface (TCP, no loopback), at a rate
# that can be shaped with tbf.  For a machine with several GPUs and no cluster.
#
#   vcuda-netns [--nodes N] [--gpus-per-node G] [--gbit RATE] [--mtu BYTES]
#               [--launch-opts "OPTS"] [--] PROGRAM [ARGS...]
#
# N defaults to every GPU nvidia-smi lists / G (G default 1); node k serves GPUs
# k*G..k*G+G-1.  --gbit: tbf at RATE Gbit/s on both ends of every node's link (the
# client's too); default unshaped.  No delay can be added (that would need netem).
# The namespaces are named vn<id>-c (client) and vn<id>-n<k>, their hostnames likewise,
# on 10.214.<x>.0/24 (x: the first subnet no interface uses).  Servers start through
# vcuda-launch --launcher netns, which prints one placement line per node on stdout;
# before them this prints one line describing the network:
#   {"bench":"netns","client":HOST,"nodes":[HOST...],"link_gbit":RATE|null,"mtu":BYTES}
# Everything it made is removed at exit, whatever the program did.  Needs root (or
# CAP_NET_ADMIN + CAP_SYS_ADMIN), iproute2 (`ip`, and `tc` for --gbit) and unshare;
# without them it says which is missing and exits 77 (one JSON status line on stdout).
# Exit status: the program's; 77 when it cannot run here; 2 for usage errors.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
unsupported() {
  echo "vcuda-netns: $1" >&2
  printf '{"bench":"%s","status":"unsupported","reason":"vcuda-netns: %s"}\n' "$(basename "${prog:-vcuda-netns}")" "$1"
  exit 77
}
usage() { echo "vcuda-netns: $1 (vcuda-netns --help)" >&2; exit 2; }
nodes="" gpn=1 gbit="" mtu=1500 launch_opts=""
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --gpus-per-node) gpn=$2; shift 2 ;;
    --gbit) gbit=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --launch-opts) launch_opts=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) usage "unknown option $1" ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || usage "no program given"
prog=$1
[[ "$gpn" =~ ^[0-9]+$ ]] && [ "$gpn" -gt 0 ] || usage "--gpus-per-node '$gpn' is not a positive number"
[[ "$mtu" =~ ^[0-9]+$ ]] && [ "$mtu" -ge 1280 ] && [ "$mtu" -le 65535 ] || usage "--mtu '$mtu': 1280..65535"
if [ -n "$gbit" ]; then
  python3 -c "import sys; r = float(sys.argv[1]); sys.exit(0 if 0.001 <= r <= 400 else 1)" "$gbit" 2>/dev/null ||
    usage "--gbit '$gbit' is not a rate in Gbit/s (0.001..400)"
fi
if [ -z "$nodes" ]; then
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') || ngpu=0
  nodes=$((ngpu / gpn))
  [ "$nodes" -gt 0 ] || unsupported "no GPU on this machine (nvidia-smi lists $ngpu; --nodes N to choose)"
fi
[[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -gt 0 ] && [ "$nodes" -le 200 ] || usage "--nodes '$nodes': 1..200"
command -v ip >/dev/null || unsupported "no ip (iproute2) on PATH"
command -v unshare >/dev/null || unsupported "no unshare (util-linux) on PATH"
[ -z "$gbit" ] || command -v tc >/dev/null || unsupported "--gbit needs tc (iproute2) on PATH"
[ -x "$here/vcuda-launch" ] || unsupported "no vcuda-launch beside this script ($here)"

id=$$
C="vn$id-c" BR="vn${id}br"
made_ns=() made_br=0
cleanup() {
  local ns p dev
  for ns in "${made_ns[@]}"; do
    # a server that outlived the launcher would keep the namespace's processes alive
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  # a deleted namespace's devices go later, in the kernel's own time: the host ends
  # (and with them the pairs) go now, so nothing of this run is seen after it
  for dev in $(ip -o link show 2>/dev/null | awk -F': ' -v p="vn${id}h" 'index($2, p) == 1 {sub(/@.*/, "", $2); print $2}'); do
    ip link del "$dev" 2>/dev/null
  done
  [ "$made_br" = 1 ] && ip link del "$BR" 2>/dev/null
  return 0
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# the first 10.214.x.0/24 that no interface of this namespace uses
used=$(ip -4 -o addr show 2>/dev/null | awk '{print $4}')
x=""
for ((i = 0; i < 250; i++)); do grep -q "^10\.214\.$i\." <<<"$used" || { x=$i; break; }; done
[ -n "$x" ] || unsupported "every subnet 10.214.0-249.0/24 is in use here"
ip link add "$BR" type bridge 2>/dev/null || unsupported "cannot create a bridge (ip link add type bridge: root or CAP_NET_ADMIN needed)"
made_br=1
ip link set "$BR" up || unsupported "cannot bring bridge $BR up"

# shape DEV NETNS: tbf at the link rate on DEV's egress (in NETNS, or here when empty);
# burst: 1 ms at the rate, at least 64 KiB (one TSO segment)
shape() {
  local bits burst
  bits=$(python3 -c "import sys; print(int(float(sys.argv[1]) * 1e9))" "$gbit")
  burst=$(python3 -c "import sys; print(max(65536, int(float(sys.argv[1]) * 1e9 / 8 / 1000)))" "$gbit")
  tc ${2:+-n "$2"} qdisc replace dev "$1" root tbf rate "${bits}bit" burst "$burst" latency 20ms
}
# node K NAME: a namespace NAME with hostname NAME at 10.214.x.(10+K) on the bridge
hosts=()
node() {
  local k=$1 ns=$2 host_end="vn${id}h$1"
  ip netns add "$ns" 2>/dev/null || unsupported "cannot create network namespace $ns (ip netns add)"
  made_ns+=("$ns")
  ip link add "$host_end" mtu "$mtu" type veth peer name eth0 mtu "$mtu" netns "$ns" 2>/dev/null ||
    unsupported "cannot create a veth pair into $ns"
  ip link set "$host_end" master "$BR" && ip link set "$host_end" up &&
    ip -n "$ns" link set lo up && ip -n "$ns" link set eth0 up &&
    ip -n "$ns" addr add "10.214.$x.$((10 + k))/24" dev eth0 || unsupported "cannot configure $ns's link"
  if [ -n "$gbit" ]; then
    { shape "$host_end" "" && shape eth0 "$ns"; } || unsupported "tc tbf failed on $ns's link (kernel without sch_tbf?)"
  fi
}
node 0 "$C"
server_ns=()
for ((k = 1; k <= nodes; k++)); do node "$k" "vn$id-n$k"; server_ns+=("vn$id-n$k"); done
list=$(IFS=,; echo "${server_ns[*]}")
printf '{"bench":"netns","client":"%s","nodes":[%s],"link_gbit":%s,"mtu":%s}\n' "$C" \
  "$(printf '"%s",' "${server_ns[@]}" | sed 's/,$//')" "${gbit:-null}" "$mtu"
# the launcher's run directory (token, endpoints) must be one every namespace sees: the
# file system is shared, only the network is not
# shellcheck disable=SC2086 # launch options are words
ip netns exec "$C" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$C" \
  env VCUDA_LAUNCH_NETNS="$list" "$here/vcuda-launch" --launcher netns --nodes "$nodes" \
  --gpus-per-node "$gpn" $launch_opts -- "$@"
