"""benchmarks/kernel_sockets.py reads `ss -tmiMH` as this kernel prints it (the sample below is a
real one: the server side of rate-x10-rtt-x15 at 3 s, two subflows and the MPTCP socket); the
numbers docs/FIDELITY.md quotes from it must come from the right socket and the right field."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.kernel_sockets import parse_ss  # noqa: E402

SS = (
    "tcp   ESTAB 0      274256 10.0.1.2:5201 10.0.1.1:48119\n\t skmem:(r0,rb131072,t0,tb285696,f3952,w295056,o0,"
    "bl0,d0) cubic wscale:7,7 rto:216 rtt:14.627/1.038 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:36 "
    "ssthresh:34 bytes_sent:5453152 bytes_retrans:28480 bytes_acked:5376224 segs_out:3850 segs_in:2677 "
    "data_segs_out:3850 send 28.5Mbps lastrcv:3096 pacing_rate 34.2Mbps delivery_rate 22.1Mbps delivered:3797 "
    "busy:1708ms unacked:35 retrans:0/20 dsack_dups:1 rcv_space:14480 rcv_ssthresh:64088 notsent:225808 "
    "minrtt:8.051 snd_wnd:3003392 tcp-ulp-mptcp flags:Mec token:0000(id:0)/46e9f2f3(id:0) seq:d863d64790f3f307 "
    "sfseq:0 ssnoff:5b0e650c maplen:0      \n"
    "tcp   ESTAB 0      67072  10.0.1.2:5201 10.0.2.1:36873\n\t skmem:(r0,rb131072,t0,tb829440,f1664,w72064,o0,bl0,"
    "d0) cubic wscale:7,7 rto:364 rtt:143.288/8.217 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:3 ssthresh:88 "
    "bytes_sent:554176 bytes_retrans:76896 bytes_acked:474320 segs_out:397 segs_in:341 data_segs_out:396 send "
    "243kbps lastsnd:32 lastrcv:2912 lastack:40 pacing_rate 485kbps delivery_rate 1.21Mbps delivered:340 "
    "busy:2912ms sndbuf_limited:2492ms(85.6%) unacked:4 retrans:1/54 lost:1 sacked:1 rcv_space:14480 "
    "rcv_ssthresh:64088 notsent:64112 minrtt:120 snd_wnd:2937936 tcp-ulp-mptcp flags:Jec "
    "token:0000(id:1)/46e9f2f3(id:0) seq:d863d64790f3f307 sfseq:0 ssnoff:b9b0c88f maplen:0\n"
    "mptcp ESTAB 0      0      10.0.1.2:5201 10.0.1.1:48119\n\t skmem:(r0,rb131072,t0,tb1119232,f2816,w787712,o0,"
    "bl0,d0) subflows:1 subflows_max:2 remote_key token:46e9f2f3 write_seq:d97619f93ae5fe7f "
    "snd_una:d97619f93ad9fe2f rcv_nxt:d863d64790f3f307        \n")


def test_each_socket_gets_its_own_memory_and_window_fields() -> None:
    fast, slow, msk = parse_ss(SS)
    assert (fast["kind"], fast["local"], fast["peer"]) == ("tcp", "10.0.1.2:5201", "10.0.1.1:48119")
    assert (fast["tb"], fast["w"], fast["rb"], fast["r"]) == ("285696", "295056", "131072", "0")
    # rtt, not minrtt; ssthresh, not rcv_ssthresh
    assert (fast["rtt"], fast["cwnd"], fast["ssthresh"], fast["rcv_ssthresh"]) == ("14.627/1.038", "36", "34", "64088")
    assert fast["notsent"] == "225808" and "sndbuf_limited" not in fast
    assert (slow["peer"], slow["tb"], slow["cwnd"], slow["sndbuf_limited"]) == (
        "10.0.2.1:36873", "829440", "3", "2492ms(85.6%)")
    # the MPTCP socket's send buffer is tcp_wmem[0] + the subflows' (__mptcp_sync_sndbuf)
    assert msk["kind"] == "mptcp" and "cwnd" not in msk
    assert int(msk["tb"]) == 4096 + int(fast["tb"]) + int(slow["tb"])


def test_lines_without_socket_memory_are_left_out() -> None:
    assert parse_ss("") == []
    assert parse_ss("tcp   LISTEN 0      4096   0.0.0.0:5201 0.0.0.0:*\n") == []
