/*
 * The CPU time the kernel takes from a busy process: pinned to CPU `cpu`, reads CLOCK_MONOTONIC in
 * a loop for `seconds` and prints every gap between two reads longer than `threshold_ms` (time the
 * loop did not run: an interrupt and its softirqs, such as IPVS's rate estimator on kernels before
 * 6.2, or another task). Run one per CPU at once. bench/estimator.ts parses the output:
 *
 *   stall-probe CPU SECONDS THRESHOLD_MS
 *   gap CPU AT_MS LENGTH_MS      (one line per gap, AT_MS from the start)
 *   done CPU GAPS TOTAL_MS
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: stall-probe CPU SECONDS THRESHOLD_MS\n");
    return 2;
  }
  int cpu = atoi(argv[1]);
  double seconds = atof(argv[2]), threshold = atof(argv[3]);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    perror("sched_setaffinity");
    return 1;
  }
  double start = now_ms(), last = start, end = start + seconds * 1e3, total = 0;
  int gaps = 0;
  for (;;) {
    double t = now_ms();
    if (t - last > threshold) {
      printf("gap %d %.1f %.3f\n", cpu, t - start, t - last);
      total += t - last;
      gaps++;
    }
    last = t;
    if (t > end) break;
  }
  printf("done %d %d %.2f\n", cpu, gaps, total);
  return 0;
}
