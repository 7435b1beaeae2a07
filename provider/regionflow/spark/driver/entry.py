"""spark-submit's application file: starts the region program with absolute imports."""
import sys

from regionflow.spark.driver.program import main

if __name__ == "__main__":
    sys.exit(main())
