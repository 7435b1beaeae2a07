"""What attempts write and read: partitions, sinks, file systems, descriptors, the unit task file."""
