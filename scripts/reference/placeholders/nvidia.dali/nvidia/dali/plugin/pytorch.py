from nvidia.dali import absent

DALIClassificationIterator = absent("plugin.pytorch.DALIClassificationIterator")
