# regenerate: cd to this directory, then gnuplot hist.gp
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1400,580 font "sans,10" noenhanced
} else {
  set terminal png size 1400,580 noenhanced
}
set output "hist.png"
set datafile separator ","
set title "int32 histogram: ktune / max(CUB, global atomics), NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 50 MiB L2, driver 13.0, runtime 13.0"
set xlabel "bins"
unset key
set cbrange [-2:4]
set cblabel "log2(ktune / best peer)"
set palette defined (-2 "#b2182b", 0 "#f7f7f7", 4 "#1b7837")
set xtics ("1" 0, "3" 1, "256" 2, "1000" 3, "4096" 4, "65536" 5, "100000" 6, "262144" 7, "1048576" 8, "4194304" 9, "16777216" 10)
set ytics ("uniform" 0, "skewed" 1, "sorted" 2, "normal" 3, "onebin" 4, "halfout" 5, "uniform n=2^20" 6)
set xrange [-0.5:10.5]
set yrange [6.5:-0.5]
plot "hist_heat.csv" skip 1 using 1:2:(log($3)/log(2)) with image, \
     "" skip 1 using 1:2:(sprintf("%.2f", $3)) with labels
