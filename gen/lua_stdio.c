/* stdin, stdout and stderr for the copy of Lua inside libattnbwd.so and
 * libattnbwd.a. Debian's liblua5.4.a is position-independent executable code:
 * it reads libc's stdin, stdout and stderr by PC-relative loads, which a
 * shared library cannot resolve against libc's (that takes a copy
 * relocation, which only an executable has). The build renames those three
 * references in Lua's objects to the variables here (objcopy --redefine-sym,
 * see CMakeLists.txt), which are set from libc's as the library loads,
 * before any Lua code can run. The tool and the tests link Lua unchanged. */
#include <stdio.h>

FILE *gen_lua_stdin, *gen_lua_stdout, *gen_lua_stderr;

__attribute__((constructor(101))) static void gen_lua_stdio_init(void) {
    gen_lua_stdin = stdin;
    gen_lua_stdout = stdout;
    gen_lua_stderr = stderr;
}
