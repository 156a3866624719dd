/* SPDX-License-Identifier: MIT */
/* gbx-probe: runs INSIDE a sandbox and reports what dangerous operations return, one line
 * each: "<check> <result>" where result is "ok" or an errno name. Static, no dependencies.
 * The integration tests hold the results to what the isolation promises.
 *
 *   gbx-probe all            every isolation check
 *   gbx-probe forkbomb       fork until it fails; prints "forkbomb <errno> <count>"
 *   gbx-probe membomb MB     touch MB MiB of anonymous memory (the OOM killer should act)
 *   gbx-probe fill PATH      write PATH until the write fails; prints "fill <errno> <bytes>"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <dirent.h>

static const char *ename(int e)
{
    switch (e) {
    case 0:
        return "ok";
    case EPERM:
        return "EPERM";
    case ENOENT:
        return "ENOENT";
    case ESRCH:
        return "ESRCH";
    case EACCES:
        return "EACCES";
    case EROFS:
        return "EROFS";
    case ENOSYS:
        return "ENOSYS";
    case EINVAL:
        return "EINVAL";
    case ENETUNREACH:
        return "ENETUNREACH";
    case EHOSTUNREACH:
        return "EHOSTUNREACH";
    case ECONNREFUSED:
        return "ECONNREFUSED";
    case EAGAIN:
        return "EAGAIN";
    case ENOSPC:
        return "ENOSPC";
    case EDQUOT:
        return "EDQUOT";
    case ENOMEM:
        return "ENOMEM";
    case EBADF:
        return "EBADF";
    case EFAULT:
        return "EFAULT";
    case ENXIO:
        return "ENXIO";
    case ENODEV:
        return "ENODEV";
    case EOPNOTSUPP:
        return "EOPNOTSUPP";
    case EAFNOSUPPORT:
        return "EAFNOSUPPORT";
    case EEXIST:
        return "EEXIST";
    case EBUSY:
        return "EBUSY";
    default: {
        static char buf[32];
        snprintf(buf, sizeof(buf), "E%d", e);
        return buf;
    }
    }
}

/* Report the errno of a call that returned r (< 0 means failure). */
static void report(const char *name, long r)
{
    printf("%s %s\n", name, r < 0 ? ename(errno) : "ok");
}

static void check_procs(void)
{
    DIR *d = opendir("/proc");
    int n = 0, maxpid = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        int pid = atoi(de->d_name);
        if (pid > 0) {
            n++;
            if (pid > maxpid)
                maxpid = pid;
        }
    }
    if (d)
        closedir(d);
    printf("procs %d\n", n);
    printf("pid %d\n", (int)getpid());
}

static void check_net(void)
{
    struct if_nameindex *ifs = if_nameindex(), *i;
    char names[256] = "";
    for (i = ifs; i && i->if_index; i++) {
        if (names[0])
            strcat(names, ",");
        strncat(names, i->if_name, sizeof(names) - strlen(names) - 16);
    }
    if (ifs)
        if_freenameindex(ifs);
    printf("interfaces %s\n", names);
    /* TEST-NET-1: there is no route, so the kernel refuses before sending anything */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(80)};
    sa.sin_addr.s_addr = htonl(0xC0000201); /* 192.0.2.1 */
    report("connect_external", connect(s, (struct sockaddr *)&sa, sizeof(sa)));
    close(s);
    s = socket(AF_INET, SOCK_DGRAM, 0);
    report("udp_external", sendto(s, "x", 1, 0, (struct sockaddr *)&sa, sizeof(sa)));
    close(s);
    report("raw_socket", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
    report("packet_socket", socket(AF_PACKET, SOCK_RAW, 0));
}

#if defined(__x86_64__)
/* The 32-bit entry points, judged by what the call did, not by what it returned (a kernel
 * may refuse int 0x80 with an errno, not have it and kill the caller, or, where nothing
 * filters, run it). Each call runs in a child; it exits 0 when the call took effect. */
static long int80(long nr, long a1)
{
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a1) : "r8", "r9", "r10", "r11", "memory");
    return r;
}

static int same_user_ns(const struct stat *a)
{
    struct stat b;
    return stat("/proc/self/ns/user", &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/* "<name> ok" when the call took effect, else "<name> refused" */
static void effect(const char *name, int which)
{
    pid_t p = fork();
    if (p == 0) {
        signal(SIGSEGV, SIG_DFL);
        signal(SIGSYS, SIG_DFL);
        struct stat a;
        if (which == 0)
            _exit(int80(20, 0) == getpid() ? 0 : 1); /* i386 getpid */
        if (stat("/proc/self/ns/user", &a) < 0)
            _exit(2);
        if (which == 1)
            (void)int80(310, CLONE_NEWUSER); /* i386 unshare */
        else
            (void)syscall(0x40000000 | SYS_unshare, CLONE_NEWUSER); /* x32 unshare */
        _exit(same_user_ns(&a) ? 1 : 0);
    }
    int st = 0;
    waitpid(p, &st, 0);
    printf("%s %s\n", name, WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "refused");
}

static void check_32bit(void)
{
    effect("int80_getpid", 0);
    effect("int80_unshare_user", 1);
    effect("x32_unshare_user", 2);
}
#endif

static void check_all(void)
{
    check_procs();
    printf("uid %d\n", (int)getuid());
    char host[128] = "";
    gethostname(host, sizeof(host) - 1);
    printf("hostname %s\n", host);
    report("mount_tmpfs", mount("tmpfs", "/mnt", "tmpfs", 0, NULL));
    report("umount_proc", umount2("/proc/sys", MNT_DETACH));
    report("unshare_user", unshare(CLONE_NEWUSER));
    report("unshare_mount", unshare(CLONE_NEWNS));
    report("unshare_net", unshare(CLONE_NEWNET));
    report("setns", setns(0, 0));
    report("clone3", syscall(SYS_clone3, NULL, 0));
    report("ptrace_traceme", ptrace(PTRACE_TRACEME, 0, NULL, NULL));
    report("ptrace_attach_1", ptrace(PTRACE_ATTACH, 1, NULL, NULL));
    report("init_module", syscall(SYS_init_module, NULL, 0, ""));
    report("finit_module", syscall(SYS_finit_module, -1, "", 0));
    report("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
    report("bpf", syscall(SYS_bpf, 0, NULL, 0));
    report("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
    report("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, -1, 0));
    report("userfaultfd", syscall(SYS_userfaultfd, 0));
    report("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
    report("reboot", syscall(SYS_reboot, 0, 0, 0, NULL));
    report("swapon", syscall(SYS_swapon, "/tmp", 0));
    report("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, 0));
#if defined(__x86_64__)
    check_32bit();
#endif
    /* chroot is allowed (CAP_SYS_CHROOT stays); test it in a child so our root stays put */
    pid_t cp = fork();
    if (cp == 0)
        _exit(chroot("/tmp") == 0 ? 0 : 1);
    int cst = 0;
    waitpid(cp, &cst, 0);
    printf("chroot %s\n", WIFEXITED(cst) && WEXITSTATUS(cst) == 0 ? "ok" : "failed");
    char c = 'x';
    int tty = open("/dev/tty", O_RDWR);
    report("tiocsti", ioctl(tty >= 0 ? tty : 0, TIOCSTI, &c));
    report("open_kvm", open("/dev/kvm", O_RDWR));
    report("mknod_kvm", mknod("/tmp/kvm", S_IFCHR | 0600, makedev(10, 232)));
    report("mknod_vda", mknod("/tmp/vda", S_IFBLK | 0600, makedev(254, 0)));
    report("open_vda", open("/dev/vda", O_RDONLY));
    report("write_proc_sys", open("/proc/sys/net/ipv4/ip_forward", O_WRONLY));
    report("write_proc_sys_kernel", open("/proc/sys/kernel/hostname", O_WRONLY));
    report("write_sysrq", open("/proc/sysrq-trigger", O_WRONLY));
    report("read_kcore", open("/proc/kcore", O_RDONLY));
    report("write_usr", open("/usr/glovebox-probe", O_WRONLY | O_CREAT, 0644));
    report("write_root", open("/glovebox-probe", O_WRONLY | O_CREAT, 0644));
    report("write_tmp", open("/tmp/glovebox-probe", O_WRONLY | O_CREAT, 0644));
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_max = rl.rlim_max == RLIM_INFINITY ? RLIM_INFINITY : rl.rlim_max + 1;
    rl.rlim_cur = rl.rlim_max;
    report("raise_nofile", setrlimit(RLIMIT_NOFILE, &rl));
    report("sethostname", sethostname("evil", 4));
    report("settimeofday", syscall(SYS_settimeofday, NULL, NULL));
    report("syslog", syscall(SYS_syslog, 3, NULL, 0));
    check_net();
    /* capability bounding set, from /proc/self/status */
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "CapBnd:", 7) == 0 || strncmp(line, "NoNewPrivs:", 11) == 0 ||
            strncmp(line, "Seccomp:", 8) == 0) {
            char *v = line + strcspn(line, ":") + 1;
            v += strspn(v, " \t");
            v[strcspn(v, "\n")] = '\0';
            line[strcspn(line, ":")] = '\0';
            printf("%s %s\n", line, v);
        }
    }
    if (f)
        fclose(f);
}

static int forkbomb(void)
{
    int n = 0;
    for (;;) {
        pid_t p = fork();
        if (p == 0) {
            pause();
            _exit(0);
        }
        if (p < 0) {
            printf("forkbomb %s %d\n", ename(errno), n);
            fflush(stdout);
            kill(0, SIGKILL);
            return 0;
        }
        if (++n > 100000) {
            printf("forkbomb unlimited %d\n", n);
            fflush(stdout);
            kill(0, SIGKILL);
            return 1;
        }
    }
}

static int membomb(long mb)
{
    size_t chunk = 1 << 20;
    for (long i = 0; i < mb; i++) {
        char *p = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            printf("membomb %s %ld\n", ename(errno), i);
            return 1;
        }
        memset(p, 1, chunk);
    }
    printf("membomb survived %ld\n", mb);
    return 0;
}

static int fill(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        printf("fill open-%s 0\n", ename(errno));
        return 1;
    }
    static char buf[1 << 16];
    memset(buf, 'z', sizeof(buf));
    long long total = 0;
    for (;;) {
        ssize_t n = write(fd, buf, sizeof(buf));
        if (n < 0) {
            printf("fill %s %lld\n", ename(errno), total);
            break;
        }
        total += n;
        if (total > (16ll << 30)) {
            printf("fill unlimited %lld\n", total);
            break;
        }
    }
    close(fd);
    unlink(path);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "all") == 0) {
        check_all();
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "forkbomb") == 0)
        return forkbomb();
    if (argc >= 3 && strcmp(argv[1], "membomb") == 0)
        return membomb(atol(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "fill") == 0)
        return fill(argv[2]);
    fprintf(stderr, "usage: gbx-probe all | forkbomb | membomb MB | fill PATH\n");
    return 2;
}
