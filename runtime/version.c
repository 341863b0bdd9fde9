/* SPDX-License-Identifier: MIT */
/* runtime/version.c: the library's version, as ktune.h was when it was built. */
#include "ktune.h"

const char *kt_version(void)
{
  return KT_VERSION_STRING;
}
