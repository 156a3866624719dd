/* SPDX-License-Identifier: MIT */
/* Network namespace: loopback only. No interface leads anywhere (egress arrives later
 * through sockets the daemon owns inside the namespace). */
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/ns.h"

int gbx_ns_loopback_up(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    strcpy(ifr.ifr_name, "lo");
    int r = 0;
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
        r = -errno;
    } else {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
            r = -errno;
    }
    close(fd);
    return r;
}

int gbx_sandbox_loopback_up(void)
{
    return gbx_ns_loopback_up();
}
