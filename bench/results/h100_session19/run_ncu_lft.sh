#!/bin/bash
# Nineteenth session: why lockfree-tree+twig got slower with the one-pass P2M: ncu metrics of one
# warm pass at depth 7, d742a9b (old) and the one-pass build (new).
O=${OUT:-/tmp}/lft; mkdir -p "$O"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_lg_throttle.ratio,smsp__average_warp_latency_issue_stalled_membar.ratio,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio,launch__grid_size,launch__block_size,launch__registers_per_thread
for b in old new; do
  $NCU --clock-control none -k regex:persistent_kernel --launch-skip 2 --launch-count 1 --metrics $M \
    build/ab/$b/canopy --log-level warn bench --depths 7 --modes lockfree-tree+twig --reps 3 --warmup 1 > "$O/lft_$b.txt" 2>&1
done
for b in old new; do echo "== $b"; grep -E "^\s+(gpu__|dram__|lts__|l1tex__|smsp__|sm__|launch__)" "$O/lft_$b.txt"; done
cd "${OUT:-/tmp}" && tar cf lft.tar lft && rm -rf lft
