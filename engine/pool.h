/*
 * pool.h - the parent process: files to workers, events to reporters.
 */
#ifndef KV_POOL_H
#define KV_POOL_H

#include "options.h"

/* Run every file the options name; returns the process exit status. */
int kv_pool_main(struct kv_options *o);

#endif
