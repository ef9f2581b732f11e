/*
 * commands.h - `kvengine WORD [ARG...]`: the commands fixture libraries
 * register (engine.command in a kvengine_plugins.lua on the module path;
 * engine/lua/plugins.lua).  The engine names none of them.
 */
#ifndef KV_COMMANDS_H
#define KV_COMMANDS_H

#include <stddef.h>

enum kv_command {
  KV_COMMAND_FOUND,    /* a registered command: its script's path was written */
  KV_COMMAND_NONE,     /* not a command: the word is a path, or nothing close to a command */
  KV_COMMAND_MISSPELT, /* no command and no path, but close to a command: said so (exit 2) */
  KV_COMMAND_BROKEN,   /* a registration failed, and the word is no path: said so (exit 3) */
};

/*
 * What `kvengine word ...` is.  Only a word of a-z, 0-9, _ and - can be a
 * command; for it the registrations are read (in a Lua state of their own,
 * closed on return).  On KV_COMMAND_FOUND the script's path is in path
 * (size bytes, NUL-terminated); the other outcomes were printed on stderr
 * when they need to be.
 */
enum kv_command kv_command_find(const char *word, char *path, size_t size);

/* Print the registered commands' lines of the usage (nothing when none). */
void kv_commands_usage(void);

#endif
