"""A 4-argument kernel that does (almost) nothing, for the launch-overhead benchmark."""
import tlxc
import tlxc.language as tl


@tlxc.kernel
def empty4(a_ptr, b_ptr, c_ptr, n):
    pid = tl.program_id(0)
    if pid >= n:
        tl.store(a_ptr + pid, tl.load(b_ptr + pid) + tl.load(c_ptr + pid))
