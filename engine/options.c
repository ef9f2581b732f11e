/*
 * options.c - the command line of `kvengine [options] PATH...`.
 */
#include "options.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

enum {
  OPT_FILTER = 256,
  OPT_TAGS,
  OPT_EXCLUDE_TAGS,
  OPT_LIST,
  OPT_TAP,
  OPT_JUNIT,
  OPT_HTML,
  OPT_SEED,
  OPT_TIMEOUT,
  OPT_FILE_TIMEOUT,
  OPT_ARTIFACTS,
  OPT_KEEP_ARTIFACTS,
  OPT_REPEAT,
  OPT_FAIL_FAST,
  OPT_TARGET,
  OPT_COLOR,
  OPT_NO_COLOR,
  OPT_RUN,
  OPT_HELP,
};

static const struct option long_options[] = {
    {"jobs", required_argument, NULL, 'j'},
    {"filter", required_argument, NULL, OPT_FILTER},
    {"tags", required_argument, NULL, OPT_TAGS},
    {"exclude-tags", required_argument, NULL, OPT_EXCLUDE_TAGS},
    {"list", no_argument, NULL, OPT_LIST},
    {"tap", no_argument, NULL, OPT_TAP},
    {"junit", required_argument, NULL, OPT_JUNIT},
    {"html", required_argument, NULL, OPT_HTML},
    {"seed", required_argument, NULL, OPT_SEED},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"file-timeout", required_argument, NULL, OPT_FILE_TIMEOUT},
    {"artifacts", required_argument, NULL, OPT_ARTIFACTS},
    {"keep-artifacts", no_argument, NULL, OPT_KEEP_ARTIFACTS},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"fail-fast", no_argument, NULL, OPT_FAIL_FAST},
    {"target", required_argument, NULL, OPT_TARGET},
    {"verbose", no_argument, NULL, 'v'},
    {"color", no_argument, NULL, OPT_COLOR},
    {"no-color", no_argument, NULL, OPT_NO_COLOR},
    {"run", required_argument, NULL, OPT_RUN},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

void kv_usage(void) {
  fputs(
      "usage: kvengine [options] PATH...     run the tests in PATH (a file, a folder's *.lua,\n"
      "                                      or a glob the engine expands itself)\n"
      "       kvengine serve SCRIPT [ARG...] run a Lua program on the loop until SIGTERM/SIGINT\n"
      "       kvengine up [--target T] [--pods N] [--model M] [--router-config FILE] [--json]\n"
      "                                      start a KV stack, print its endpoints, keep it\n"
      "                                      running until Ctrl-C (scenarios attach with\n"
      "                                      --target attached)\n"
      "       kvengine inject --pod P ...    a KV event into a running `kvengine up` stack\n"
      "       kvengine version               print the versions of the engine and its libraries\n"
      "\n"
      "options:\n"
      "  -j, --jobs N          run N files at once, each in its own worker process (default:\n"
      "                        4 per core, at most one per file: files mostly wait; a target\n"
      "                        may lower it: see --target)\n"
      "      --filter PATTERN  run only tests whose name matches the Lua pattern\n"
      "      --tags a,b        run only tests tagged a or b\n"
      "      --exclude-tags a  skip tests tagged a\n"
      "      --list            list the tests, run nothing\n"
      "      --tap             report as TAP 13 on stdout\n"
      "      --junit FILE      also write a JUnit XML report to FILE\n"
      "      --html FILE       also write a self-contained HTML report to FILE: outcomes,\n"
      "                        failures with their diagnosis, and the charts fixtures send\n"
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

static int parse_number(const char *opt, const char *s, double min, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || v < min) {
    fprintf(stderr, "kvengine: %s wants a number >= %g, not '%s'\n", opt, min, s);
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

static int parse_one(struct kv_options *o, int c, const char *arg) {
  double v;
  switch (c) {
  case 'j':
    if (parse_number("-j", arg, 1, &v))
      return -1;
    o->jobs = (int)v;
    return 0;
  case OPT_FILTER:
    o->filter = arg;
    return 0;
  case OPT_TAGS:
    o->tags = arg;
    return 0;
  case OPT_EXCLUDE_TAGS:
    o->exclude_tags = arg;
    return 0;
  case OPT_LIST:
    o->list = 1;
    return 0;
  case OPT_TAP:
    o->tap = 1;
    return 0;
  case OPT_JUNIT:
    o->junit = arg;
    return 0;
  case OPT_HTML:
    o->html = arg;
    return 0;
  case OPT_SEED:
    if (parse_number("--seed", arg, 1, &v) || v > 2147483647.0)
      return -1;
    o->seed = (long)v;
    return 0;
  case OPT_TIMEOUT:
    return parse_number("--timeout", arg, 0.001, &o->timeout);
  case OPT_FILE_TIMEOUT:
    return parse_number("--file-timeout", arg, 0.001, &o->file_timeout);
  case OPT_ARTIFACTS:
    o->artifacts = arg;
    return 0;
  case OPT_KEEP_ARTIFACTS:
    o->keep_artifacts = 1;
    return 0;
  case OPT_REPEAT:
    if (parse_number("--repeat", arg, 1, &v))
      return -1;
    o->repeat = (int)v;
    return 0;
  case OPT_FAIL_FAST:
    o->fail_fast = 1;
    return 0;
  case OPT_TARGET:
    o->target = arg;
    return check_target("--target", arg);
  case 'v':
    o->verbose = 1;
    return 0;
  case OPT_COLOR:
    o->color = 1;
    return 0;
  case OPT_NO_COLOR:
    o->color = 0;
    return 0;
  case OPT_RUN:
    if (parse_number("--run", arg, 1, &v))
      return -1;
    o->run = (int)v;
    return 0;
  case OPT_HELP:
    kv_usage();
    exit(0);
  default:
    return -1;
  }
}

int kv_options_parse(struct kv_options *o, int argc, char **argv) {
  defaults(o);
  o->argc = argc;
  o->argv = argv;
  if (o->target && check_target("KVENGINE_TARGET", o->target)) {
    fputs("kvengine: see kvengine --help\n", stderr);
    return -1;
  }
  optind = 1;
  opterr = 0; /* our own messages, which do not depend on argv[0] */
  int c;
  while ((c = getopt_long(argc, argv, "j:vh", long_options, NULL)) != -1) {
    if (c == 'h')
      c = OPT_HELP;
    if (c == '?' || c == ':') {
      fprintf(stderr, "kvengine: %s: unknown option, or its value is missing\n", argv[optind - 1]);
      fputs("kvengine: see kvengine --help\n", stderr);
      return -1;
    }
    if (parse_one(o, c, optarg)) {
      fputs("kvengine: see kvengine --help\n", stderr);
      return -1;
    }
  }
  o->paths = argv + optind;
  o->npaths = argc - optind;
  return 0;
}

static void set_string(lua_State *L, const char *k, const char *v) {
  if (v) {
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
  }
}

static void set_list(lua_State *L, const char *k, const char *csv) {
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
  lua_setfield(L, -2, k);
}

void kv_options_push(lua_State *L, const struct kv_options *o) {
  lua_newtable(L);
  lua_pushinteger(L, o->jobs);
  lua_setfield(L, -2, "jobs");
  set_string(L, "filter", o->filter);
  set_list(L, "tags", o->tags);
  set_list(L, "exclude_tags", o->exclude_tags);
  lua_pushboolean(L, o->list);
  lua_setfield(L, -2, "list");
  lua_pushboolean(L, o->tap);
  lua_setfield(L, -2, "tap");
  set_string(L, "junit", o->junit);
  set_string(L, "html", o->html);
  lua_pushinteger(L, o->seed);
  lua_setfield(L, -2, "seed");
  lua_pushnumber(L, o->timeout);
  lua_setfield(L, -2, "timeout");
  lua_pushnumber(L, o->file_timeout);
  lua_setfield(L, -2, "file_timeout");
  set_string(L, "artifacts", o->artifacts);
  lua_pushboolean(L, o->keep_artifacts);
  lua_setfield(L, -2, "keep_artifacts");
  lua_pushinteger(L, o->repeat);
  lua_setfield(L, -2, "repeat");
  lua_pushboolean(L, o->fail_fast);
  lua_setfield(L, -2, "fail_fast");
  set_string(L, "target", o->target);
  lua_pushboolean(L, o->verbose);
  lua_setfield(L, -2, "verbose");
  lua_pushinteger(L, o->color);
  lua_setfield(L, -2, "color");
  lua_pushinteger(L, o->run);
  lua_setfield(L, -2, "run");
  lua_createtable(L, o->argc, 0);
  for (int i = 0; i < o->argc; i++) {
    lua_pushstring(L, o->argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "command");
}

static void add(char **argv, int *argc, const char *a) { argv[(*argc)++] = (char *)a; }

static void add_kv(char **argv, int *argc, const char *k, const char *v) {
  if (v) {
    add(argv, argc, k);
    add(argv, argc, v);
  }
}

/*
 * Appends at most 24 entries; the strings for numbers live in static buffers,
 * which is fine: the argv is used at once, by one spawn at a time.
 */
void kv_options_forward(const struct kv_options *o, char **argv, int *argc) {
  static char seed[32], timeout[32], file_timeout[32];
  snprintf(seed, sizeof seed, "%ld", o->seed);
  snprintf(timeout, sizeof timeout, "%.17g", o->timeout);
  snprintf(file_timeout, sizeof file_timeout, "%.17g", o->file_timeout);
  add_kv(argv, argc, "--seed", seed);
  add_kv(argv, argc, "--timeout", timeout);
  add_kv(argv, argc, "--file-timeout", file_timeout);
  add_kv(argv, argc, "--filter", o->filter);
  add_kv(argv, argc, "--tags", o->tags);
  add_kv(argv, argc, "--exclude-tags", o->exclude_tags);
  add_kv(argv, argc, "--artifacts", o->artifacts);
  add_kv(argv, argc, "--target", o->target);
  if (o->list)
    add(argv, argc, "--list");
  if (o->fail_fast)
    add(argv, argc, "--fail-fast");
  if (o->verbose)
    add(argv, argc, "-v");
}
