#!/bin/bash
# Issue 32's GPU rows in one call on a GPU machine (its image has JAX with CUDA; cvxpy, SCS and Clarabel travel as
# wheels in .whl/, see the device notes). Everything lands in /tmp/res, packed into $OUT/res.tgz after each step,
# so a step cut short still returns what the steps before it measured. Each step has its own timeout; together
# they stay under 420 s. The 60,000-point case has no warm-up (its compilation is inside the timed solve) and no
# form timings, and a time limit of $L60 (default 150 s) to show how far it gets.
#   [STEPS="20k 60k agree"] [L60=150] benchmarks/gpu_rows.sh [seconds for the 20k case] [seconds for the 60k case]
set -u
STEPS=${STEPS:-20k 60k agree}
T20=${1:-110}
T60=${2:-250}
R=/tmp/res
mkdir -p $R
pack() { tar czf "$OUT/res.tgz" -C /tmp res; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheels did not install"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 METRICOPT_PROFILE_DIR=$R
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import jax, cvxpy, numpy, metricopt; print('jax', jax.__version__, jax.devices(), 'cvxpy', cvxpy.__version__, 'numpy', numpy.__version__)" \
    || { echo "imports failed"; exit 1; }
t0=$(date +%s)
[[ $STEPS == *20k* ]] && timeout $((T20 + 15)) python3 benchmarks/jax_scale.py --cases synthetic20k --device gpu --time-limit 60 \
    --case-timeout $T20 --out $R/jax_scale_gpu20k.md 2>&1 | tail -2
echo "20k step: $(( $(date +%s) - t0 )) s"; pack
t0=$(date +%s)
[[ $STEPS == *60k* ]] && timeout $((T60 + 15)) python3 benchmarks/jax_scale.py --cases synthetic60k --device gpu --time-limit ${L60:-150} \
    --warmup-iter 0 --skip-forms --case-timeout $T60 --out $R/jax_scale_gpu60k.md 2>&1 | tail -2
echo "60k step: $(( $(date +%s) - t0 )) s"; pack
t0=$(date +%s)
unset METRICOPT_PROFILE_DIR
[[ $STEPS == *agree* ]] && timeout 75 python3 benchmarks/jax_device.py --sizes digits --devices gpu cpu --time-limit 30 --out $R 2>&1 | tail -3
echo "agreement step: $(( $(date +%s) - t0 )) s"; pack
grep -h "^| synthetic\|^| digits" $R/*.md
tail -n 25 $R/*60k*.log
