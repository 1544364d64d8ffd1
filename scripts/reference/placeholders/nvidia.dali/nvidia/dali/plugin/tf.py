from nvidia.dali import module_getattr

__getattr__ = module_getattr("plugin.tf.")
