/* SPDX-License-Identifier: MIT */
#include "core/actor.h"

#include <stdio.h>
#include <string.h>

const struct gbx_actor gbx_actor_system = {.admin = 1, .owner = "", .name = "system"};

void gbx_actor_for(struct gbx_actor *a, const char *owner)
{
    a->admin = owner[0] == '\0';
    snprintf(a->owner, sizeof(a->owner), "%s", owner);
    snprintf(a->name, sizeof(a->name), "%s", a->admin ? "admin" : owner);
}

int gbx_actor_sees(const struct gbx_actor *a, const char *owner)
{
    /* an actor with no key (an anonymous /healthz) sees nothing, not the admin's things */
    return a->admin || (a->owner[0] != '\0' && strcmp(a->owner, owner) == 0);
}
