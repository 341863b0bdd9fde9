/* SPDX-License-Identifier: MIT */
/* runtime/status.c: status messages, from the table in ktune.h. */
#include "ktune.h"

const char *kt_strerror(int status)
{
  switch (status) {
#define KT_STATUS_CASE(name, value, msg) \
  case value:                            \
    return msg;
    KT_STATUS_TABLE(KT_STATUS_CASE)
#undef KT_STATUS_CASE
  }
  return "unknown ktune status code";
}
