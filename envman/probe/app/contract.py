"""What the probe and envman on the host agree on: where the probe lives in an image, the
document's version, the check names and statuses, and the exit statuses.

The host imports this module too (through ``envman.probe``), so it holds constants only and
runs on Python 3.6.
"""

#: envman's own directory inside every image it builds.
IMAGE_DIR = "/opt/envman"
#: The probe in an image (a zipapp: ``python /opt/envman/probe.pyz``) and the stack it checks.
PROBE_FILE = "probe.pyz"
STACK_FILE = "stack.json"
IN_IMAGE_PROBE = IMAGE_DIR + "/" + PROBE_FILE
IN_IMAGE_STACK = IMAGE_DIR + "/" + STACK_FILE
DEFAULT_EXPECT = IN_IMAGE_STACK

PROBE_VERSION = 1
CHECK_ORDER = ("driver", "runtime", "kernel", "framework", "bench")
FRAMEWORKS = ("torch", "tensorflow", "jax", "onnxruntime")

PASS, FAIL, SKIP = "pass", "fail", "skip"
STATUSES = (PASS, FAIL, SKIP)
OVERALL_PASS, OVERALL_CPU_ONLY, OVERALL_FAIL = "pass", "cpu-only", "fail"
OVERALL = (OVERALL_PASS, OVERALL_CPU_ONLY, OVERALL_FAIL)
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
