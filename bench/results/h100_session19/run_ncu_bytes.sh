#!/bin/bash
# Nineteenth session: DRAM bytes read and written (and L2 sectors by operation) of one warm pass at
# Plummer 16M: warp-rounds+twig and continuation+twig (persistent_kernel), the level graph (its
# kernels of one pass), and floor_probe's plain twig-sources kernel; the new one-pass P2M build.
O=${OUT:-/tmp}/bytes; mkdir -p "$O"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,lts__t_sectors_srcunit_tex_aperture_device_lookup_miss.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,smsp__inst_executed.sum
for m in warp-rounds+twig continuation+twig; do
  $NCU --clock-control none -k regex:persistent_kernel --launch-skip 2 --launch-count 1 --metrics $M --csv \
    build/ab/new/canopy --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes $m --reps 3 --warmup 1 > "$O/bytes_$m.csv" 2>&1
done
$NCU --clock-control none -k "regex:(leaf|level)_kernel" --launch-skip 24 --launch-count 12 --metrics $M --csv \
  build/ab/new/canopy --log-level warn bench --dist plummer -n 16M --max-leaf 32 --modes level-graph --reps 3 --warmup 1 > "$O/bytes_level-graph.csv" 2>&1
$NCU --clock-control none -k regex:run_sources --launch-skip 2 --launch-count 1 --metrics $M --csv build/ab/new/floor_probe 5 > "$O/bytes_sources.csv" 2>&1
for f in "$O"/bytes_*.csv; do echo "== $f"; grep -v "^==" "$f" | awk -F'","' 'NR>1{print $5" | "$(NF-2)" | "$NF}' | sed 's/"//g' | cut -c1-160 | head -80; done
cd "${OUT:-/tmp}" && tar cf bytes.tar bytes && rm -rf bytes
