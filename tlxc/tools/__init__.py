"""Host-side tools under the names Triton code imports them by (``tlxc.tools.tensor_descriptor``)."""
