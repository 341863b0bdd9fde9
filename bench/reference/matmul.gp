set terminal pngcairo size 1400,650 font "sans,10" noenhanced
set output "matmul.png"
set datafile separator ","
set title "fp32 matmul, NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 50 MiB L2, driver 13.0, runtime 13.0"
set ylabel "TFLOP/s (higher is better)"
set xlabel "shape MxNxK"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set yrange [0:*]
set xrange [-0.6:*]
set grid ytics
set key top left
set xtics rotate by -30 nomirror
plot "matmul.csv" skip 1 using 5:xtic(1) title "ktune" lc rgb "#1b9e77", \
     "" skip 1 using 6 title "cuBLAS (fp32, no TF32)" lc rgb "#7570b3", \
     "" skip 1 using 7 title "seed (Guide kernel, bs16)" lc rgb "#d95f02"
