/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the TLS ClientHello server-name sniffer (src/egress/sniff.c): whatever
 * the bytes, the result is OK, MORE or BAD; OK comes with a host name ([a-z0-9.-]) that fits
 * the buffer; a buffer that is not a TLS handshake record start is BAD; and results are
 * consistent across buffer sizes and prefixes (a ClientHello whole in a prefix is the same
 * ClientHello in the whole buffer, a whole buffer that is a prefix has only prefixes). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "egress/sniff.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(int r, const char *sni, size_t snisz)
{
    CHECK(r == GBX_SNIFF_OK || r == GBX_SNIFF_MORE || r == GBX_SNIFF_BAD);
    size_t n = strnlen(sni, snisz);
    CHECK(n < snisz);
    if (r != GBX_SNIFF_OK)
        CHECK(n == 0);
    CHECK(strspn(sni, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char big[256], small[256];
    size_t smallsz = 1 + size % 24;

    int r = gbx_sniff_tls_sni(data, size, big, sizeof(big));
    check_name(r, big, sizeof(big));
    if (size >= 3 && !gbx_sniff_is_tls(data, size))
        CHECK(r == GBX_SNIFF_BAD);

    /* a smaller name buffer: the same answer, but for names that do not fit */
    int rs = gbx_sniff_tls_sni(data, size, small, smallsz);
    check_name(rs, small, smallsz);
    if (r == GBX_SNIFF_OK && strlen(big) < smallsz)
        CHECK(rs == GBX_SNIFF_OK && strcmp(big, small) == 0);
    else if (r == GBX_SNIFF_OK)
        CHECK(rs == GBX_SNIFF_BAD);
    else
        CHECK(rs == r);

    /* one prefix */
    if (size > 0) {
        size_t k = (size * 2654435761u + data[size / 2]) % size;
        int rp = gbx_sniff_tls_sni(data, k, small, sizeof(small));
        check_name(rp, small, sizeof(small));
        if (rp == GBX_SNIFF_OK)
            CHECK(r == GBX_SNIFF_OK && strcmp(big, small) == 0);
        if (r == GBX_SNIFF_MORE)
            CHECK(rp == GBX_SNIFF_MORE);
    }
    return 0;
}
