/*
 * options.h - the command line, parsed once and shared by the parent
 * process, its workers and the Lua runner.
 */
#ifndef KV_OPTIONS_H
#define KV_OPTIONS_H

#include <lua.h>

struct kv_options {
  int jobs;
  const char *filter;
  const char *tags;
  const char *exclude_tags;
  int list;
  int tap;
  const char *junit;
  const char *html;
  const char *reports; /* what engine.report sent, as JSON lines */
  long seed;           /* 0: pick one */
  double timeout;
  double file_timeout;
  const char *artifacts;
  int keep_artifacts; /* keep every test's folder, not only the failed ones' */
  int repeat;
  int fail_fast;
  const char *target; /* NULL: none named; the fixture layer picks its default */
  int verbose;
  int color; /* -1: when stdout is a TTY */
  int run;   /* worker: which repetition this is, from 1 */
  char **paths;
  int npaths;
  char **argv; /* the command line as given, for the report's first lines */
  int argc;
};

/* Parse argv into o; returns 0, or prints a usage error and returns -1. */
int kv_options_parse(struct kv_options *o, int argc, char **argv);

/* Push o as a Lua table (the shape the runner and reporters read). */
void kv_options_push(lua_State *L, const struct kv_options *o);

/* Print the usage text, every option with what it does, on stdout. */
void kv_usage(void);

#endif
