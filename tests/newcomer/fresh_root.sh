#!/usr/bin/env bash
# A newcomer's check on a fresh Debian: does `./lab` work on a machine that has only git?
#
#   sudo tests/newcomer/fresh_root.sh [options] trixie|bookworm
#
#   --source PATH|URL  the repository to clone (default: the repository this script is in)
#   --branch NAME      the branch to clone (default: the source's current branch)
#   --dir DIR          where the roots go (default: /var/tmp/lab-fresh-root/SUITE)
#   --port N           the dashboard's port in the root (default: 8555)
#   --reuse-root       keep the last run's root instead of a fresh copy of the base system
#                      (its apt-installed Python, JDK and Maven stay: ./lab installs none, so
#                      that is not checked; the clone, .venv and jars are made again)
#   --jdk PACKAGE      apt-get install PACKAGE in the root before ./lab runs, a machine that
#                      already has that JDK (e.g. openjdk-25-jdk-headless on Debian 13):
#                      ./lab must take it as it is
#
# Runs as root on a Debian or Ubuntu host with network access. What it does:
#   1. debootstrap --variant=minbase SUITE into DIR/base (built once, then reused), with the
#      host's apt mirror; adds the suite's -updates and -security sources, the host's extra
#      CA certificates (/usr/local/share/ca-certificates: an inspecting HTTPS proxy) and only
#      what a newcomer needs to clone: ca-certificates, git, and curl for this check.
#      No Python, no Java: `./lab` must install those itself, which is what is checked.
#   2. copies DIR/base to a fresh DIR/root, mounts /proc, /sys, /dev, /dev/pts and a fresh
#      /dev/shm in it (unmounted on every exit), and clones the repository into /root/lab.
#   3. in the root, as root: `./lab setup`, then
#      `./lab engine run scenarios/ack-loss.yaml --json`: PASS when at-least-once shows 1 or
#      more duplicates and exactly-once shows 0 duplicates and 0 lost;
#      no process of the root may be left once it returns.
#   4. `LAB_PORT=PORT ./lab dashboard` in the background: PASS when
#      http://127.0.0.1:PORT/_stcore/health answers ok, the page itself is served, and a run of
#      the page asked for over its websocket as a browser tab does (open_page.py) finishes
#      with no exception shown; that also starts the dashboard's cluster. Then its process
#      group gets SIGINT (Ctrl+C): PASS when no process of the root is left 15 s later
#      (any left, Kafka JVMs included, are ended and counted).
#   5. prints a summary (distribution, the Python and Java ./lab chose, each step's time,
#      PASS/FAIL per check) and exits 1 when any check failed. Logs: DIR/logs/.
#
# The root shares the host's network: the embedded cluster takes free ephemeral ports, and
# the dashboard only PORT. The roots stay in DIR (a few GB each; rm -rf DIR removes them).
set -uo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SOURCE="$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || true)"
BRANCH=""
DIR=""
PORT=8555
REUSE=0
JDK=""
SUITE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --source) SOURCE="$2"; shift 2 ;;
    --branch) BRANCH="$2"; shift 2 ;;
    --dir) DIR="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --reuse-root) REUSE=1; shift ;;
    --jdk) JDK="$2"; shift 2 ;;
    trixie|bookworm) SUITE="$1"; shift ;;
    *) usage ;;
  esac
done
[ -n "$SUITE" ] || usage
[ "$(id -u)" = 0 ] || { echo "run it as root (debootstrap, chroot and mount need it)" >&2; exit 2; }
[ -n "$SOURCE" ] || { echo "--source is needed (this script is not in a git checkout)" >&2; exit 2; }
if [ -z "$BRANCH" ]; then
  if [ -d "$SOURCE" ]; then BRANCH="$(git -C "$SOURCE" rev-parse --abbrev-ref HEAD)"
  else BRANCH="main"; fi
fi
DIR="${DIR:-/var/tmp/lab-fresh-root/$SUITE}"
BASE="$DIR/base"
R="$DIR/root"
LOGS="$DIR/logs"
mkdir -p "$DIR" "$LOGS"

case "$SUITE" in trixie) DISTRO="Debian 13 (trixie)" ;; bookworm) DISTRO="Debian 12 (bookworm)" ;; esac

note() { printf '\033[1m[fresh-root]\033[0m %s\n' "$*" >&2; }

# --- results ---------------------------------------------------------------------------
STEPS=()    # "name seconds"
CHECKS=()   # "PASS|FAIL name detail"
FAILED=0
step_start() { STEP_NAME="$1"; STEP_T0=$(date +%s); note "== $1"; }
step_end() { STEPS+=("$STEP_NAME $(( $(date +%s) - STEP_T0 ))"); }
check() { # check NAME OK(0/1) DETAIL
  if [ "$2" = 0 ]; then CHECKS+=("PASS  $1  $3"); else CHECKS+=("FAIL  $1  $3"); FAILED=1; fi
  note "$( [ "$2" = 0 ] && echo PASS || echo FAIL ): $1 $3"
}

# --- the host's apt mirror -------------------------------------------------------------
host_mirror() {
  local m
  # deb822 "URIs:" lines and one-line "deb URI" lines; never a comment.
  m="$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list 2>/dev/null |
       grep -E '^[[:space:]]*(URIs:|deb[[:space:]])' | grep -o -E 'https?://[^ ]+/debian/?( |$)' |
       tr -d ' ' | head -1)"
  echo "${m:-http://deb.debian.org/debian}" | sed 's:/$::'
}
MIRROR="$(host_mirror)"
SECURITY_MIRROR="${MIRROR%/debian}/debian-security"

# --- the chroot's environment: a clean one, with the CA bundle the host's tools are told about
CHROOT_ENV=(env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-xterm}"
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
  REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
  PIP_CERT=/etc/ssl/certs/ca-certificates.crt
  CURL_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt)
in_root() { chroot "$R" "${CHROOT_ENV[@]}" "$@"; }

# --- mounts and processes ----------------------------------------------------------------
MOUNTS=()   # mounted paths, unmounted in reverse order
mount_root() {
  mount -t proc proc "$R/proc" && MOUNTS+=("$R/proc")
  mount --rbind /sys "$R/sys" && mount --make-rslave "$R/sys" && MOUNTS+=("$R/sys")
  mount --bind /dev "$R/dev" && mount --make-private "$R/dev" && MOUNTS+=("$R/dev")
  mount --bind /dev/pts "$R/dev/pts" && mount --make-private "$R/dev/pts" && MOUNTS+=("$R/dev/pts")
  mount -t tmpfs -o mode=1777 shm "$R/dev/shm" && MOUNTS+=("$R/dev/shm")
}
root_pids() { # the processes whose root directory is the root
  local p real; real="$(readlink -f "$R")"
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$real" ] && echo "${p#/proc/}"
  done
}
end_root_processes() { # TERM, then KILL, every process left in the root; prints how many there were
  local pids n i
  pids="$(root_pids)"; n=$(echo "$pids" | grep -c . || true)
  if [ "$n" -gt 0 ]; then
    note "ending $n process(es) left in the root: $(echo $pids)"
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for i in $(seq 20); do [ -z "$(root_pids)" ] && break; sleep 0.5; done
    pids="$(root_pids)"
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null && sleep 1
  fi
  echo "$n"
}
wait_root_empty() { # waits up to $1 seconds for the root's processes to end by themselves
  local i; for i in $(seq $(( $1 * 2 ))); do [ -z "$(root_pids)" ] && return 0; sleep 0.5; done; return 1
}
DASH_PID=""
cleanup() {
  local i
  [ -n "$DASH_PID" ] && kill -TERM -- "-$DASH_PID" 2>/dev/null
  [ -d "$R/proc" ] && end_root_processes >/dev/null
  for (( i=${#MOUNTS[@]}-1; i>=0; i-- )); do
    umount -R "${MOUNTS[$i]}" 2>/dev/null || umount -R -l "${MOUNTS[$i]}" 2>/dev/null ||
      note "could not unmount ${MOUNTS[$i]}"
  done
  MOUNTS=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# --- 0. the host's tools -----------------------------------------------------------------
if ! command -v debootstrap >/dev/null && [ ! -x /usr/sbin/debootstrap ]; then
  note "installing debootstrap on the host"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
    { echo "could not install debootstrap" >&2; exit 2; }
fi

# --- 1. the base system (built once) -----------------------------------------------------
step_start debootstrap
if [ -f "$BASE/.fresh-root-base-ready" ]; then
  note "reusing $BASE (built $(cat "$BASE/.fresh-root-base-ready"))"
  check base-system 0 "(reused)"
else
  rm -rf "$BASE"
  note "debootstrap --variant=minbase $SUITE $BASE $MIRROR (log: $LOGS/debootstrap.log)"
  if debootstrap --variant=minbase "$SUITE" "$BASE" "$MIRROR" >"$LOGS/debootstrap.log" 2>&1; then
    R="$BASE"
    cat >"$BASE/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
EOF
    # (the folder is ca-certificates' own, not yet there in a minbase root)
    mkdir -p "$BASE/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$BASE/usr/local/share/ca-certificates/" 2>/dev/null || true
    cp /etc/resolv.conf "$BASE/etc/resolv.conf"
    [ -s "$BASE/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$BASE/etc/hosts"
    mount_root
    if in_root apt-get update -qq >>"$LOGS/debootstrap.log" 2>&1 &&
       in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
         ca-certificates git curl >>"$LOGS/debootstrap.log" 2>&1 &&
       in_root update-ca-certificates >>"$LOGS/debootstrap.log" 2>&1; then
      in_root apt-get clean
      date -u +%FT%TZ >"$BASE/.fresh-root-base-ready"
      check base-system 0 "debootstrap + ca-certificates git curl"
    else
      check base-system 1 "apt in the new root failed (see $LOGS/debootstrap.log)"
    fi
    cleanup
    R="$DIR/root"
  else
    check base-system 1 "debootstrap failed (see $LOGS/debootstrap.log)"
  fi
fi
step_end

summary() {
  local s c
  echo
  echo "==== newcomer's check: $DISTRO, $(date -u +%FT%TZ)"
  echo "source: $SOURCE  branch: $BRANCH  commit: ${COMMIT:-?}"
  echo "python chosen by ./lab: ${PYVER:-?}"
  echo "java chosen by ./lab:   ${JAVAVER:-?}"
  echo "steps (seconds):"
  for s in "${STEPS[@]}"; do echo "  $s"; done
  echo "checks:"
  for c in "${CHECKS[@]}"; do echo "  $c"; done
  echo "result: $( [ "$FAILED" = 0 ] && echo PASS || echo FAIL )   (logs: $LOGS, root: $R)"
}
[ -f "$BASE/.fresh-root-base-ready" ] || { summary; exit 1; }

# --- 2. a fresh root, mounted, with the lab cloned -----------------------------------------
step_start prepare-root
if [ "$REUSE" = 1 ] && [ -d "$R/root/lab/.git" ]; then
  note "reusing $R (--reuse-root)"
else
  rm -rf "$R" && cp -a "$BASE" "$R"
fi
cp /etc/resolv.conf "$R/etc/resolv.conf"
mount_root
# pip and Maven fetch over HTTPS: through an inspecting proxy only with its CA in the bundle.
if in_root curl -fsS -m 30 -o /dev/null https://pypi.org/simple/pip/ 2>"$LOGS/https.log" &&
   in_root curl -fsS -m 30 -o /dev/null https://repo.maven.apache.org/maven2/org/apache/kafka/kafka-clients/maven-metadata.xml 2>>"$LOGS/https.log"; then
  check https-from-root 0 "(pypi.org, repo.maven.apache.org)"
else
  check https-from-root 1 "($(head -c 200 "$LOGS/https.log"))"
fi
step_end

step_start clone
SRC_IN_ROOT="$SOURCE"
if [ -d "$SOURCE" ]; then  # a local repository: shown read-only to the root's git
  mkdir -p "$R/mnt/lab-source"
  mount --bind "$SOURCE" "$R/mnt/lab-source" && mount -o remount,bind,ro "$R/mnt/lab-source" &&
    mount --make-private "$R/mnt/lab-source" && MOUNTS+=("$R/mnt/lab-source")
  SRC_IN_ROOT=/mnt/lab-source
fi
rm -rf "$R/root/lab"
if in_root git clone -q --branch "$BRANCH" "$SRC_IN_ROOT" /root/lab >"$LOGS/clone.log" 2>&1; then
  COMMIT="$(in_root git -C /root/lab rev-parse --short HEAD)"
  check clone 0 "$BRANCH at $COMMIT"
else
  check clone 1 "git clone failed (see $LOGS/clone.log)"
fi
step_end
[ -d "$R/root/lab/.git" ] || { summary; exit 1; }

lab() { in_root bash -c 'cd /root/lab && exec "$@"' lab "$@"; }

if [ -n "$JDK" ]; then  # a machine that already has this JDK: ./lab must use it, not add one
  step_start jdk
  in_root apt-get update -qq >"$LOGS/jdk.log" 2>&1 &&
    in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "$JDK" >>"$LOGS/jdk.log" 2>&1
  rc=$?
  check jdk-preinstalled "$rc" "($JDK: exit $rc; log: $LOGS/jdk.log)"
  step_end
fi

# --- 3. ./lab setup, then the ack-loss scenario ---------------------------------------------
step_start lab-setup
lab ./lab setup >"$LOGS/lab-setup.log" 2>&1; rc=$?
sed 's/\x1b\[[0-9;]*m//g' "$LOGS/lab-setup.log" | grep '^\[lab\]' | sed 's/^/    /' >&2
check lab-setup "$rc" "(exit $rc; log: $LOGS/lab-setup.log)"
PYVER="$(lab .venv/bin/python --version 2>&1 || echo none)"
JAVAVER="$(lab bash -c 'java -version 2>&1 | head -1; readlink -f "$(command -v java)"' 2>/dev/null | paste -sd' ' || true)"
step_end

if [ "$rc" = 0 ]; then
  step_start engine-run
  lab ./lab engine run scenarios/ack-loss.yaml --json >"$LOGS/engine-run.json" 2>"$LOGS/engine-run.log"; rc=$?
  check engine-run "$rc" "(exit $rc; log: $LOGS/engine-run.log)"
  # Read with the root's own Python (the host may have none); the JSON comes on stdin.
  VERDICT="$(in_root /root/lab/.venv/bin/python -c '
import json, sys
try:
    results = json.load(sys.stdin)["results"]
except Exception as error:  # no JSON: the run failed
    print("FAIL no results (%s)" % error.__class__.__name__); sys.exit()
alo, eos = results.get("at-least-once", {}), results.get("exactly-once", {})
ok = (alo.get("duplicates") or 0) >= 1 and eos.get("duplicates") == 0 and eos.get("lost") == 0
print(("PASS " if ok else "FAIL ") + "; ".join(
    "%s: dup=%s lost=%s delivered=%s" % (level, r.get("duplicates"), r.get("lost"), r.get("delivered"))
    for level, r in results.items()))
' <"$LOGS/engine-run.json" 2>&1)"
  check ack-loss-verdicts "$( [ "${VERDICT%% *}" = PASS ] && echo 0 || echo 1 )" "${VERDICT#* }"
  # The metrics page's Spark on this distribution's JDK and Python: PySpark's count of the
  # same run (from its record: the run's cluster is gone) must equal the run's own.
  RUN_ID="$(in_root /root/lab/.venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["run_id"])' <"$LOGS/engine-run.json" 2>/dev/null || true)"
  lab ./lab engine metrics "$RUN_ID" --from-record --json --quiet >"$LOGS/metrics.json" 2>"$LOGS/metrics.log"; rc=$?
  SPARK="$(in_root /root/lab/.venv/bin/python -c '
import json, sys
try:
    run, spark = (doc["results"] for doc in json.load(sys.stdin))
except Exception as error:
    print("FAIL no metrics (%s)" % error.__class__.__name__); sys.exit()
same = all(
    spark[level]["duplicates"] == run[level]["duplicates"] and spark[level]["lost"] == run[level]["lost"]
    for level in run)
print(("PASS " if same else "FAIL ") + "; ".join(
    "%s: dup=%s lost=%s" % (level, r["duplicates"], r["lost"]) for level, r in spark.items()))
' < <(printf "["; cat "$LOGS/engine-run.json"; printf ","; cat "$LOGS/metrics.json"; printf "]") 2>&1)"
  check spark-metrics "$( [ "$rc" = 0 ] && [ "${SPARK%% *}" = PASS ] && echo 0 || echo 1 )" "(exit $rc; ${SPARK#* })"
  wait_root_empty 10
  left="$(end_root_processes)"
  check nothing-left-after-run "$( [ "$left" = 0 ] && echo 0 || echo 1 )" "($left process(es) left)"
  step_end
fi

# --- 4. the dashboard -------------------------------------------------------------------
if [ "$rc" = 0 ] || [ -x "$R/root/lab/.venv/bin/python" ]; then
  step_start dashboard
  if curl -s -o /dev/null "http://127.0.0.1:$PORT/" 2>/dev/null; then
    check dashboard 1 "port $PORT is already in use on this machine; choose another with --port"
  else
    # setsid: the dashboard leads a process group of its own, stopped as one below.
    chroot "$R" "${CHROOT_ENV[@]}" LAB_PORT="$PORT" setsid bash -c 'cd /root/lab && exec ./lab dashboard' \
      >"$LOGS/dashboard.log" 2>&1 &
    DASH_PID=$!
    health=""; t0=$(date +%s)
    while [ $(( $(date +%s) - t0 )) -lt 300 ] && kill -0 "$DASH_PID" 2>/dev/null; do
      health="$(curl -fsS -m 5 "http://127.0.0.1:$PORT/_stcore/health" 2>/dev/null || true)"
      [ "$health" = ok ] && break
      sleep 2
    done
    check dashboard-health "$( [ "$health" = ok ] && echo 0 || echo 1 )" \
      "(/_stcore/health said '${health:-nothing}' after $(( $(date +%s) - t0 )) s; log: $LOGS/dashboard.log)"
    page="$(curl -fsS -m 20 "http://127.0.0.1:$PORT/" 2>/dev/null || true)"
    echo "$page" >"$LOGS/dashboard-page.html"
    check dashboard-page "$( echo "$page" | grep -q '<div id="root">' && echo 0 || echo 1 )" \
      "($(echo -n "$page" | wc -c) bytes)"
    # The page's own Python runs only when a browser tab asks for it over the websocket.
    opened="$(in_root /root/lab/.venv/bin/python - "$PORT" 180 <"$SCRIPT_DIR/open_page.py" 2>&1 | tail -1)"
    check dashboard-run "$( [ "${opened%% *}" = PASS ] && echo 0 || echo 1 )" "(${opened#* })"
    # An opened page starts the dashboard's cluster (LAB_AUTOSTART=1): its JVMs must end with it.
    for i in $(seq 60); do
      jvms="$(for p in $(root_pids); do { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -c 'kafka\.Kafka'; done | grep -c 1)"
      [ "$jvms" -gt 0 ] && break; sleep 1
    done
    note "Kafka JVMs in the root while the page was open: $jvms"
    # What Ctrl+C does: SIGINT to its process group; SIGTERM if it is still there 20 s later.
    kill -INT -- "-$DASH_PID" 2>/dev/null
    for i in $(seq 40); do kill -0 "$DASH_PID" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$DASH_PID" 2>/dev/null && { note "still running 20 s after SIGINT: SIGTERM"; kill -TERM -- "-$DASH_PID"; }
    wait "$DASH_PID" 2>/dev/null; DASH_PID=""
    wait_root_empty 15  # its watchdog ends the cluster's JVMs about a second after it
    left="$(end_root_processes)"
    check nothing-left-after-dashboard "$( [ "$left" = 0 ] && echo 0 || echo 1 )" \
      "($left process(es) left after its process group was stopped)"
  fi
  step_end
fi

cleanup
summary | tee "$LOGS/summary.txt"
exit "$FAILED"
