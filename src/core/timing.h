/* Wall-clock time and the median of measured times, for step timing and profiles. */
#ifndef VDNN_CORE_TIMING_H
#define VDNN_CORE_TIMING_H

/* Seconds on the monotonic clock. */
double vdnn_now_seconds(void);

/* The median of v[0..n) (sorts v in place); 0 when n is 0. */
double vdnn_median(double *v, int n);

#endif
