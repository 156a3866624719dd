/* SPDX-License-Identifier: MIT */
/* Template names per tenant and a template's client view (see template_names.h). */
#include "core/template_names.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsontext.h"
#include "base/mem.h"
#include "sandbox/backend.h"
#include "sandbox/template.h"

int gbx_templates_visible(const struct gbx_actor *who, const char *stored)
{
    const char *owner = gbx_template_owner(stored);
    return owner[0] == '\0' || gbx_actor_sees(who, owner);
}

char *gbx_template_ref_of(const struct gbx_actor *who, const char *name,
                          gbx_template_exists_fn exists, void *arg)
{
    if (!who->admin && who->owner[0] && strchr(name, '@') == NULL) {
        char *own = gbx_asprintf("%s@%s", name, who->owner);
        if (exists(arg, own))
            return own;
        free(own);
    }
    return gbx_xstrdup(name);
}

char *gbx_template_stored_for(const struct gbx_actor *who, const char *shown)
{
    return who->admin ? gbx_xstrdup(shown) : gbx_asprintf("%s@%s", shown, who->owner);
}

int gbx_template_name_reserved(const char *name)
{
    static const char *const v[] = {GBX_TEMPLATE_HOST, GBX_DEFAULT_TEMPLATE, "base",
                                    "code-interpreter-v1", "default"};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        if (strcmp(name, v[i]) == 0)
            return 1;
    return 0;
}

uint64_t gbx_template_count_dir(const char *dir, const char *owner)
{
    uint64_t n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && gbx_template_name_valid(e->d_name) == 0 &&
            strcmp(gbx_template_owner(e->d_name), owner) == 0)
            n++;
    if (d)
        closedir(d);
    return n;
}

static void set_json_text(json_t *o, const char *key, const char *text)
{
    json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    if (v)
        json_object_set_new(o, key, v);
}

void gbx_template_owner_json(json_t *j, const char *stored)
{
    const char *owner = gbx_template_owner(stored);
    json_object_set_new(j, "shared", json_boolean(owner[0] == '\0'));
    if (owner[0])
        json_object_set_new(j, "owner", json_string(owner));
}

json_t *gbx_template_info_json(const struct gbx_actor *who, const struct gbx_template_info *i)
{
    json_t *j = json_pack("{s:s%,s:s,s:i,s:b}", "name", i->name, gbx_template_shown_len(i->name),
                          "state", "ready", "format", i->format, "usr_host", i->usr_host);
    gbx_template_owner_json(j, i->name);
    if (i->description)
        json_object_set_new(j, "description", gbx_json_text(i->description));
    if (i->source && !who->admin && strncmp(i->source, "snapshot:", 9) == 0)
        json_object_set_new(j, "source", json_string("snapshot")); /* whose: not a key's to see */
    else if (i->source)
        json_object_set_new(j, "source", gbx_json_text(i->source));
    if (i->created)
        json_object_set_new(j, "created", gbx_json_text(i->created));
    if (i->generated)
        json_object_set_new(j, "size_bytes", json_integer((json_int_t)i->size_bytes));
    else
        json_object_set_new(j, "generated", json_false());
    if (i->start)
        json_object_set_new(j, "start", gbx_json_text(i->start));
    if (i->ready)
        json_object_set_new(j, "ready", gbx_json_text(i->ready));
    json_t *oci = json_object();
    set_json_text(oci, "entrypoint", i->oci_entrypoint);
    set_json_text(oci, "cmd", i->oci_cmd);
    set_json_text(oci, "env", i->oci_env);
    set_json_text(oci, "workdir", i->oci_workdir);
    if (json_object_size(oci))
        json_object_set_new(j, "oci", oci);
    else
        json_decref(oci);
    return j;
}
