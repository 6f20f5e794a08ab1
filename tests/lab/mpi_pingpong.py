#!/usr/bin/python3
"""A two-rank MPI ping-pong for the lab's Open MPI recordings (mpi4py; runs inside the guests).

    mpirun -np 2 --host h1,h2 --mca pml ucx python3 /lab/src/tests/lab/mpi_pingpong.py [ITERS] [SIZES]

Rank 0 sends a buffer to rank 1, which sends it back, ITERS times per size (default 100; sizes in bytes,
comma-separated, default 8,4096,65536), and prints one row per size: size, iterations, average round
trip in microseconds, and MB/s. Each rank first says where it runs, so the log shows which host got
which rank. Debian ships no OSU or IMB benchmarks, so the lab carries this instead.
"""
import socket
import sys
import time

from mpi4py import MPI


def main():
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    sizes = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "8,4096,65536").split(",")]
    # Open MPI 5's version string ends in its C terminator (a NUL byte), which would make the log binary
    version = MPI.Get_library_version().replace("\x00", "").splitlines()[0]
    print("# rank %d of %d on %s (%s)" % (rank, size, socket.gethostname(), version), flush=True)
    if size != 2:
        if rank == 0:
            print("mpi_pingpong: needs exactly 2 ranks, got %d" % size, flush=True)
        return 2
    comm.Barrier()
    if rank == 0:
        print("# %10s %12s %14s %10s" % ("bytes", "iterations", "t_avg[usec]", "MB/s"), flush=True)
    for nbytes in sizes:
        buf = bytearray(nbytes)
        comm.Barrier()
        started = time.perf_counter()
        for _ in range(iterations):
            if rank == 0:
                comm.Send([buf, MPI.BYTE], dest=1, tag=1)
                comm.Recv([buf, MPI.BYTE], source=1, tag=2)
            else:
                comm.Recv([buf, MPI.BYTE], source=0, tag=1)
                comm.Send([buf, MPI.BYTE], dest=0, tag=2)
        elapsed = time.perf_counter() - started
        if rank == 0:
            round_trip = elapsed / iterations
            print("  %10d %12d %14.2f %10.2f" % (nbytes, iterations, round_trip * 1e6,
                                                  2 * nbytes / round_trip / 1e6), flush=True)
    comm.Barrier()
    if rank == 0:
        print("# done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
