/* SPDX-License-Identifier: MIT */
#include "egress/verdict.h"

#include <stdio.h>
#include <string.h>

static const char *const names[GBX_EGRESS_NVERDICTS] = {
    [GBX_EGRESS_ALLOW] = "allow",
    [GBX_EGRESS_DENY] = "deny",
    [GBX_EGRESS_UPSTREAM_FAILED] = "upstream_failed",
    [GBX_EGRESS_CLIENT_ERROR] = "client_error",
};

const char *gbx_egress_verdict_name(enum gbx_egress_verdict v)
{
    return (unsigned)v < GBX_EGRESS_NVERDICTS ? names[v] : "deny";
}

enum gbx_egress_verdict gbx_egress_verdict_parse(const char *word)
{
    for (int v = 0; word && v < GBX_EGRESS_NVERDICTS; v++)
        if (strcmp(word, names[v]) == 0)
            return (enum gbx_egress_verdict)v;
    return GBX_EGRESS_DENY;
}

size_t gbx_egress_verdict_http(int status, const char *reason, char *buf, size_t bufsz)
{
    const char *phrase, *what;
    switch (status) {
    case 403:
        phrase = "Forbidden";
        what = "denied by policy";
        break;
    case 502:
        phrase = "Bad Gateway";
        what = "upstream failed";
        break;
    case 504:
        phrase = "Gateway Timeout";
        what = "upstream timed out";
        break;
    default:
        return 0;
    }
    char body[256];
    int blen = snprintf(body, sizeof(body), "glovebox egress: %s%s%s\n", what,
                        reason && reason[0] ? ": " : "", reason ? reason : "");
    if (blen < 0)
        return 0;
    if ((size_t)blen >= sizeof(body)) { /* cut: still one line */
        blen = (int)sizeof(body) - 1;
        body[blen - 1] = '\n';
    }
    int n = snprintf(buf, bufsz,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n%s",
                     status, phrase, blen, body);
    if (n < 0 || (size_t)n >= bufsz)
        return 0;
    return (size_t)n;
}
