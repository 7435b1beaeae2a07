"""Writing and reading small local files in tests of the partition store and the sinks."""
import os


def write(path, text="x"):
    """`text` at `path`, its folders made first."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def read(path):
    with open(path) as handle:
        return handle.read()
