/* SPDX-License-Identifier: MIT */
/* Capabilities: the bounding set keeps a small container default (gbx_caps_keep); no
 * CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_PTRACE or CAP_SYS_MODULE. */
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/ns.h"

static int keep(int cap)
{
    for (size_t i = 0; i < gbx_caps_nkeep; i++)
        if (gbx_caps_keep[i] == cap)
            return 1;
    return 0;
}

int gbx_ns_caps_drop(void)
{
    /* capabilities are numbered densely: the first EINVAL is past the kernel's last one */
    for (int c = 0; c <= 63; c++) {
        if (keep(c))
            continue;
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
            if (errno == EINVAL)
                break;
            return -errno;
        }
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -errno;
    /* effective and permitted keep only the kept set; inheritable is empty */
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {{0}};
    for (size_t i = 0; i < gbx_caps_nkeep; i++) {
        int c = gbx_caps_keep[i];
        d[c / 32].effective |= 1u << (c % 32);
        d[c / 32].permitted |= 1u << (c % 32);
    }
    if (syscall(SYS_capset, &h, d) < 0)
        return -errno;
    return 0;
}
