// htsim's cost per packet as the number of subflows grows, on the scenario of bench_subflows.py: 40
// Mbit/s over min(n, 4) paths (one-way delays 10/20/30/40 ms each way, 100 kB drop-tail buffers),
// one MPTCP connection with n bulk subflows spread over the paths, loggers off. The reference for the
// "flat from 2 to 8 subflows" target: the same growth measured on a lean packet-level simulator.
//
// htsim is not a dependency of the workbench; build this against a checkout of Broadcom/csg-htsim
// (measured at commit 841d9e7):
//
//     make -C $HTSIM/sim libhtsim.a
//     g++ -O3 -std=c++11 -I$HTSIM/sim benchmarks/htsim_subflows.cpp -L$HTSIM/sim -lhtsim -o /tmp/htsim_subflows
//     /tmp/htsim_subflows [SECONDS=3000] [UNCOUPLED|COUPLED_INC] [REPEAT=3]
//
// It prints CPU ns per data packet sent (the least of REPEAT runs) at 2, 4 and 8 subflows, and the
// growth from 2 to 8. UNCOUPLED is a Reno-like TCP per subflow; COUPLED_INC is LIA (RFC 6356).

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "clock.h"
#include "eventlist.h"
#include "mtcp.h"
#include "network.h"
#include "pipe.h"
#include "queue.h"

// CPU seconds of one run and the data packets its subflows sent.
static void run(int n_subflows, double seconds, int algo, double* cpu_s, double* packets) {
    EventList eventlist;
    eventlist.setEndtime(timeFromSec(seconds));
    int n_paths = n_subflows < 4 ? n_subflows : 4;
    std::vector<Queue*> queues;
    std::vector<Pipe*> fwd, back;
    for (int i = 0; i < n_paths; i++) {
        queues.push_back(new Queue(speedFromMbps(40.0 / n_paths), 100000, eventlist, NULL));
        fwd.push_back(new Pipe(timeFromMs(10 * (i + 1)), eventlist));
        back.push_back(new Pipe(timeFromMs(10 * (i + 1)), eventlist));
    }
    TcpRtxTimerScanner scanner(timeFromMs(10), eventlist);
    MultipathTcpSrc* mtcp = new MultipathTcpSrc(algo, eventlist, NULL, 100000);
    MultipathTcpSink* msink = new MultipathTcpSink(eventlist);
    std::vector<TcpSrc*> srcs;
    for (int k = 0; k < n_subflows; k++) {
        int i = k % n_paths;
        TcpSrc* src = new TcpSrc(NULL, NULL, eventlist);
        TcpSink* snk = new TcpSink();
        scanner.registerTcp(*src);
        route_t* out = new route_t();
        out->push_back(queues[i]);
        out->push_back(fwd[i]);
        out->push_back(snk);
        route_t* in = new route_t();
        in->push_back(back[i]);
        in->push_back(src);
        mtcp->addSubflow(src);
        msink->addSubflow(snk);
        src->connect(*out, *in, *snk, timeFromMs(0.1 * k));
        srcs.push_back(src);
    }
    mtcp->connect(msink);
    clock_t c0 = clock();
    while (eventlist.doNextEvent()) {
    }
    *cpu_s = double(clock() - c0) / CLOCKS_PER_SEC;
    *packets = 0;
    for (TcpSrc* s : srcs) *packets += double(s->_packets_sent) / s->_mss;  // _packets_sent counts bytes
}

// `run` in a child process: htsim allows one EventList per process.
static void run_apart(int n_subflows, double seconds, int algo, double* cpu_s, double* packets) {
    int fds[2];
    if (pipe(fds) != 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
        double out[2];
        run(n_subflows, seconds, algo, &out[0], &out[1]);
        if (write(fds[1], out, sizeof out) != (ssize_t)sizeof out) _exit(1);
        _exit(0);
    }
    double in[2];
    if (read(fds[0], in, sizeof in) != (ssize_t)sizeof in) abort();
    waitpid(pid, NULL, 0);
    close(fds[0]);
    close(fds[1]);
    *cpu_s = in[0];
    *packets = in[1];
}

int main(int argc, char** argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3000;
    int algo = (argc > 2 && !strcmp(argv[2], "COUPLED_INC")) ? COUPLED_INC : UNCOUPLED;
    int repeat = argc > 3 ? atoi(argv[3]) : 3;
    const int counts[] = {2, 4, 8};
    double best[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < repeat; r++) {
        for (int j = 0; j < 3; j++) {  // counts take turns, so that a drift in machine speed moves all alike
            double cpu_s, packets;
            run_apart(counts[j], seconds, algo, &cpu_s, &packets);
            if (cpu_s / packets < best[j]) best[j] = cpu_s / packets;
        }
    }
    const char* name = algo == UNCOUPLED ? "uncoupled" : "coupled_inc";
    for (int j = 0; j < 3; j++) printf("htsim %s %d subflows: %.1f ns/pkt\n", name, counts[j], best[j] * 1e9);
    printf("htsim %s 2 -> 8 subflows: %+.0f %% per packet\n", name, 100 * (best[2] / best[0] - 1));
}
