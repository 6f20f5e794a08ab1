#!/bin/sh
# PID 1 of a lab VM. Baked into the image as /lab-init by tests/lab/image.py: its text is part of the
# image cache key, so keep it small and stable. Everything that changes often lives in the repo, which
# is shared read-only over 9p (tag "src"), so project code never needs an image rebuild.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
for arg in $(cat /proc/cmdline); do
    case "$arg" in lab.host=*) hostname "${arg#lab.host=}" ;; esac
done
modprobe virtio_console
modprobe 9pnet_virtio
modprobe 9p
mkdir -p /lab/src /lab/site
mount -t 9p -o trans=virtio,version=9p2000.L,ro src /lab/src
mount -t 9p -o trans=virtio,version=9p2000.L,ro site /lab/site
ip link set lo up
python3 /lab/src/tests/lab/guest_agent.py
# The agent never returns unless it crashed: power off rather than let init exit (kernel panic).
echo 1 > /proc/sys/kernel/sysrq
echo o > /proc/sysrq-trigger
sleep 10
