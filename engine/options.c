/*
 * options.c - the command line of `kvengine [options] PATH...`.
 */
#include "options.h"
#include "commands.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

/* What an option's argument is, and what the option does to its field. */
enum kind {
  K_FLAG,   /* int: 1 when given; a boolean in Lua */
  K_SET,    /* int: the row's `set` when given; an integer in Lua */
  K_STRING, /* const char *: the argument */
  K_LIST,   /* const char *: a comma-separated argument; a list in Lua */
  K_INT,    /* int: a number from min to max (a fraction is cut off) */
  K_LONG,   /* long: likewise */
  K_NUMBER, /* double: a number from min to max */
  K_HELP,   /* no field: print the usage and exit 0 */
};

static int check_target(const char *source, const char *name);

/*
 * One row per option: the parser (getopt_long's table is made from it)
 * and kv_options_push both read this table, so an option is added in one
 * place.
 */
struct row {
  const char *flag; /* "--name" */
  char short_name;  /* its one-letter form, or 0 */
  enum kind kind;
  size_t field;    /* offsetof the field in struct kv_options */
  const char *key; /* the field's key in kv_options_push's table (NULL: no field) */
  double min, max; /* K_INT, K_LONG, K_NUMBER */
  int set;         /* K_SET */
  int (*check)(const char *source, const char *value); /* a K_STRING's further check */
};

/* A field of struct kv_options: its offset, and its name as the key Lua sees. */
#define FIELD(name) offsetof(struct kv_options, name), #name

static const struct row rows[] = {
    /* flag, short, kind, field and key, min, max, set, check */
    {"--jobs", 'j', K_INT, FIELD(jobs), 1, INT_MAX, 0, NULL},
    {"--filter", 0, K_STRING, FIELD(filter), 0, 0, 0, NULL},
    {"--tags", 0, K_LIST, FIELD(tags), 0, 0, 0, NULL},
    {"--exclude-tags", 0, K_LIST, FIELD(exclude_tags), 0, 0, 0, NULL},
    {"--list", 0, K_FLAG, FIELD(list), 0, 0, 0, NULL},
    {"--tap", 0, K_FLAG, FIELD(tap), 0, 0, 0, NULL},
    {"--junit", 0, K_STRING, FIELD(junit), 0, 0, 0, NULL},
    {"--html", 0, K_STRING, FIELD(html), 0, 0, 0, NULL},
    {"--reports", 0, K_STRING, FIELD(reports), 0, 0, 0, NULL},
    {"--seed", 0, K_LONG, FIELD(seed), 1, 2147483647, 0, NULL},
    {"--timeout", 0, K_NUMBER, FIELD(timeout), 0.001, HUGE_VAL, 0, NULL},
    {"--file-timeout", 0, K_NUMBER, FIELD(file_timeout), 0.001, HUGE_VAL, 0, NULL},
    {"--artifacts", 0, K_STRING, FIELD(artifacts), 0, 0, 0, NULL},
    {"--keep-artifacts", 0, K_FLAG, FIELD(keep_artifacts), 0, 0, 0, NULL},
    {"--repeat", 0, K_INT, FIELD(repeat), 1, INT_MAX, 0, NULL},
    {"--fail-fast", 0, K_FLAG, FIELD(fail_fast), 0, 0, 0, NULL},
    {"--target", 0, K_STRING, FIELD(target), 0, 0, 0, check_target},
    {"--verbose", 'v', K_FLAG, FIELD(verbose), 0, 0, 0, NULL},
    {"--color", 0, K_SET, FIELD(color), 0, 0, 1, NULL},
    {"--no-color", 0, K_SET, FIELD(color), 0, 0, 0, NULL},
    {"--run", 0, K_INT, FIELD(run), 1, INT_MAX, 0, NULL},
    {"--help", 'h', K_HELP, 0, NULL, 0, 0, 0, NULL},
};

enum { NROWS = sizeof rows / sizeof rows[0], ROW_VAL = 256 /* getopt_long's val of rows[0] */ };

static int takes_argument(const struct row *r) {
  return r->kind != K_FLAG && r->kind != K_SET && r->kind != K_HELP;
}

void kv_usage(void) {
  fputs("usage: kvengine [options] PATH...     run the tests in PATH (a file, a folder's *.lua,\n"
        "                                      or a glob the engine expands itself)\n"
        "       kvengine serve SCRIPT [ARG...] run a Lua program on the loop until SIGTERM/SIGINT\n"
        "       kvengine version               print the versions of the engine and its libraries\n"
        "       kvengine COMMAND [ARG...]      a command a fixture library registers (below)\n",
        stdout);
  /* The engine names no fixture command: the libraries list theirs. */
  kv_commands_usage();
  fputs(
      "\n"
      "options:\n"
      "  -j, --jobs N          run N files at once, each in its own worker process (default:\n"
      "                        4 per core, at most one per file: files mostly wait; a target\n"
      "                        may lower it: see --target); the files that took longest last\n"
      "                        time start first (KVENGINE_DURATIONS=FILE|off)\n"
      "      --filter PATTERN  run only tests whose name matches the Lua pattern\n"
      "      --tags a,b        run only tests tagged a or b\n"
      "      --exclude-tags a  skip tests tagged a\n"
      "      --list            list the tests, run nothing\n"
      "      --tap             report as TAP 13 on stdout\n"
      "      --junit FILE      also write a JUnit XML report to FILE\n"
      "      --html FILE       also write a self-contained HTML report to FILE: outcomes,\n"
      "                        failures with their diagnosis, and the charts fixtures send\n"
      "      --reports FILE    also write what fixtures send with engine.report to FILE, one\n"
      "                        JSON object a line: {file, test, kind, data}\n"
      "      --seed N          master seed (default: random; printed at start and on failure)\n"
      "      --timeout S       default per-test time limit in seconds (default 30)\n"
      "      --file-timeout S  time limit for a whole file (default 600)\n"
      "      --artifacts DIR   each test's folder of diagnostics (default ./artifacts); kept for\n"
      "                        failed tests only: a passing test's folder, and a passing file's,\n"
      "                        is removed when its file ends\n"
      "      --keep-artifacts  keep every test's folder, passing or not\n"
      "      --repeat N        run every file N times\n"
      "      --fail-fast       stop at the first failure\n"
      "      --target NAME     the stack the fixtures start (a-z, 0-9, _ and -): the module\n"
      "                        targets.NAME on the fixtures path; default: none named, the\n"
      "                        fixtures pick theirs; its max_files caps -j\n"
      "  -v, --verbose         every test with its duration, and every log line\n"
      "      --color, --no-color  force colours on or off (default: on a TTY)\n"
      "  -h, --help            this text\n"
      "\n"
      "output: the seed and the command line first, then each test's line as it ends (files\n"
      "in the order given; under -j a file's lines wait until the files before it ended)\n"
      "exit status: 0 all passed, 1 a test failed, 2 usage error, 3 infrastructure error\n"
      "environment: KVENGINE_TIME_SCALE multiplies default waits on slow machines (a number\n"
      "             > 0; anything else is a usage error); KVENGINE_TARGET is the default\n"
      "             --target; KVENGINE_PATH is searched first for Lua modules\n",
      stdout);
}

static int parse_number(const char *opt, const char *s, double min, double max, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !(v >= min)) {
    fprintf(stderr, "kvengine: %s wants a number >= %g, not '%s'\n", opt, min, s);
    return -1;
  }
  if (v > max) {
    fprintf(stderr, "kvengine: %s wants a number <= %.0f, not '%s'\n", opt, max, s);
    return -1;
  }
  *out = v;
  return 0;
}

static void defaults(struct kv_options *o) {
  memset(o, 0, sizeof *o);
  o->jobs = 0; /* automatic: see the pool */
  o->timeout = 30;
  o->file_timeout = 600;
  o->artifacts = "artifacts";
  o->repeat = 1;
  o->color = -1;
  o->run = 1;
  const char *target = getenv("KVENGINE_TARGET");
  o->target = target && *target ? target : NULL;
}

/*
 * A target names the fixture layer's module targets.<name>, so a name is a
 * module name and a file name at once: lower-case letters, digits, _ and -.
 */
static int check_target(const char *source, const char *name) {
  if (*name && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == strlen(name))
    return 0;
  fprintf(stderr, "kvengine: %s '%s': a target's name is made of a-z, 0-9, _ and -\n", source,
          name);
  return -1;
}

/* Apply row r, given with arg (NULL for options without one), to o. */
static int apply(struct kv_options *o, const struct row *r, const char *arg) {
  void *field = (char *)o + r->field;
  char short_flag[3] = {'-', r->short_name, '\0'};
  const char *label = r->short_name ? short_flag : r->flag; /* as the usage names it */
  double v;
  switch (r->kind) {
  case K_FLAG:
    *(int *)field = 1;
    return 0;
  case K_SET:
    *(int *)field = r->set;
    return 0;
  case K_STRING:
  case K_LIST:
    *(const char **)field = arg;
    return r->check ? r->check(r->flag, arg) : 0;
  case K_INT:
    if (parse_number(label, arg, r->min, r->max, &v))
      return -1;
    *(int *)field = (int)v;
    return 0;
  case K_LONG:
    if (parse_number(label, arg, r->min, r->max, &v))
      return -1;
    *(long *)field = (long)v;
    return 0;
  case K_NUMBER:
    return parse_number(label, arg, r->min, r->max, (double *)field);
  case K_HELP:
    kv_usage();
    exit(0);
  }
  return -1;
}

/* The row getopt_long's return value c stands for, or NULL. */
static const struct row *row_of(int c) {
  if (c >= ROW_VAL && c < ROW_VAL + NROWS)
    return &rows[c - ROW_VAL];
  for (size_t i = 0; i < NROWS; i++)
    if (rows[i].short_name && rows[i].short_name == c)
      return &rows[i];
  return NULL;
}

int kv_options_parse(struct kv_options *o, int argc, char **argv) {
  defaults(o);
  o->argc = argc;
  o->argv = argv;
  if (o->target && check_target("KVENGINE_TARGET", o->target)) {
    fputs("kvengine: see kvengine --help\n", stderr);
    return -1;
  }
  struct option longs[NROWS + 1];
  char shorts[2 * NROWS + 1];
  size_t ns = 0;
  for (size_t i = 0; i < NROWS; i++) {
    int arg = takes_argument(&rows[i]);
    longs[i] = (struct option){rows[i].flag + 2, arg ? required_argument : no_argument, NULL,
                               ROW_VAL + (int)i};
    if (rows[i].short_name) {
      shorts[ns++] = rows[i].short_name;
      if (arg)
        shorts[ns++] = ':';
    }
  }
  longs[NROWS] = (struct option){NULL, 0, NULL, 0};
  shorts[ns] = '\0';
  optind = 1;
  opterr = 0; /* our own messages, which do not depend on argv[0] */
  int c;
  while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
    const struct row *r = row_of(c);
    if (!r) {
      fprintf(stderr, "kvengine: %s: unknown option, or its value is missing\n", argv[optind - 1]);
      fputs("kvengine: see kvengine --help\n", stderr);
      return -1;
    }
    if (apply(o, r, optarg)) {
      fputs("kvengine: see kvengine --help\n", stderr);
      return -1;
    }
  }
  o->paths = argv + optind;
  o->npaths = argc - optind;
  return 0;
}

/* Push a comma-separated list as a Lua list (empty items left out). */
static void push_list(lua_State *L, const char *csv) {
  lua_newtable(L);
  int n = 0;
  for (const char *p = csv; p && *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len) {
      lua_pushlstring(L, p, len);
      lua_rawseti(L, -2, ++n);
    }
    p = e ? e + 1 : p + len;
  }
}

/* Push row r's field of o, as its kind shows in Lua; 0 when an unset string has no value. */
static int push_field(lua_State *L, const struct kv_options *o, const struct row *r) {
  const void *field = (const char *)o + r->field;
  switch (r->kind) {
  case K_FLAG:
    lua_pushboolean(L, *(const int *)field);
    return 1;
  case K_SET:
  case K_INT:
    lua_pushinteger(L, *(const int *)field);
    return 1;
  case K_LONG:
    lua_pushinteger(L, *(const long *)field);
    return 1;
  case K_NUMBER:
    lua_pushnumber(L, *(const double *)field);
    return 1;
  case K_STRING:
    if (!*(const char *const *)field)
      return 0;
    lua_pushstring(L, *(const char *const *)field);
    return 1;
  case K_LIST:
    push_list(L, *(const char *const *)field);
    return 1;
  case K_HELP:
    break;
  }
  return 0;
}

void kv_options_push(lua_State *L, const struct kv_options *o) {
  lua_newtable(L);
  for (size_t i = 0; i < NROWS; i++)
    if (rows[i].key && push_field(L, o, &rows[i]))
      lua_setfield(L, -2, rows[i].key);
  lua_createtable(L, o->argc, 0);
  for (int i = 0; i < o->argc; i++) {
    lua_pushstring(L, o->argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "command");
}
