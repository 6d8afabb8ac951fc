#!/usr/bin/env bash
# prepare.sh: make sure everything a real Flink cluster needs is on this machine, then print
# where it is. Runs nothing; starting and stopping the cluster is the Rust harness's job
# (tests/src/flink_harness.rs), so that a failing test still stops what it started.
#
# Steps, each skipped when already done:
#   1. Java 17 JDK (java + javac, keytool) from Debian's openjdk-17-jdk-headless when missing;
#      openssl (the TLS harness turns a keytool keystore into the agent's PEM key).
#   2. apache-flink + apache-flink-libraries (--no-deps) from PyPI into the cache (see below).
#      They hold a complete Flink binary distribution (bin/, conf/, lib/); nothing Python is used.
#   3. The load job (job/src/**/*.java and the version's job/sink-*/) compiled with javac into
#      a jar keyed by Flink version and source hash.
#
# Output on stdout, one KEY=VALUE per line: FLINK_HOME, FLINK_VERSION, LOAD_JOB_JAR, JAVA_VERSION,
# CACHE_DIR.
# Progress and errors go to stderr. Exit code 0 only when every step succeeded.
#
# Settings (environment):
#   FLINK_VERSION        PyPI version of both packages                  [2.3.0]
#   FLINK_HARNESS_CACHE  install cache; reused across runs              [<repo>/.tmp/flink]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="${FLINK_VERSION:-2.3.0}"
CACHE="${FLINK_HARNESS_CACHE:-$HERE/../../.tmp/flink}"
T0=$(date +%s)

log() { echo "[flink-prepare +$(($(date +%s) - T0))s] $*" >&2; }
die() { echo "[flink-prepare] ERROR: $*" >&2; exit 1; }

case "$VERSION" in
  *[!0-9.]* | "") die "FLINK_VERSION must look like 2.3.0, got '$VERSION'" ;;
esac

mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"
# Tests in one binary run in parallel and may all call this script: one at a time.
exec 9>"$CACHE/.prepare.lock"
flock -w 600 9 || die "could not lock $CACHE/.prepare.lock within 600 s"

# ------------------------------------------------------------------ 1. Java
APT_UPDATED=0
apt_install() {
  command -v apt-get >/dev/null || die "$* needed, and apt-get is not available to install it"
  if [ "$APT_UPDATED" = 0 ]; then
    log "apt-get update"
    apt-get update -qq >&2 || die "apt-get update failed (needed to install $*)"
    APT_UPDATED=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 \
    || die "apt-get install $* failed"
}

if ! command -v java >/dev/null || ! command -v javac >/dev/null; then
  apt_install openjdk-17-jdk-headless
fi
command -v javac >/dev/null || die "javac still missing after installing openjdk-17-jdk-headless"
JAVA_VERSION=$(java -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -1)
JAVA_MAJOR=${JAVA_VERSION%%.*}
[ "${JAVA_MAJOR:-0}" -ge 11 ] 2>/dev/null \
  || die "Flink 2.x needs Java 11 or newer (17 recommended); found '${JAVA_VERSION:-none}'"
command -v hostname >/dev/null || apt_install hostname # Flink's bin/ scripts call it
command -v python3 >/dev/null || apt_install python3
command -v openssl >/dev/null || apt_install openssl
python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip

# ------------------------------------------------------------------ 2. Flink from PyPI
# One pip command for both packages, so that their pyflink/ folders merge in the target.
# - apache-flink (bin/*.sh, conf/) is a CPython wheel. The platform/ABI pins select one binary
#   wheel whatever the local Python is; only its scripts and conf are used, so any CPython tag
#   serves. 3.11 first; 1.18.1 has no cp311 wheel and stops at cp310, so older tags are tried
#   in turn. --only-binary keeps pip from ever building it from source.
# - apache-flink-libraries (lib/, opt/, plugins/) is a pure wheel from 2.2.0 on; up to 2.1.x
#   PyPI has only a source distribution, which holds the same jars under deps/ and which pip
#   turns into a wheel itself (setup.py maps deps/lib to pyflink/lib etc.; ~40 s).
# --no-deps: PyFlink's Python dependencies (beam, pandas, pyarrow, ...) are not needed.
DIST="$CACHE/dist-$VERSION"
FLINK_HOME="$DIST/pyflink"
if [ ! -f "$DIST/.complete" ]; then
  rm -rf "$DIST" "$DIST.partial" "$DIST.probe"
  # Which CPython tag has an apache-flink wheel: a download of that wheel alone (a few MB).
  py=""
  for candidate in 3.11 3.10 3.9 3.8; do
    if python3 -m pip download -q --disable-pip-version-check --no-deps --dest "$DIST.probe" \
      --only-binary=:all: --platform "manylinux2014_$(uname -m)" --python-version "$candidate" \
      --implementation cp --abi "cp${candidate/./}" "apache-flink==$VERSION" \
      2>"$CACHE/.pip-$VERSION.err" >&2; then
      py=$candidate
      break
    fi
    # Only a missing wheel for this Python tag is worth another try; anything else is final.
    grep -q "No matching distribution found for apache-flink==$VERSION" "$CACHE/.pip-$VERSION.err" \
      || break
  done
  rm -rf "$DIST.probe"
  if [ -z "$py" ]; then
    cat "$CACHE/.pip-$VERSION.err" >&2
    die "pip found no apache-flink==$VERSION wheel on PyPI for CPython 3.8 to 3.11"
  fi
  log "pip install apache-flink==$VERSION (cp${py/./} wheel) apache-flink-libraries==$VERSION --no-deps"
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$DIST.partial" \
    --only-binary apache-flink --platform "manylinux2014_$(uname -m)" --python-version "$py" \
    --implementation cp --abi "cp${py/./}" \
    "apache-flink-libraries==$VERSION" "apache-flink==$VERSION" 2>"$CACHE/.pip-$VERSION.err" >&2 || {
    cat "$CACHE/.pip-$VERSION.err" >&2
    die "pip could not install apache-flink==$VERSION and apache-flink-libraries==$VERSION from PyPI"
  }
  rm -f "$CACHE/.pip-$VERSION.err"
  [ -f "$DIST.partial/pyflink/bin/jobmanager.sh" ] \
    || die "the packages for $VERSION hold no bin/jobmanager.sh; this version cannot run a cluster"
  ls "$DIST.partial"/pyflink/lib/flink-dist*.jar >/dev/null 2>&1 \
    || die "the packages for $VERSION hold no lib/flink-dist*.jar; this version cannot run a cluster"
  chmod +x "$DIST.partial"/pyflink/bin/*.sh "$DIST.partial/pyflink/bin/flink"
  touch "$DIST.partial/.complete"
  mv "$DIST.partial" "$DIST"
  log "installed into $DIST ($(du -sm "$DIST" | cut -f1) MB, apache-flink wheel cp${py/./})"
fi
ls "$FLINK_HOME"/lib/flink-dist*.jar >/dev/null 2>&1 || die "no lib/flink-dist*.jar under $FLINK_HOME"

# ------------------------------------------------------------------ 3. load job
# job/src/ compiles against every version; the Sink API changed at 1.19, so one class comes
# from job/sink-1.18/ or job/sink-1.19/.
IFS=. read -r MAJOR MINOR _ <<<"$VERSION"
if [ "$MAJOR" -eq 1 ] && [ "$MINOR" -lt 19 ]; then SINK_API=sink-1.18; else SINK_API=sink-1.19; fi
mapfile -t SRCS < <(find "$HERE/job/src" "$HERE/job/$SINK_API" -name '*.java' | sort)
[ "${#SRCS[@]}" -gt 0 ] || die "no Java sources under $HERE/job/src"
SRC_HASH=$(cat "${SRCS[@]}" | sha256sum | cut -c1-16)
JAR="$CACHE/jobs/loadjob-$VERSION-$SRC_HASH.jar"
if [ ! -f "$JAR" ]; then
  log "compiling the load job against Flink $VERSION"
  BUILD="$CACHE/jobs/build-$VERSION-$SRC_HASH"
  rm -rf "$BUILD" && mkdir -p "$BUILD/classes"
  javac -nowarn -encoding UTF-8 -d "$BUILD/classes" -cp "$FLINK_HOME/lib/*" "${SRCS[@]}" >&2 \
    || die "javac failed for the load job"
  jar cfe "$BUILD/job.jar" loadjob.LoadJob -C "$BUILD/classes" . >&2 || die "jar failed"
  mv "$BUILD/job.jar" "$JAR"
  rm -rf "$BUILD"
fi

log "ready (Flink $VERSION, Java $JAVA_VERSION)"
echo "FLINK_HOME=$FLINK_HOME"
echo "FLINK_VERSION=$VERSION"
echo "LOAD_JOB_JAR=$JAR"
echo "JAVA_VERSION=$JAVA_VERSION"
echo "CACHE_DIR=$CACHE"
