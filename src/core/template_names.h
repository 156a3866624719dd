/* SPDX-License-Identifier: MIT */
/* Template names per tenant, as the templates service (core/templates.h) reads them: what a
 * key's name means in the store ("NAME@KEY", its own, before the shared "NAME"), who may see a
 * stored name, the names a key cannot take, how many a key has on disk, and the JSON a client
 * sees of an installed template. Pure (the one directory read is the caller's directory), so
 * it is in the library and unit-tested (tests/unit/test_templates.c). */
#ifndef GBX_CORE_TEMPLATE_NAMES_H
#define GBX_CORE_TEMPLATE_NAMES_H

#include <jansson.h>
#include <stdint.h>

#include "core/actor.h"

struct gbx_template_info;

/* May who see (and use) the stored template name? Shared ones: everyone. */
int gbx_templates_visible(const struct gbx_actor *who, const char *stored);

/* Is there a template (installed, or being built) of the stored name? */
typedef int (*gbx_template_exists_fn)(void *arg, const char *stored);
/* The stored name of the template who calls name: the key's own "NAME@KEY" when exists says
 * there is one, else the shared "NAME" (which may not exist). The admin's names, and names
 * that already say whose ('@'), are stored names as they are. Owned. */
char *gbx_template_ref_of(const struct gbx_actor *who, const char *name,
                          gbx_template_exists_fn exists, void *arg);
/* The stored name of a template who makes as shown: a key's is its own ("NAME@KEY"), the
 * admin's is shared ("NAME"). Owned. */
char *gbx_template_stored_for(const struct gbx_actor *who, const char *shown);
/* Names a key cannot take: the built-in template's and the names E2B clients use for it. */
int gbx_template_name_reserved(const char *name);

/* How many of the stored templates in dir (<state>/templates) are owner's ("" : the shared
 * ones). Entries that are not template names (staging and trash trees) are not counted; a
 * missing dir has none. */
uint64_t gbx_template_count_dir(const char *dir, const char *owner);

/* The client's view of installed template i: {name (as shown), state "ready", format,
 * usr_host, shared, owner?, description?, source?, created?, size_bytes | generated: false,
 * start?, ready?, oci?}. A key is not told which snapshot a template was made from. */
json_t *gbx_template_info_json(const struct gbx_actor *who, const struct gbx_template_info *i);
/* Whose a template is: "shared" (the admin's, every key's to use), else "owner" (its key),
 * set in j. */
void gbx_template_owner_json(json_t *j, const char *stored);

#endif
