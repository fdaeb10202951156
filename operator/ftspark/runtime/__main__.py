import os
import sys

from ftspark.runtime.driver import main

code = main(sys.argv[1:])
sys.stdout.flush()
sys.stderr.flush()
# Not sys.exit: py4j and Spark threads must not keep a finished driver alive.
os._exit(code)
