/* tuner/tuner.h: the ktune CLI's commands. */
#ifndef KT_TUNER_H
#define KT_TUNER_H

int kt_tune_main(int argc, char **argv);   /* ktune tune ... */
int kt_worker_main(int argc, char **argv); /* ktune __worker ... */

#endif
