#!/bin/bash
# peakanon.sh CMD...: runs CMD, samples its /proc/PID/status every 10 ms, prints the wall time,
# the peak RssAnon and VmHWM (peak RSS, file-backed pages included).
t0=$(date +%s.%N)
"$@" & pid=$!
peak=0; hwm=0
while kill -0 $pid 2>/dev/null; do
  read -r a h < <(awk '/^RssAnon:/{a=$2} /^VmHWM:/{h=$2} END{print a+0, h+0}' /proc/$pid/status 2>/dev/null)
  [ -n "$a" ] && [ "$a" -gt "$peak" ] && peak=$a
  [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
  sleep 0.01
done
wait $pid; rc=$?
echo "wall $(echo "$(date +%s.%N) - $t0" | bc) s, peak RssAnon ${peak} KB, VmHWM ${hwm} KB, rc $rc"
