"""Conversions between the compiler's IRs: linalg -> index notation (`linalg_to_index`) and
index notation -> sam (`index_to_sam`). The analyses between them live in `fuseflow.analysis`."""
