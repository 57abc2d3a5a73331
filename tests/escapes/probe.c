/* A system call a contained Run might make to get out, called as an attacker
 * would: `probe WHAT [ARG]`. Exit 0 (and "reached: ...") when the call got to
 * the kernel's own checks, or did what it asked; 1 ("refused: ...") when it was
 * refused with EPERM/EACCES before that. The arguments are chosen so that the
 * kernel, reached, answers anything but EPERM (a path that does not exist, a
 * bad fd, a null pointer): an EPERM can only be the sandbox's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEY_SPEC_PROCESS_KEYRING -2
#define KEY_SPEC_SESSION_KEYRING -3
#define KEYCTL_SEARCH 10
#define KEYCTL_READ 11

static int verdict(const char *what, long ret) {
    int e = errno;
    if (ret < 0 && (e == EPERM || e == EACCES)) {
        printf("refused: %s (%s)\n", what, strerror(e));
        return 1;
    }
    printf("reached: %s (%ld, %s)\n", what, ret, ret < 0 ? strerror(e) : "ok");
    return 0;
}

static int key_read(const char *name) {
    long id = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user", name, 0);
    if (id < 0) return verdict("keyctl search", id) == 0 ? 2 : 1;
    char buf[256] = {0};
    long n = syscall(SYS_keyctl, KEYCTL_READ, id, buf, sizeof buf - 1);
    if (n < 0) return verdict("keyctl read", n) == 0 ? 2 : 1;
    printf("read: %s\n", buf);
    return 0;
}

/* A pty of our own made our controlling terminal: TIOCSTI then needs no right. */
static int on_own_tty(unsigned long request) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) || unlockpt(m)) { perror("pty"); return 2; }
    char *name = ptsname(m);
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        int s = open(name, O_RDWR);
        if (s < 0) { perror("open pts"); _exit(2); }
        char c = 'x';
        int sub = 6; /* TIOCLINUX's subcode: read the console's selection */
        long r = ioctl(s, request, request == 0x5412 ? (void *)&c : (void *)&sub);
        _exit(verdict(request == 0x5412 ? "TIOCSTI" : "TIOCLINUX", r));
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}

static int in_own_namespace(void) {
    /* a user and mount namespace of the Run's own, where the kernel lets it mount */
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) perror("unshare (the calls follow anyway)");
    int bad = 0;
    bad |= !verdict("mount", syscall(SYS_mount, "none", "/no/such/dir", "tmpfs", 0, NULL));
    bad |= !verdict("umount2", syscall(SYS_umount2, "/no/such/dir", 0));
    bad |= !verdict("pivot_root", syscall(SYS_pivot_root, "/no/such/a", "/no/such/b"));
    bad |= !verdict("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
    bad |= !verdict("fsmount", syscall(SYS_fsmount, -1, 0, 0));
    bad |= !verdict("fspick", syscall(SYS_fspick, AT_FDCWD, "/no/such/dir", 0));
    bad |= !verdict("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/no/such/dir", 0));
    bad |= !verdict("move_mount", syscall(SYS_move_mount, -1, "", -1, "", 0));
    bad |= !verdict("mount_setattr", syscall(SYS_mount_setattr, -1, "", 0, NULL, 0));
    return bad ? 0 : 1; /* any one reached: an escape */
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    const char *arg = argc > 2 ? argv[2] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(what, "key-read")) return key_read(arg);
    if (!strcmp(what, "add-key"))
        return verdict("add_key", syscall(SYS_add_key, "user", "owl-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING));
    if (!strcmp(what, "request-key"))
        return verdict("request_key", syscall(SYS_request_key, "user", arg, NULL, 0));
    if (!strcmp(what, "tiocsti")) return on_own_tty(0x5412);
    if (!strcmp(what, "tioclinux")) return on_own_tty(0x541C);
    if (!strcmp(what, "ptrace-init")) {
        long r = ptrace(PTRACE_SEIZE, 1, NULL, NULL);
        return verdict("ptrace(PTRACE_SEIZE, 1)", r);
    }
    if (!strcmp(what, "ptrace-own")) { /* its own child: gdb and strace of a test */
        pid_t child = fork();
        if (child == 0) { pause(); _exit(0); }
        long r = ptrace(PTRACE_SEIZE, child, NULL, NULL);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        return verdict("ptrace(PTRACE_SEIZE, its own child)", r);
    }
    if (!strcmp(what, "ptrace-init-high")) { /* pid 1 with a high bit the kernel drops */
        long r = syscall(SYS_ptrace, PTRACE_SEIZE, 0x100000001L, NULL, NULL);
        return verdict("ptrace(PTRACE_SEIZE, 1 + 2^32)", r);
    }
    if (!strcmp(what, "vm-read-init") || !strcmp(what, "vm-write-init")) {
        char buf[8];
        struct iovec local = {buf, sizeof buf}, remote = {NULL, sizeof buf};
        long r = what[3] == 'r' ? syscall(SYS_process_vm_readv, 1, &local, 1, &remote, 1, 0)
                                : syscall(SYS_process_vm_writev, 1, &local, 1, &remote, 1, 0);
        return verdict(what, r);
    }
    if (!strcmp(what, "mem-init")) return verdict("open /proc/1/mem", open("/proc/1/mem", O_RDWR));
    if (!strcmp(what, "pidfd-getfd")) {
        long pfd = syscall(SYS_pidfd_open, 1, 0);
        if (pfd < 0) return verdict("pidfd_open(1)", pfd);
        return verdict("pidfd_getfd(pid 1, 0)", syscall(SYS_pidfd_getfd, pfd, 0, 0));
    }
    if (!strcmp(what, "bpf")) return verdict("bpf", syscall(SYS_bpf, 9999, NULL, 0));
    if (!strcmp(what, "perf")) return verdict("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
    if (!strcmp(what, "userfaultfd")) return verdict("userfaultfd", syscall(SYS_userfaultfd, 1 /* UFFD_USER_MODE_ONLY */));
    if (!strcmp(what, "mounts")) return in_own_namespace();
    /* refused by the kernel to any process without the right, root's Run
     * included (its capabilities are dropped): reached only by a root with them */
    if (!strcmp(what, "delete-module")) return verdict("delete_module", syscall(SYS_delete_module, "owl_no_such_module", O_NONBLOCK));
    if (!strcmp(what, "init-module")) return verdict("init_module", syscall(SYS_init_module, NULL, 0, ""));
    if (!strcmp(what, "finit-module")) return verdict("finit_module", syscall(SYS_finit_module, -1, "", 0));
    if (!strcmp(what, "kexec-load")) return verdict("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0x7fffffff));
    if (!strcmp(what, "kexec-file-load")) return verdict("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0x7fffffff));
    if (!strcmp(what, "io-uring")) { /* io_uring makes and connects sockets of its own */
        char params[120] = {0}; /* struct io_uring_params */
        return verdict("io_uring_setup", syscall(SYS_io_uring_setup, 1, params));
    }
    if (!strcmp(what, "dgram-pair")) { /* a datagram pair's end, aimed at a path */
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0)
            return verdict("socketpair(AF_UNIX, SOCK_DGRAM)", -1);
        struct sockaddr_un to = {.sun_family = AF_UNIX};
        strncpy(to.sun_path, arg, sizeof to.sun_path - 1);
        long r = sendto(sv[0], "hello", 5, 0, (struct sockaddr *)&to, sizeof to);
        printf("sendto %s: %ld (%s)\n", arg, r, r < 0 ? strerror(errno) : "sent");
        return r == 5 ? 0 : 1; /* sent: reached the socket at that path */
    }
    fprintf(stderr, "probe: what? %s\n", what);
    return 2;
}
