/* SPDX-License-Identifier: MIT */
#include "base/fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define MAX_FAULTS 16

enum action { ACT_KILL, ACT_FAIL, ACT_HANG };

struct fault {
    char point[64];
    enum action act;
    unsigned at;
    atomic_uint hits;
};

static struct fault faults[MAX_FAULTS];
static size_t nfaults;
static atomic_int state; /* 0 unparsed, 1 none set, 2 some set */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void parse_one(const char *s, size_t len)
{
    if (len == 0 || nfaults == MAX_FAULTS)
        return;
    struct fault *f = &faults[nfaults];
    char buf[128];
    if (len >= sizeof(buf))
        return;
    memcpy(buf, s, len);
    buf[len] = '\0';
    f->at = 1;
    char *at = strchr(buf, '@');
    if (at) {
        *at = '\0';
        long n = strtol(at + 1, NULL, 10);
        f->at = n > 0 ? (unsigned)n : 1;
    }
    char *colon = strchr(buf, ':');
    f->act = ACT_KILL;
    if (colon) {
        *colon = '\0';
        if (strcmp(colon + 1, "fail") == 0)
            f->act = ACT_FAIL;
        else if (strcmp(colon + 1, "hang") == 0)
            f->act = ACT_HANG;
    }
    if (buf[0] == '\0' || strlen(buf) >= sizeof(f->point))
        return;
    memcpy(f->point, buf, strlen(buf) + 1);
    nfaults++;
}

static void parse(void)
{
    const char *env = getenv("GLOVEBOX_FAULT");
    if (env) {
        const char *p = env;
        while (*p) {
            size_t len = strcspn(p, ",");
            parse_one(p, len);
            p += len;
            if (*p == ',')
                p++;
        }
    }
    atomic_store(&state, nfaults ? 2 : 1);
}

static int hit(const char *point, int may_fail)
{
    if (atomic_load_explicit(&state, memory_order_relaxed) == 1)
        return 0;
    pthread_once(&once, parse);
    if (atomic_load(&state) != 2)
        return 0;
    /* the hits of a point are counted once, whatever the entries that name it */
    struct fault *fire = NULL;
    for (size_t i = 0; i < nfaults; i++) {
        struct fault *f = &faults[i];
        if (strcmp(f->point, point) == 0 && atomic_fetch_add(&f->hits, 1) + 1 == f->at &&
            fire == NULL)
            fire = f;
    }
    if (fire == NULL)
        return 0;
    static const char *const names[] = {"kill", "fail", "hang"};
    enum action act = fire->act == ACT_FAIL && !may_fail ? ACT_KILL : fire->act;
    fprintf(stderr, "fault: '%s': %s\n", point, names[act]);
    fflush(stderr);
    switch (act) {
    case ACT_KILL:
        raise(SIGKILL);
        break;
    case ACT_HANG: {
        struct timespec ts = {3600, 0};
        while (nanosleep(&ts, &ts) < 0)
            ;
        return 0;
    }
    case ACT_FAIL:
        return -EIO;
    }
    return 0;
}

int gbx_fault(const char *point)
{
    return hit(point, 1);
}

void gbx_fault_point(const char *point)
{
    (void)hit(point, 0);
}
