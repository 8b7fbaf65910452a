#!/bin/bash
# P003 in the cluster in a box: vcuda servers on 1..3 other nodes, the client on the job's
# first node (vcuda-launch --launcher srun --remote-only, one server per node on the CPU
# stand-in driver), REPS runs each, then the constants and the balance model's R(n)
# (box_vcuda_model.py predict).  After `eval "$(.ci/cluster.sh up 4)"` (SLURM_CONF set):
#   src/remd/bench/box-vcuda.sh BUILD_DIR OUT_DIR [REPS]     (REPS default 3)
# BUILD_DIR holds vcuda (vcuda/vcuda-launch, vcuda-server, lib/, tests/fake-driver/).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: box-vcuda.sh BUILD_DIR OUT_DIR [REPS]}
out=${2:?usage: box-vcuda.sh BUILD_DIR OUT_DIR [REPS]}
reps=${3:-3}
case "$reps" in ''|*[!0-9]*|0) echo "box-vcuda: REPS=$reps is not a positive count" >&2; exit 2;; esac
[ -n "${SLURM_CONF:-}" ] || { echo "box-vcuda: SLURM_CONF is not set (eval \"\$(.ci/cluster.sh up 4)\" first)" >&2; exit 2; }
v=$build/vcuda
for f in "$v/vcuda-launch" "$v/vcuda-server" "$v/lib/libcudart.so.13" "$v/tests/fake-driver/libcuda.so.1"; do
  [ -e "$f" ] || { echo "box-vcuda: no $f (build the vcuda component)" >&2; exit 2; }
done
mkdir -p "$out"; out=$(cd "$out" && pwd)
# the real server on the CPU stand-in driver, as src/vcuda/tests/test_launch_slurm.py starts it
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$v/tests/fake-driver" "$v/vcuda-server" > "$out/server.sh"
chmod +x "$out/server.sh"
rc=0
for rep in $(seq "$reps"); do
  for n in 1 2 3; do
    cat > "$out/job-$n.sh" <<JOB
#!/bin/bash
exec '$v/vcuda-launch' --launcher srun --ranks-per-node 1 --gpus-per-node 1 --remote-only \
  --server '$out/server.sh' --lib '$v/lib' --start-timeout 60 -- python3 '$here/box_vcuda_model.py' client
JOB
    chmod +x "$out/job-$n.sh"
    timeout -k 5 300 sbatch -W -N $((n + 1)) --ntasks-per-node=1 --chdir="$out" --time=0:05:00 \
      --output="$out/n$n-$rep.jsonl" --error="$out/n$n-$rep.err" "$out/job-$n.sh" >/dev/null ||
      { echo "box-vcuda: $n server(s), run $rep failed (see $out/n$n-$rep.err)" >&2; rc=1; }
  done
done
python3 "$here/box_vcuda_model.py" predict --json "$out/model.json" "$out"/n*-*.jsonl | tee "$out/table.txt"
exit $rc
