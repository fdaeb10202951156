#!/usr/bin/env sh
# One Spark line's pins from spark-lines.txt (the default line when LINE is empty or absent).
#   tools/spark_line.sh pyspark [LINE]   the pyspark version
#   tools/spark_line.sh maven [LINE]     Maven's -D flags for jvm/s3a-deps and jvm/local-recovery
#   tools/spark_line.sh jars-dir [LINE]  the S3A cache directory's name (ftspark.runtime.config.DEV_JARS_DIR_NAME)
#   tools/spark_line.sh lines            every line, the default first
# POSIX sh and awk: the image build runs it on a bare Debian. SPARK_LINES overrides the file's path.
set -eu
lines="${SPARK_LINES:-$(dirname "$0")/../spark-lines.txt}"
what="${1:?usage: spark_line.sh pyspark|maven|jars-dir|lines [LINE]}"
line="${2:-}"
if [ "$what" = lines ]; then
  awk '!/^#/ && NF { print $1 }' "$lines"
  exit
fi
row="$(awk -v line="$line" '!/^#/ && NF { if (line == "" || $1 == line) { print; exit } }' "$lines")"
[ -n "$row" ] || { echo "spark_line.sh: no Spark line '$line' in $lines" >&2; exit 2; }
set -- $row
case "$what" in
  pyspark) echo "$2" ;;
  maven)
    flags="-Dhadoop.version=$3 -Daws.sdk.version=$4 -Dslf4j.version=$5"
    [ "$6" = "-" ] || flags="$flags -Danalytics.version=$6"
    echo "$flags"
    ;;
  jars-dir) echo "hadoop-aws-$3-awssdk-$4" ;;
  *) echo "spark_line.sh: unknown field '$what' (pyspark, maven, jars-dir, lines)" >&2; exit 2 ;;
esac
