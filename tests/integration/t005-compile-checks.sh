#!/bin/sh
# test-timeout: 60
# What the compiler refuses on purpose (src/base/util.h): gbx_steal_ptr takes the address of
# a pointer only, and what it returns has that pointer's type, so a misuse does not build.
set -u
: "${GBX_REPO:=$(cd "$(dirname "$0")/../.." && pwd)}"
CC=${CC:-gcc}
D=$(mktemp -d /tmp/gbx-compile-XXXXXX)
trap 'rm -rf "$D"' EXIT
pass=0; fail=0
check() { name=$1; shift; if "$@"; then pass=$((pass + 1)); echo "ok - $name"; else fail=$((fail + 1)); echo "not ok - $name"; fi; }
# builds SNIPPET: 0 when it compiles with -Werror, else 1 (the compiler's words in $D/log)
builds() {
    printf '#include "base/util.h"\n#include <stdlib.h>\n%s\n' "$1" > "$D/t.c"
    "$CC" -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$GBX_REPO/src" -c "$D/t.c" -o "$D/t.o" > "$D/log" 2>&1
}
check "a pointer's address builds, and the pointer is taken" \
    builds 'char *f(char **p) { char *r = gbx_steal_ptr(p); return r; }'
check "an int's address does not build" \
    eval "! builds 'int f(int *p) { return (int)(long)gbx_steal_ptr(p); }'"
check "with the macro's own message" grep -q "gbx_steal_ptr takes the address of a pointer" "$D/log"
check "a struct's address does not build" \
    eval "! builds 'struct s { int a; }; void *f(struct s *p) { return gbx_steal_ptr(p); }'"
check "the result has the pointer's type: into another type it does not build" \
    eval "! builds 'struct a; struct b; struct b *f(struct a **p) { return gbx_steal_ptr(p); }'"
check "a pointer to a const pointee keeps its const" \
    eval "! builds 'char *f(const char **p) { return gbx_steal_ptr(p); }'"
# and the helper still works at run time: *pp becomes NULL
printf '#include "base/util.h"\n#include <stdio.h>\nint main(void) { char c = 1; char *p = &c; char *q = gbx_steal_ptr(&p); return !(p == NULL && q == &c); }\n' > "$D/run.c"
"$CC" -std=gnu11 -D_GNU_SOURCE -I"$GBX_REPO/src" "$D/run.c" -o "$D/run" 2>"$D/log2"
check "it leaves NULL behind and returns what was there" "$D/run"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
