/*
 * workbench-delayline: a one-way delay (and random loss) between two network interfaces, for kernels
 * without netem.
 *
 * What it models: the propagation part of one direction of one emulated path. Every Ethernet frame
 * that arrives on --in is sent out of --out after the delay in force when it arrived; frames leave in
 * the order they came (FIFO: a frame never overtakes an earlier one). Rate limit and bottleneck queue
 * are NOT done here: the frame goes out through --out's qdisc (HTB + FIFO), so an enqueue that the
 * qdisc refuses (full FIFO) is counted as `qdisc_drops`.
 *
 * Delay schedule: lines "offset_ns delay_ns [loss]" from --schedule FILE (or "-" = stdin, read to
 * EOF at start), offsets relative to --t0-ns (CLOCK_REALTIME, ns; default: now). Before the first
 * line the first line's values hold. A delay increase takes effect at once (a gap, no reordering); a
 * decrease is ramped: the delay falls at --ramp ns per ns of time (default 0.5), so that departure
 * times (arrival + delay) keep increasing and frames are never reordered nor compressed into a burst
 * faster than twice their arrival rate.
 *
 * Timing: arrival = the kernel's receive timestamp (SO_TIMESTAMPNS, same clock as tcpdump), departure
 * is waited for with ppoll (timer slack 1 ns) and the last --spin-ns busy-polled; SCHED_FIFO and
 * mlockall when allowed, so a loaded machine delays it as little as possible.
 *
 * Loss: each frame is dropped with the probability in force, drawn from a splitmix64 generator seeded
 * with --seed (one generator per instance).
 *
 * Outages (zero capacity): a schedule line's optional fourth field "1" starts an outage of the
 * bottleneck behind this program, a later line with "0" ends it. HTB cannot hold a rate of zero (a
 * stand-in of a few kbit/s charges each frame it lets through as seconds of debt, which blocks the
 * class long after the capacity came back), so the outage is made here: a frame that would leave
 * inside an outage leaves when it ends (FIFO order kept), and at most --hold-cap-packets frames or
 * --hold-cap-bytes bytes wait so (the bottleneck's buffer); more are dropped (`hold_drops`).
 *
 * On SIGTERM / SIGINT it stops and prints one JSON line of counters to stdout: frames received, sent,
 * lost, overflowed, refused by the qdisc, how late departures were (p50/p99/max), and the delay
 * changes as applied (when each took effect and when its ramp ended).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define SLOT_BYTES 2048
#define MAX_STEPS 1000000
#define LATE_BUCKETS 4096 /* lateness histogram, 1 us buckets, last = overflow */

typedef struct {
    int64_t due_ns;
    uint32_t len;
    uint8_t held; /* postponed to the end of an outage */
    uint8_t data[SLOT_BYTES];
} slot_t;

typedef struct {
    int64_t t_ns;      /* absolute CLOCK_REALTIME */
    int64_t delay_ns;
    double loss;
    int hold;          /* 1: the bottleneck is out from here until a step with 0 */
} step_t;

typedef struct {
    int64_t start_ns, end_ns; /* absolute; end_ns INT64_MAX when no later step ends it */
} window_t;

typedef struct {
    int64_t t_ns, target_ns, from_ns, ramp_end_ns;
} applied_t;

static volatile sig_atomic_t stop_flag = 0;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t rng_state;
static double rng_uniform(void) { /* splitmix64 -> [0, 1) */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static step_t *steps;
static size_t n_steps, step_idx;
static double eff_ns;          /* delay in effect (ramped) */
static int64_t eff_t_ns;       /* when eff_ns was last brought up to date */
static double ramp = 0.5;      /* ns of delay decrease per ns of time */
static applied_t *applied;
static size_t n_applied;
static window_t *holds;
static size_t n_holds;

/* The end of the outage that time t falls in, or 0. Outages are few: a linear scan is enough. */
static int64_t hold_end(int64_t t) {
    for (size_t i = 0; i < n_holds; i++) {
        if (t < holds[i].start_ns) return 0;
        if (t < holds[i].end_ns) return holds[i].end_ns;
    }
    return 0;
}

static void build_holds(void) {
    for (size_t i = 0; i < n_steps; i++) {
        if (!steps[i].hold) continue;
        int64_t end = INT64_MAX;
        size_t j = i + 1;
        while (j < n_steps && steps[j].hold) j++;
        if (j < n_steps) end = steps[j].t_ns;
        holds[n_holds++] = (window_t){steps[i].t_ns, end};
        i = j;
    }
}

/* Let the ramped delay follow the current target up to time t (no step boundary inside). */
static void decay_to(int64_t t) {
    double target = (double)steps[step_idx].delay_ns;
    if (eff_ns > target && t > eff_t_ns) {
        double d = eff_ns - ramp * (double)(t - eff_t_ns);
        eff_ns = d < target ? target : d;
    }
    if (t > eff_t_ns) eff_t_ns = t;
}

/* The delay in force for a frame arriving at t (t non-decreasing between calls, modulo jitter). */
static double delay_at(int64_t t) {
    while (step_idx + 1 < n_steps && steps[step_idx + 1].t_ns <= t) {
        int64_t tc = steps[step_idx + 1].t_ns;
        decay_to(tc);
        step_idx++;
        double target = (double)steps[step_idx].delay_ns;
        applied_t a = {tc, steps[step_idx].delay_ns, (int64_t)eff_ns, tc};
        if (target >= eff_ns) {
            eff_ns = target; /* increases: at once */
        } else {
            a.ramp_end_ns = tc + (int64_t)((eff_ns - target) / ramp);
        }
        applied[n_applied++] = a;
    }
    decay_to(t);
    return eff_ns;
}

static int open_if(const char *name, int rx) {
    unsigned idx = if_nametoindex(name);
    if (!idx) { fprintf(stderr, "delayline: no interface %s\n", name); return -1; }
    int fd = socket(AF_PACKET, SOCK_RAW, 0);
    if (fd < 0) { perror("delayline: socket(AF_PACKET)"); return -1; }
    struct sockaddr_ll sll;
    memset(&sll, 0, sizeof sll);
    sll.sll_family = AF_PACKET;
    sll.sll_ifindex = (int)idx;
    sll.sll_protocol = rx ? htons(ETH_P_ALL) : 0;
    if (rx) {
        int one = 1, big = 16 << 20;
        /* frames this host sends on the interface (the other direction's instance) are not ours */
        if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0)
            perror("delayline: PACKET_IGNORE_OUTGOING");
        if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0)
            perror("delayline: SO_TIMESTAMPNS");
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    } else {
        int big = 4 << 20;
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big) < 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    }
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) {
        fprintf(stderr, "delayline: bind %s: %s\n", name, strerror(errno));
        return -1;
    }
    return fd;
}

static int read_schedule(const char *path, int64_t t0) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) { fprintf(stderr, "delayline: cannot open schedule %s: %s\n", path, strerror(errno)); return -1; }
    char line[256];
    long lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#' || *p == '\n' || *p == 0) continue;
        long long off, d;
        double loss = 0.0;
        int hold = 0;
        int n = sscanf(p, "%lld %lld %lf %d", &off, &d, &loss, &hold);
        if (n < 2 || d < 0 || loss < 0 || loss > 1 || hold < 0 || hold > 1) {
            fprintf(stderr, "delayline: schedule %s line %ld: expected 'offset_ns delay_ns [loss [hold]]'\n",
                    path, lineno);
            return -1;
        }
        if (n_steps && t0 + off <= steps[n_steps - 1].t_ns) {
            fprintf(stderr, "delayline: schedule %s line %ld: offsets must increase\n", path, lineno);
            return -1;
        }
        if (n_steps >= MAX_STEPS) { fprintf(stderr, "delayline: schedule too long\n"); return -1; }
        steps[n_steps++] = (step_t){t0 + off, d, loss, hold};
    }
    if (f != stdin) fclose(f);
    return 0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: workbench-delayline --in IF --out IF [--delay-ns N] [--loss P] [--schedule FILE|-]\n"
            "         [--t0-ns N] [--seed N] [--ramp SLOPE] [--slots N] [--spin-ns N] [--no-rt]\n"
            "         [--hold-cap-packets N | --hold-cap-bytes N]\n");
}

int main(int argc, char **argv) {
    const char *in_if = NULL, *out_if = NULL, *sched_path = NULL;
    int64_t t0 = now_ns(), const_delay = 0, spin_ns = 30000;
    double const_loss = 0.0;
    uint64_t seed = 1;
    size_t n_slots = 8192;
    int rt = 1;
    uint64_t hold_cap_packets = 0, hold_cap_bytes = 0; /* 0: no limit */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-rt")) { rt = 0; continue; }
        if (!v) { usage(); return 2; }
        i++;
        if (!strcmp(a, "--in")) in_if = v;
        else if (!strcmp(a, "--out")) out_if = v;
        else if (!strcmp(a, "--schedule")) sched_path = v;
        else if (!strcmp(a, "--delay-ns")) const_delay = atoll(v);
        else if (!strcmp(a, "--loss")) const_loss = atof(v);
        else if (!strcmp(a, "--t0-ns")) t0 = atoll(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--ramp")) ramp = atof(v);
        else if (!strcmp(a, "--slots")) n_slots = (size_t)atoll(v);
        else if (!strcmp(a, "--spin-ns")) spin_ns = atoll(v);
        else if (!strcmp(a, "--hold-cap-packets")) hold_cap_packets = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--hold-cap-bytes")) hold_cap_bytes = strtoull(v, NULL, 10);
        else { usage(); return 2; }
    }
    if (!in_if || !out_if || ramp <= 0 || ramp > 1 || n_slots < 16) { usage(); return 2; }
    rng_state = seed;

    steps = calloc(MAX_STEPS, sizeof *steps);
    applied = calloc(MAX_STEPS, sizeof *applied);
    holds = calloc(MAX_STEPS, sizeof *holds);
    slot_t *ring = calloc(n_slots, sizeof *ring);
    uint64_t *late_hist = calloc(LATE_BUCKETS, sizeof *late_hist);
    if (!steps || !applied || !holds || !ring || !late_hist) { fprintf(stderr, "delayline: out of memory\n"); return 1; }
    if (sched_path) {
        if (read_schedule(sched_path, t0) < 0) return 2;
    }
    if (n_steps == 0) steps[n_steps++] = (step_t){t0, const_delay, const_loss, 0};
    build_holds();
    step_idx = 0;
    eff_ns = (double)steps[0].delay_ns;
    eff_t_ns = steps[0].t_ns;

    int rx = open_if(in_if, 1), tx = open_if(out_if, 0);
    if (rx < 0 || tx < 0) return 1;

    /* Be on time even when the machine is busy: real-time priority, no page faults, no timer slack. */
    int rt_ok = 0, locked = 0;
    if (rt) {
        struct sched_param sp = {.sched_priority = 50};
        rt_ok = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
        locked = mlockall(MCL_CURRENT | MCL_FUTURE) == 0;
    }
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

    sigset_t block, waitmask;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &waitmask);
    sigdelset(&waitmask, SIGTERM);
    sigdelset(&waitmask, SIGINT);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("{\"ready\": true, \"rt\": %s, \"mlock\": %s}\n", rt_ok ? "true" : "false", locked ? "true" : "false");
    fflush(stdout);

    uint64_t n_rx = 0, n_sent = 0, n_lost = 0, n_overflow = 0, n_qdisc = 0, n_err = 0, n_big = 0;
    uint64_t n_held = 0, n_hold_drop = 0, held_packets = 0, held_bytes = 0;
    size_t head = 0, count = 0, max_count = 0;
    int64_t last_due = 0;
    uint8_t cbuf[256];

    while (!stop_flag) {
        int64_t now = now_ns();
        /* send what is due */
        while (count && ring[head].due_ns <= now) {
            slot_t *s = &ring[head];
            if (send(tx, s->data, s->len, 0) < 0) {
                if (errno == ENOBUFS) n_qdisc++; /* the bottleneck FIFO is full: a drop-tail drop */
                else n_err++;
            } else {
                n_sent++;
            }
            if (s->held) { held_packets--; held_bytes -= s->len; }
            int64_t late_us = (now - s->due_ns) / 1000;
            late_hist[late_us < LATE_BUCKETS ? late_us : LATE_BUCKETS - 1]++;
            head = (head + 1) % n_slots;
            count--;
            now = now_ns();
        }
        /* wait for a frame or the next departure; the last spin_ns busy-polled */
        int64_t wait_ns = count ? ring[head].due_ns - now : 200000000;
        struct pollfd pfd = {.fd = rx, .events = POLLIN};
        int ready;
        if (count && wait_ns <= spin_ns) {
            ready = poll(&pfd, 1, 0);
        } else {
            int64_t w = count ? wait_ns - spin_ns : wait_ns;
            struct timespec ts = {.tv_sec = w / 1000000000, .tv_nsec = w % 1000000000};
            ready = ppoll(&pfd, 1, &ts, &waitmask);
        }
        if (ready <= 0 || !(pfd.revents & POLLIN)) continue;
        /* drain every frame that is there */
        for (;;) {
            slot_t *s = &ring[(head + count) % n_slots];
            uint8_t scratch[SLOT_BYTES];
            struct iovec iov = {.iov_base = count < n_slots ? s->data : scratch, .iov_len = SLOT_BYTES};
            struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                                 .msg_controllen = sizeof cbuf};
            ssize_t n = recvmsg(rx, &msg, MSG_DONTWAIT | MSG_TRUNC);
            if (n < 0) break;
            n_rx++;
            int64_t t_arr = 0;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
                    struct timespec ts;
                    memcpy(&ts, CMSG_DATA(c), sizeof ts);
                    t_arr = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
                }
            }
            if (!t_arr) t_arr = now_ns();
            double d = delay_at(t_arr);
            if (n > SLOT_BYTES) { n_big++; continue; }   /* offloads left on: cannot forward */
            if (count >= n_slots) { n_overflow++; continue; }
            if (steps[step_idx].loss > 0 && rng_uniform() < steps[step_idx].loss) { n_lost++; continue; }
            int64_t due = t_arr + (int64_t)d;
            if (due < last_due) due = last_due; /* FIFO: never overtake */
            int64_t he = hold_end(due);
            s->held = 0;
            if (he) { /* the bottleneck is out when it would get there: it waits in the bottleneck's buffer */
                if ((hold_cap_packets && held_packets >= hold_cap_packets) ||
                    (hold_cap_bytes && held_bytes + (uint64_t)n > hold_cap_bytes)) {
                    n_hold_drop++;
                    continue;
                }
                due = he;
                s->held = 1;
                held_packets++;
                held_bytes += (uint64_t)n;
                n_held++;
            }
            last_due = due;
            s->due_ns = due;
            s->len = (uint32_t)n;
            count++;
            if (count > max_count) max_count = count;
        }
    }
    delay_at(now_ns()); /* record changes that came due without traffic */

    uint64_t total = 0, acc = 0;
    for (int i = 0; i < LATE_BUCKETS; i++) total += late_hist[i];
    int64_t p50 = -1, p99 = -1, mx = -1;
    for (int i = 0; i < LATE_BUCKETS; i++) {
        acc += late_hist[i];
        if (late_hist[i]) mx = i;
        if (p50 < 0 && total && acc * 2 >= total) p50 = i;
        if (p99 < 0 && total && acc * 100 >= total * 99) p99 = i;
    }
    printf("{\"in\": \"%s\", \"out\": \"%s\", \"rx\": %llu, \"sent\": %llu, \"lost\": %llu, \"overflow\": %llu, "
           "\"qdisc_drops\": %llu, \"send_errors\": %llu, \"oversize\": %llu, \"pending\": %zu, \"max_queue\": %zu, "
           "\"late_p50_us\": %lld, \"late_p99_us\": %lld, \"late_max_us\": %lld, \"held\": %llu, "
           "\"hold_drops\": %llu, \"rt\": %s, \"changes\": [",
           in_if, out_if, (unsigned long long)n_rx, (unsigned long long)n_sent, (unsigned long long)n_lost,
           (unsigned long long)n_overflow, (unsigned long long)n_qdisc, (unsigned long long)n_err,
           (unsigned long long)n_big, count, max_count, (long long)p50, (long long)p99, (long long)mx,
           (unsigned long long)n_held, (unsigned long long)n_hold_drop, rt_ok ? "true" : "false");
    for (size_t i = 0; i < n_applied; i++)
        printf("%s[%lld, %lld, %lld, %lld]", i ? ", " : "", (long long)applied[i].t_ns,
               (long long)applied[i].target_ns, (long long)applied[i].from_ns, (long long)applied[i].ramp_end_ns);
    printf("]}\n");
    fflush(stdout);
    return 0;
}
