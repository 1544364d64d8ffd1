from nvidia.dali import absent

DALIClassificationIterator = absent("plugin.mxnet.DALIClassificationIterator")
