# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted `bash -c` bodies get their values as arguments
# Shared helpers for scripts/services/*.sh. Source it; do not run it.
#
# Environment knobs (all optional):
#   OUTBOXER_SERVICES_DIR  cache/state dir for Kafka and ElasticMQ (default ~/.cache/outboxer-services)
#   OUTBOXER_APT_STAMP     file marking "apt-get update already ran in this run" (up.sh sets it)

if [[ -n "${_OUTBOXER_SERVICES_LIB:-}" ]]; then return 0; fi
_OUTBOXER_SERVICES_LIB=1

OUTBOXER_SERVICES_DIR="${OUTBOXER_SERVICES_DIR:-${HOME:-/root}/.cache/outboxer-services}"

# ---------------------------------------------------------------- logging (stderr)
_svc_name="${SVC_NAME:-$(basename "${0%.sh}")}"
log()  { printf '[%s %s] %s\n' "$(date +%H:%M:%S)" "$_svc_name" "$*" >&2; }
warn() { printf '[%s %s] WARNING: %s\n' "$(date +%H:%M:%S)" "$_svc_name" "$*" >&2; }
die()  { printf '[%s %s] ERROR: %s\n' "$(date +%H:%M:%S)" "$_svc_name" "$*" >&2; exit 1; }

# ---------------------------------------------------------------- small predicates
have() { command -v "$1" >/dev/null 2>&1; }

# port_open host port: true when a TCP connect succeeds within 1 s.
port_open() {
  timeout 1 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" >/dev/null 2>&1
}

# wait_for_port host port timeout_seconds name
wait_for_port() {
  local host=$1 port=$2 timeout_s=$3 name=${4:-$1:$2}
  local deadline=$((SECONDS + timeout_s))
  until port_open "$host" "$port"; do
    if ((SECONDS >= deadline)); then
      log "$name did not answer on $host:$port within ${timeout_s}s"
      return 1
    fi
    sleep 0.5
  done
  return 0
}

# wait_until timeout_seconds description command...: retry a command until it succeeds.
wait_until() {
  local timeout_s=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout_s))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "$what: not ready within ${timeout_s}s"
      return 1
    fi
    sleep 1
  done
  return 0
}

# ---------------------------------------------------------------- privileges
# as_root cmd...: run as root (directly when we are root, else through sudo).
as_root() {
  if ((EUID == 0)); then "$@"
  elif have sudo; then sudo "$@"
  else die "need root (or sudo) to run: $*"
  fi
}

# as_user user cmd...: run as another system user (e.g. postgres).
as_user() {
  local user=$1
  shift
  if [[ "$(id -un)" == "$user" ]]; then "$@"
  elif ((EUID == 0)) && have runuser; then runuser -u "$user" -- "$@"
  elif have sudo; then sudo -u "$user" -- "$@"
  else die "cannot switch to user $user to run: $*"
  fi
}

# ---------------------------------------------------------------- apt
# apt_install pkgs...: apt-get update once per run, then install.
apt_install() {
  have apt-get || die "apt-get not found: install $* by hand"
  local stamp="${OUTBOXER_APT_STAMP:-}"
  if [[ -z "$stamp" ]]; then
    stamp="$(mktemp "${TMPDIR:-/tmp}/outboxer-apt.XXXXXX")"
    export OUTBOXER_APT_STAMP="$stamp"
  fi
  # apt's and dpkg's chatter goes to a log file, shown only when a step fails.
  mkdir -p "$OUTBOXER_SERVICES_DIR"
  local aptlog="$OUTBOXER_SERVICES_DIR/apt.log"
  if [[ "$(cat "$stamp" 2>/dev/null)" != updated ]]; then
    log "apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update >>"$aptlog" 2>&1 ||
      { tail -n 30 "$aptlog" >&2; die "apt-get update failed (log: $aptlog)"; }
    echo updated >"$stamp"
  fi
  log "apt-get install -y $* (log: $aptlog)"
  local t0=$SECONDS
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >>"$aptlog" 2>&1 ||
    { tail -n 30 "$aptlog" >&2; die "apt-get install $* failed (log: $aptlog)"; }
  log "installed $* ($((SECONDS - t0))s)"
}

# ---------------------------------------------------------------- Java / Maven
# java_major path-to-java: prints the major version (8, 11, 17, ...).
java_major() {
  "$1" -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit }'
}

# ensure_java_maven: sets JAVA (a java >= 17) and makes sure mvn exists.
ensure_java_maven() {
  local candidates=() c
  [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]] && candidates+=("${JAVA_HOME}/bin/java")
  have java && candidates+=("$(command -v java)")
  JAVA=""
  for c in "${candidates[@]}" /usr/lib/jvm/java-17-openjdk-*/bin/java; do
    [[ -x "$c" ]] || continue
    local major
    major="$(java_major "$c" 2>/dev/null || true)"
    if [[ "$major" =~ ^[0-9]+$ ]] && ((major >= 17)); then JAVA="$c"; break; fi
  done
  if [[ -z "$JAVA" ]] || ! have mvn; then
    local pkgs=()
    [[ -z "$JAVA" ]] && pkgs+=(openjdk-17-jre-headless)
    have mvn || pkgs+=(maven)
    apt_install "${pkgs[@]}"
    if [[ -z "$JAVA" ]]; then
      for c in /usr/lib/jvm/java-17-openjdk-*/bin/java; do [[ -x "$c" ]] && JAVA="$c" && break; done
    fi
  fi
  [[ -n "$JAVA" ]] || die "no Java >= 17 found"
  have mvn || die "mvn not found after install"
  export JAVA
}

# mvn_fetch_libs dir 'group:artifact:version'...: writes dir/pom.xml depending on the given
# artifacts and copies their runtime classpath (the artifacts' own jars included) to dir/libs.
# Skips everything when dir/libs/.complete matches the requested artifact list.
mvn_fetch_libs() {
  local dir=$1
  shift
  local want="$*"
  if [[ -f "$dir/libs/.complete" && "$(cat "$dir/libs/.complete")" == "$want" ]]; then
    return 0
  fi
  ensure_java_maven
  mkdir -p "$dir"
  local deps="" coord g a v
  for coord in "$@"; do
    IFS=: read -r g a v <<<"$coord"
    deps+="    <dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>"$'\n'
  done
  cat >"$dir/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by outboxer scripts/services: only used to download a runtime classpath. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>outboxer.services</groupId>
  <artifactId>$(basename "$dir")-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
$deps  </dependencies>
</project>
EOF
  log "downloading jars from Maven Central: $want"
  rm -rf "$dir/libs.tmp"
  local t0=$SECONDS
  # (Maven 3.8 prints stray colour escapes even in batch mode: strip them.)
  (cd "$dir" && mvn -B -q -Dstyle.color=never -f pom.xml \
      org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$dir/libs.tmp" 2>&1) |
    sed -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' >&2 ||
    die "mvn dependency:copy-dependencies failed (see output above)"
  rm -rf "$dir/libs"
  mv "$dir/libs.tmp" "$dir/libs"
  echo "$want" >"$dir/libs/.complete"
  log "jars ready in $dir/libs ($(find "$dir/libs" -name '*.jar' | wc -l) jars, $((SECONDS - t0))s)"
}

# ---------------------------------------------------------------- background JVM processes
# pid_alive pidfile [pattern]: true when the pid file names a running process whose command line
# contains pattern (so a pid reused after a reboot is not taken for our server).
pid_alive() {
  local pid
  [[ -f "$1" ]] || return 1
  pid="$(cat "$1" 2>/dev/null)"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  [[ -z "${2:-}" ]] || tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$2"
}

# lock_dir dir: hold an exclusive lock on dir/.lock until this script exits (serialises two
# concurrent starts of the same service).
lock_dir() {
  mkdir -p "$1"
  exec 9>"$1/.lock"
  if have flock && ! flock -n 9; then
    log "another start is in progress ($1/.lock); waiting for it"
    flock 9
  fi
}

# stop_pidfile pidfile name pattern: TERM, wait up to 30 s, then KILL; only a process whose command
# line contains pattern.
stop_pidfile() {
  local pidfile=$1 name=$2 pattern=$3 pid i
  if ! pid_alive "$pidfile" "$pattern"; then
    log "$name is not running (no live pid in $pidfile)"
    rm -f "$pidfile"
    return 0
  fi
  pid="$(cat "$pidfile")"
  log "stopping $name (pid $pid)"
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 60; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    warn "$name did not stop within 30s, killing"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}
