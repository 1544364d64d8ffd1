from nvidia.dali import absent

Pipeline = absent("pipeline.Pipeline")
