"""What every part of mx_sparse stands on, private: the registration of the compiled ops, their
fake kernels and the accelerator orchestration (op_registration.py), the C++ contract's Python
face (contract.py), and the old import paths (old_paths.py)."""
