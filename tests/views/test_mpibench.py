"""views/mpibench.py: osu_latency's small-message latency, where the processes ran, and Open MPI's BTL list. Pasted
text, hand-written from the OSU micro-benchmarks' strings (c/util/osu_util_mpi.c print_header(), "# OSU MPI%s
Latency Test v5.6.1") and the launchers' command lines (man srun, salloc, sbatch; mpirun --host)."""
from __future__ import annotations

import pytest

from rdmadoctor.logparse.streams import parse_text
from rdmadoctor.views import features, mpibench

_LATENCY = ("# OSU MPI Latency Test v5.6.1\n# Size          Latency (us)\n"
            "0                      14.78\n1                      15.76\n2                      15.70\n"
            "4                      15.05\n8                      15.02\n16                     15.04\n"
            "32                     15.01\n64                     15.05\n128                    15.02\n"
            "4096                   17.64\n")


def _mpirun_run(text: str):
    parsed = parse_text(text)
    ctx = {"runs": parsed.runs, "sources": parsed.sources}
    (run,) = [r for r in parsed.runs if r.producer == "ompi"]
    return run, ctx


def test_the_small_message_latency_is_the_median_of_the_rows_up_to_64_bytes_at_the_banner():
    run, ctx = _mpirun_run("mpirun --mca btl self,vader,tcp ./osu_latency\n" + _LATENCY)
    value = features.feature(run, "osu_latency_small_us", ctx)
    assert value == pytest.approx(15.04, abs=0.01) and value.line == 2
    assert str(value) == "15.04"


@pytest.mark.parametrize("banner,header", [
    ("# OSU MPI-CUDA Latency Test v5.3.2", "# Size          Latency (us)"),        # GPU buffers
    ("# OSU MPI Bandwidth Test v5.6.1", "# Size      Bandwidth (MB/s)"),
    ("# OSU MPI Allreduce Latency Test v5.7", "# Size       Avg Latency(us)"),
])
def test_no_small_message_latency_for_other_benchmarks(banner, header):
    rows = "".join(f"{size:<10d}{15.0:>18.2f}\n" for size in (1, 2, 4, 8, 16, 32, 64))
    run, ctx = _mpirun_run(f"mpirun -np 2 ./bench\n{banner}\n{header}\n{rows}")
    assert features.feature(run, "osu_latency_small_us", ctx) is None


def test_two_small_rows_are_no_table_and_a_later_benchmark_does_not_add_rows():
    run, ctx = _mpirun_run("mpirun -np 2 ./osu_latency\n# OSU MPI Latency Test v5.6.1\n"
                           "# Size          Latency (us)\n0                       0.31\n1                       0.32\n")
    assert features.feature(run, "osu_latency_small_us", ctx) is None
    run, ctx = _mpirun_run("mpirun -np 2 ./osu_latency\n" + _LATENCY.replace("14.78", "0.30") +
                           "# OSU MPI Bandwidth Test v5.6.1\n# Size      Bandwidth (MB/s)\n"
                           "1                       0.61\n2                       1.23\n")
    # (with the bandwidth rows the median would be 15.03)
    assert features.feature(run, "osu_latency_small_us", ctx) == pytest.approx(15.045, abs=0.006)


@pytest.mark.parametrize("args,count", [
    (" -N 1 -n 2 --pty /bin/bash", "1"), (" -N1 -n2 ./osu_latency", "1"), (" --nodes=1 ./a", "1"),
    (" --nodes 2 ./a", "2"), (" -n 2 ./osu_latency -N 4", None), (" -N 1-2 ./a", "1-2"), (" -n 2 'x", None),
])
def test_slurm_node_counts(args, count):
    assert mpibench.slurm_nodes(args) == count


@pytest.mark.parametrize("launch,one", [
    ("srun -N 1 -n 2 --pty /bin/bash\nmpirun ./osu_latency\n", True),
    ("$ salloc --nodes=1 --ntasks=2\nmpirun ./osu_latency\n", True),
    ("#SBATCH -N 1\n#SBATCH --ntasks=2\nmpirun ./osu_latency\n", True),
    ("mpirun -np 2 --host node1,node1 ./osu_latency\n", True),
    ("mpirun -np 2 -H node1:2 ./osu_latency\n", True),
    ("mpirun -np 2 --host localhost,127.0.0.1 ./osu_latency\n", True),
    ("srun -N 2 -n 2 --pty /bin/bash\nmpirun ./osu_latency\n", False),
    ("srun -N 1 -n 2 --pty /bin/bash\n$ salloc -N 2\nmpirun ./osu_latency\n", False),   # the paste disagrees
    ("srun -N 1-2 -n 2 --pty /bin/bash\nmpirun ./osu_latency\n", False),
    ("mpirun -np 2 --host node1,node2 ./osu_latency\n", False),
    ("srun -N 1 --pty /bin/bash\nmpirun -np 2 --hostfile hosts ./osu_latency\n", False),
    ("mpirun -np 2 ./osu_latency\n", False),
])
def test_single_node_launch(launch, one):
    run, ctx = _mpirun_run(launch + _LATENCY)
    found = features.feature(run, "single_node_launch", ctx)
    assert (found is not None) == one
    if one:
        assert found["quote"] and found["line"] >= 1


def test_an_mpirun_host_list_decides_over_the_allocation():
    run, ctx = _mpirun_run("srun -N 2 -n 2 --pty /bin/bash\nmpirun -np 2 --host n1,n1 ./osu_latency\n" + _LATENCY)
    assert features.feature(run, "single_node_launch", ctx)["how"] == "mpirun --host"


@pytest.mark.parametrize("btl,listed", [
    ("self,vader,tcp", True), ("sm,self", True), ("self,tcp", False), ("^openib", False), ("^vader", False),
])
def test_the_btl_list_names_shared_memory(btl, listed):
    run, ctx = _mpirun_run(f"mpirun --mca btl {btl} ./osu_latency\n" + _LATENCY)
    found = features.feature(run, "ompi_btl_shm_listed", ctx)
    assert (found is not None) == listed
    if listed:
        assert found["btl"] == btl and found["line"] == 1


def _osu_rows(sizes) -> str:
    """Rows as osu_latency prints them: "%-*d%*.*f" with 10 and FIELD_WIDTH 20 (c/util/osu_util_mpi.c)."""
    return "".join(f"{size:<10d}{1.5 + size / 1e4:>20.2f}\n" for size in sizes)


_UP_TO_64K = [0] + [1 << i for i in range(17)]          # 0, 1, 2 ... 65536
_UP_TO_4M = [0] + [1 << i for i in range(23)]           # ... 4194304


def test_an_osu_table_that_stops_before_its_largest_size_is_unfinished_at_its_last_row():
    run, ctx = _mpirun_run("mpirun -np 2 --host a,b ./osu_latency\n# OSU MPI Latency Test v5.6.1\n"
                           "# Size          Latency (us)\n" + _osu_rows(_UP_TO_64K))
    found = features.feature(run, "osu_table_unfinished", ctx)
    assert found["size"] == 65536 and found["largest"] == 1 << 22 and found["line"] == 21
    assert found["benchmark"] == "MPI Latency Test" and found["quote"].startswith("65536")


@pytest.mark.parametrize("command, banner, sizes", [
    ("mpirun -np 2 ./osu_latency", "# OSU MPI Latency Test v5.6.1", _UP_TO_4M),             # to 4 MiB: finished
    ("mpirun -np 2 ./osu_latency -m 65536", "# OSU MPI Latency Test v5.6.1", _UP_TO_64K),   # -m MAX
    ("mpirun -np 2 ./osu_bw -m 1:65536", "# OSU MPI Bandwidth Test v5.6.1", _UP_TO_64K),   # -m MIN:MAX
    ("mpirun -np 2 ./osu_bw --message-size=65536", "# OSU MPI Bandwidth Test v7.4", _UP_TO_64K),
    ("mpirun -np 8 ./osu_allreduce", "# OSU MPI Allreduce Latency Test v5.7", _UP_TO_64K),  # a collective
    ("mpirun -np 2 ./osu_fop_latency", "# OSU MPI_Fetch_and_op latency Test v5.6.1", [8]),  # one size
])
def test_a_finished_table_or_one_whose_largest_size_is_not_known_is_not_unfinished(command, banner, sizes):
    run, ctx = _mpirun_run(f"{command}\n{banner}\n# Size          Latency (us)\n" + _osu_rows(sizes))
    assert features.feature(run, "osu_table_unfinished", ctx) is None


def test_a_table_the_paste_goes_on_after_had_its_rows_left_out():
    text = ("mpirun -np 2 ./osu_latency\n# OSU MPI Latency Test v5.6.1\n# Size          Latency (us)\n"
            + _osu_rows(_UP_TO_64K))
    run, ctx = _mpirun_run(text + "# OSU MPI Bandwidth Test v5.6.1\n# Size      Bandwidth (MB/s)\n"
                           + _osu_rows(_UP_TO_4M))
    assert features.feature(run, "osu_table_unfinished", ctx) is None
    run, ctx = _mpirun_run(text + "<hang>\n")
    assert features.feature(run, "osu_table_unfinished", ctx)["size"] == 65536
