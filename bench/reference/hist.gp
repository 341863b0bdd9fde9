set terminal pngcairo size 1500,600 font "sans,10" noenhanced
set output "hist.png"
set datafile separator ","
set multiplot layout 1,2 title "int32 histogram, n = 2^28, NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 50 MiB L2, driver 13.0, runtime 13.0"
set logscale x 2
set logscale y 10
set xlabel "bins"
set ylabel "GB/s of input read (higher is better)"
set grid xtics ytics mxtics mytics
set key below horizontal height 1.5
set xtics ("256" 256, "4096" 4096, "65536" 65536, "262144" 262144, "1048576" 1048576)
set xrange [128:2097152]
set title "uniform"
plot "hist.csv" skip 1 using 2:(strcol(1) eq "uniform" ? column(9) : NaN) with lines dt 2 lw 2 lc rgb "#666666" title "read bandwidth", \
     "" skip 1 using 2:(strcol(1) eq "uniform" ? column(4) : NaN) with linespoints lw 2 pt 7 lc rgb "#1b9e77" title "ktune", \
     "" skip 1 using 2:(strcol(1) eq "uniform" ? column(5) : NaN) with linespoints pt 5 lc rgb "#7570b3" title "CUB (drops out-of-range)", \
     "" skip 1 using 2:(strcol(1) eq "uniform" ? column(6) : NaN) with linespoints pt 9 lc rgb "#e7298a" title "global atomics", \
     "" skip 1 using 2:(strcol(1) eq "uniform" ? column(7) : NaN) with linespoints pt 11 lc rgb "#d95f02" title "seed (best cluster)"
set title "skewed"
plot "hist.csv" skip 1 using 2:(strcol(1) eq "skewed" ? column(9) : NaN) with lines dt 2 lw 2 lc rgb "#666666" title "read bandwidth", \
     "" skip 1 using 2:(strcol(1) eq "skewed" ? column(4) : NaN) with linespoints lw 2 pt 7 lc rgb "#1b9e77" title "ktune", \
     "" skip 1 using 2:(strcol(1) eq "skewed" ? column(5) : NaN) with linespoints pt 5 lc rgb "#7570b3" title "CUB (drops out-of-range)", \
     "" skip 1 using 2:(strcol(1) eq "skewed" ? column(6) : NaN) with linespoints pt 9 lc rgb "#e7298a" title "global atomics", \
     "" skip 1 using 2:(strcol(1) eq "skewed" ? column(7) : NaN) with linespoints pt 11 lc rgb "#d95f02" title "seed (best cluster)"
unset multiplot
