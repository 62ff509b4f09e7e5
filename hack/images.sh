#!/usr/bin/env bash
# The real node's images as a background job, for make test (hack/test.sh) and CI (.ci/run):
#   hack/images.sh start DIR   start test/images/build.sh in the background, at a lower CPU priority (nice 10: the
#                              suites beside it go first, it takes what they leave): tarballs in DIR/out, their
#                              list in DIR/images.txt, its log in DIR/build.log, DIR/ready once the tarballs are
#                              all saved, its exit code in DIR/rc when it ends
#   hack/images.sh wait DIR    wait until the tarballs are ready (a line a minute on what it is doing); exit non-zero
#                              if the job failed before that
#   hack/images.sh finish DIR  wait for the job to end (the Dockerfile check that may follow the tarballs); exit with
#                              its code
#   hack/images.sh table DIR   its steps as rows of make test's table (name, seconds, result), from its log
#   hack/images.sh stop DIR    stop the job if it still runs (its process group: the build, its dockerd, whatever
#                              it compiles) and wait for it to end; for a run that fails before it needs the images
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:?start, wait, finish, table or stop}
dir=${2:?the job directory}

case "$cmd" in
start)
  mkdir -p "$dir"
  rm -f "$dir/rc" "$dir/ready"
  (
    rc=0
    # A process group of its own (setsid), whose leader's PID is DIR/pid: stop ends all of it and nothing else.
    WEBAPP_IMAGES_READY="$dir/ready" nice -n 10 setsid bash -c 'echo $$ >"$1/pid"; exec test/images/build.sh "$1/out"' _ "$dir" \
      >"$dir/images.txt" 2>"$dir/build.log" || rc=$?
    echo "$rc" >"$dir/rc"
  ) </dev/null &
  ;;
stop)
  if [ -s "$dir/pid" ] && [ ! -s "$dir/rc" ]; then
    group=$(cat "$dir/pid")
    kill -TERM -- "-$group" 2>/dev/null || true
    # build.sh stops its dockerd on the way out. Waited for until no process of the group is left (not for the exit
    # code: after an interrupt the shell that writes it may be gone already).
    for _ in $(seq 300); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$group" 2>/dev/null || true
  fi
  ;;
wait | finish)
  waited=0
  while [ ! -s "$dir/rc" ] && { [ "$cmd" = finish ] || [ ! -e "$dir/ready" ]; }; do
    sleep 5
    waited=$((waited + 5))
    if [ $((waited % 60)) = 0 ]; then
      echo "still building the real node's images; the last step done: $(grep '^images: ' "$dir/build.log" 2>/dev/null | tail -n 1)"
    fi
  done
  # The tarballs are there: what may still run or fail after them is finish's to report.
  if [ "$cmd" = wait ] && [ -e "$dir/ready" ]; then exit 0; fi
  rc=$(cat "$dir/rc")
  if [ "$rc" != 0 ]; then
    echo "building the real node's images failed ($rc); the end of its log:" >&2
    tail -n 40 "$dir/build.log" >&2
  fi
  exit "$rc"
  ;;
table)
  # build.sh logs "images: WHAT (Ns)", N counted from its start: each step took the time since the one before.
  prev=0
  sed -nE 's/^images: (.*) \(([0-9]+)s\)$/\2\t\1/p' "$dir/build.log" | while IFS=$'\t' read -r at what; do
    printf '  images: %s\t%s\tok\n' "$what" $((at - prev))
    prev=$at
  done
  ;;
*)
  echo "usage: hack/images.sh start|wait|finish|table|stop DIR" >&2
  exit 2
  ;;
esac
