/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the egress DNS server (src/egress/dns.c): any bytes a sandbox sends to
 * its DNS port, over UDP or TCP. Whatever the input, the server answers with a well-formed
 * DNS message with the query's id, or drops it; it never crashes, and an answer never hands
 * out an address for a name the policy denies. */
#include <ldns/ldns.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* dns.c audits every answer through egress.c, which the fuzz build leaves out */
void gbx_egress_audit(struct gbx_egress_sb *sb, const char *kind, json_t *detail)
{
    (void)sb;
    (void)kind;
    json_decref(detail);
}

static struct gbx_egress eg;
static struct gbx_egress_sb sb;

static void setup(void)
{
    if (sb.eg)
        return;
    json_t *j = json_loads("{\"rules\":[{\"action\":\"allow\",\"host\":\"api.test\"},"
                           "{\"action\":\"allow\",\"host\":\"*.wild.test\"},"
                           "{\"action\":\"deny\",\"host\":\"bad.wild.test\"}]}",
                           0, NULL);
    if (gbx_egress_policy_parse(j, GBX_EGRESS_POLICY, &sb.policy, NULL) < 0)
        __builtin_trap();
    json_decref(j);
    sb.eg = &eg;
    sb.id = (char *)"fuzz";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    if (size < 1)
        return 0;
    int tcp = data[0] & 1;
    eg.blocked = (data[0] & 2) != 0;
    uint8_t *out = NULL;
    size_t outlen = 0;
    if (gbx_egress_dns_reply(&sb, data + 1, size - 1, tcp, &out, &outlen) == 0) {
        ldns_pkt *r = NULL;
        if (outlen < LDNS_HEADER_SIZE || memcmp(out, data + 1, 2) != 0)
            __builtin_trap(); /* not the query's id */
        if (!tcp && outlen > 512)
            __builtin_trap();
        if (ldns_wire2pkt(&r, out, outlen) == LDNS_STATUS_OK) {
            /* an A answer only for an allowed name, and never while blocked */
            ldns_rr_list *ans = ldns_pkt_answer(r);
            for (size_t i = 0; i < ldns_rr_list_rr_count(ans); i++) {
                char *owner = ldns_rdf2str(ldns_rr_owner(ldns_rr_list_rr(ans, i)));
                struct gbx_egress_decision d;
                size_t n = owner ? strlen(owner) : 0;
                if (n && owner[n - 1] == '.')
                    owner[n - 1] = '\0';
                for (size_t k = 0; owner && owner[k]; k++)
                    if (owner[k] >= 'A' && owner[k] <= 'Z')
                        owner[k] = (char)(owner[k] - 'A' + 'a');
                gbx_egress_policy_check_name(sb.policy, owner ? owner : "", &d);
                if (!d.allow || eg.blocked)
                    __builtin_trap();
                free(owner);
            }
        } else if (!tcp && outlen == 512) {
            /* a truncated UDP answer need not parse */
        } else {
            __builtin_trap();
        }
        ldns_pkt_free(r);
    }
    free(out);
    return 0;
}
