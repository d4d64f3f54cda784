#!/usr/bin/env bash
# Compile-time cost of the compile-time front end: a model definition of 1000 (and 2000) layers, a
# policy of 6 mixed patterns (exact, re:, glob) and its full compile-time plan, compiled with
# g++ -O2 (and nvcc when present). Best of QPOLICY_BENCH_RUNS (default 5) runs, because timings on a
# shared VM vary by up to 1.6x from run to run; wall time and peak RSS from /usr/bin/time. The
# baseline, measured in the same run, is the same translation unit without the plan (headers and
# model definition only).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cxx=${CXX:-g++}
runs=${QPOLICY_BENCH_RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ ! -x /usr/bin/time ]; then
  echo "compile-time bench: /usr/bin/time is missing (apt-get install time)"
  exit 1
fi

make_source() {  # blocks, with_plan(0|1 plain, 2 with a lookahead pattern), file
  sed "s/@BLOCKS@/$1/g" "$root/tests/compile_time/bench_model.cpp.in" > "$3"
  if [ "$2" = 2 ]; then  # the same layers matched through a lookahead: the backtracking VM at compile time
    sed -i -e 's/"re:\.\*\\\\\.o_proj\$"/"re:(?=.*\\\\.o_proj$).*"/' "$3"
    grep -q '(?=' "$3" || { echo "compile-time bench: the lookahead variant was not made" >&2; exit 1; }
  fi
  if [ "$2" = 0 ]; then  # the baseline: everything but the plan
    sed -i -e '/^constexpr auto& bench_plan/,$d' "$3"
    echo 'int main() { return static_cast<int>(bench_model.size() == 0); }' >> "$3"
  fi
}

# Prints "SECONDS KILOBYTES" of the best of $runs compilations of the command line.
measure() {
  local best_t=999999 best_m=0
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    read -r t m <"$work/time"
    if awk -v a="$t" -v b="$best_t" 'BEGIN { exit !(a < b) }'; then best_t=$t; best_m=$m; fi
  done
  echo "$best_t $best_m"
}

flags=(-std=c++20 -O2 -I"$root/include" -c)
declare -A secs mem
for layers in 1000 2000; do
  blocks=$((layers / 4))
  make_source "$blocks" 1 "$work/plan_$layers.cpp"
  make_source "$blocks" 0 "$work/base_$layers.cpp"
  read -r secs[plan_$layers] mem[plan_$layers] < <(measure "$cxx" "${flags[@]}" "$work/plan_$layers.cpp" -o "$work/p.o")
  read -r secs[base_$layers] mem[base_$layers] < <(measure "$cxx" "${flags[@]}" "$work/base_$layers.cpp" -o "$work/b.o")
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
for layers in 1000 2000; do
  echo "bench: compile_${layers}_layers_plan_gxx_O2 ${secs[plan_$layers]} s vs model_without_plan $(ratio "${secs[plan_$layers]}" "${secs[base_$layers]}")x"
  echo "bench: compile_${layers}_layers_plan_peak_rss $((mem[plan_$layers] / 1024)) MB vs model_without_plan $(ratio "${mem[plan_$layers]}" "${mem[base_$layers]}")x"
done
echo "bench: compile_2000_vs_1000_layers $(ratio "${secs[plan_2000]}" "${secs[plan_1000]}") x"
make_source 250 2 "$work/look_1000.cpp"
read -r secs[look_1000] mem[look_1000] < <(measure "$cxx" "${flags[@]}" "$work/look_1000.cpp" -o "$work/l.o")
echo "bench: compile_1000_layers_lookahead_plan_gxx_O2 ${secs[look_1000]} s vs compile_1000_layers_plan_gxx_O2 $(ratio "${secs[look_1000]}" "${secs[plan_1000]}")x"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$nvcc" ]; then
  cp "$work/plan_1000.cpp" "$work/plan_1000.cu"
  cp "$work/base_1000.cpp" "$work/base_1000.cu"
  cuda=(-std=c++20 --expt-relaxed-constexpr -O2 -gencode=arch=compute_90a,code=sm_90a -I"$root/include" -c)
  # Best of 3 each (about 5 s a compilation): one run each put the ratio anywhere in 1.19-1.25.
  read -r nt nm < <(runs=${QPOLICY_BENCH_NVCC_RUNS:-3} measure "$nvcc" "${cuda[@]}" "$work/plan_1000.cu" -o "$work/n.o")
  read -r bt bm < <(runs=${QPOLICY_BENCH_NVCC_RUNS:-3} measure "$nvcc" "${cuda[@]}" "$work/base_1000.cu" -o "$work/nb.o")
  echo "bench: compile_1000_layers_plan_nvcc ${nt} s vs model_without_plan $(ratio "$nt" "$bt")x"
  echo "bench: compile_1000_layers_plan_nvcc_peak_rss $((nm / 1024)) MB vs model_without_plan $(ratio "$nm" "$bm")x"
else
  echo "compile-time bench: nvcc not found, no nvcc figure"
fi
