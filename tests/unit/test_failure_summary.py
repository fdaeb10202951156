"""The one line a failed script leaves in its termination message (runtime.termination.failure_summary)."""

from __future__ import annotations

import io

from ftspark.runtime.termination import MAX_SUMMARY, StderrTail, failure_summary


class StreamingQueryException(Exception):  # noqa: N818 (PySpark's name)
    """Named as PySpark's: its text is the JVM's, with the executor's Python traceback inside."""


# The shape of a streaming query's failure whose UDF raised on an executor (PySpark 4.0).
UDF_FAILURE = """[STREAM_FAILED] Query [id = 1f0, runId = 9a2] terminated with exception: Job aborted due to \
stage failure: Task 0 in stage 3.0 failed 4 times, most recent failure: Lost task 0.3 in stage 3.0 (TID 9) \
(10.0.0.7 executor 1): org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/opt/app/job.py", line 12, in ratio
    return a / b
           ~~^~~
ZeroDivisionError: division by zero

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:581)
\tat org.apache.spark.sql.execution.python.PythonArrowOutput$$anon$1.read(PythonArrowOutput.scala:118)

Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2935)"""

JAVA_FAILURE = """[STREAM_FAILED] Query [id = 1f0, runId = 9a2] terminated with exception: Writing job aborted
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.writingJobAbortedError(QueryExecutionErrors.scala:767)
Caused by: org.apache.hadoop.fs.s3a.AWSBadRequestException: getFileStatus on s3a://b/x: 400
\tat org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:249)
Caused by: software.amazon.awssdk.services.s3.model.S3Exception: The bucket does not exist (Status Code: 404)
\tat software.amazon.awssdk.core.internal.http.CombinedResponseHandler.handleErrorResponse(X.java:125)"""


def test_a_plain_exception_is_its_type_and_message() -> None:
    assert failure_summary(ValueError("no such table: orders")) == "ValueError: no such table: orders"
    assert failure_summary(KeyError()) == "KeyError"


def test_a_udfs_own_error_is_named_not_the_last_line_of_the_jvms_text() -> None:
    summary = failure_summary(StreamingQueryException(UDF_FAILURE))
    assert summary.startswith("StreamingQueryException: [STREAM_FAILED] Query [id = 1f0, runId = 9a2]")
    assert summary.endswith("(caused by ZeroDivisionError: division by zero)")
    assert "DAGScheduler" not in summary and "Driver stacktrace" not in summary


def test_without_a_python_traceback_the_deepest_java_cause_is_named() -> None:
    summary = failure_summary(StreamingQueryException(JAVA_FAILURE))
    assert summary.endswith(
        "(caused by software.amazon.awssdk.services.s3.model.S3Exception: The bucket does not exist "
        "(Status Code: 404))"
    )


def test_the_summary_is_bounded() -> None:
    summary = failure_summary(RuntimeError("x" * 10_000))
    assert len(summary) == MAX_SUMMARY and summary.endswith("…")


def test_an_exit_code_comes_with_the_scripts_last_words_on_stderr_which_still_reach_stderr() -> None:
    stream = io.StringIO()
    tail = StderrTail(stream)
    print("x" * 5000, file=tail)
    print("reading orders\n\nno such table: orders", file=tail)
    assert tail.exit_summary(2) == (
        "the script exited with 2; its last words on stderr: reading orders | no such table: orders"
    )
    assert stream.getvalue().endswith("reading orders\n\nno such table: orders\n"), "passed through"
    assert StderrTail(io.StringIO()).exit_summary(3) == "the script exited with 3"
    assert len(StderrTail(io.StringIO()).exit_summary("y" * 5000)) == MAX_SUMMARY
