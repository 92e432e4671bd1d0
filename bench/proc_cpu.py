"""CPU seconds of a process's threads, from /proc/<pid>/task/*/stat (Linux), for the bench
scripts (`import proc_cpu` from a script in bench/: Python puts the script's directory first
on the path)."""

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid):
    """{thread name: {tid: CPU seconds (user + system)}} of the live threads of `pid`."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # comm is in parentheses and may hold spaces; the fields after it are fixed.
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
        out.setdefault(name, {})[tid] = cpu
    return out


def diff_cpu(before, after):
    """CPU seconds per thread name spent between two `thread_cpu` samples (threads alive at
    the end; a thread born in between counts from zero)."""
    out = {}
    for name, tids in after.items():
        for tid, cpu in tids.items():
            out[name] = out.get(name, 0.0) + cpu - before.get(name, {}).get(tid, 0.0)
    return out
