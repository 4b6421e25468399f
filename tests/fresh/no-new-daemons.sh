#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs a command (the demo, an install profile) and fails if it left a
# daemon behind: a unit or an init script newly enabled, a socket newly
# listening, or a process newly running on this machine. For a fresh
# Debian 12, a chroot (no systemd; its processes are those whose root is
# ours) or a container with systemd as PID 1:
#
#   tests/fresh/no-new-daemons.sh ./scripts/demo.sh
#   tests/fresh/no-new-daemons.sh ./scripts/install-deps.sh --test
#
# Only bash, coreutils, findutils and awk: it runs before anything is
# installed. Prints what it compared, then each new thing, and exits 1 if
# there is any (the command's own failure: its exit status).
set -uo pipefail
usage() {
	echo "usage: $0 COMMAND [ARGS...]"
	echo "Runs COMMAND, then fails if it left a unit or init script enabled, a"
	echo "socket listening or a process running that was not there before."
}
case "${1:-}" in
"") echo "no-new-daemons: no command given" >&2; usage >&2; exit 1 ;;
-h|--help) usage; exit 0 ;;
esac

me=$$
rootid=$(stat -L -c %d:%i /)

# Processes on this machine: those whose root is ours (in a chroot, the
# host's share our /proc but not our root), other than this script and
# what it runs to look.
ours() {
	local p pid
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[ "$(stat -L -c %d:%i "$p/root" 2>/dev/null)" = "$rootid" ] || continue
		# Kernel threads (kthreadd and its children) are no daemons.
		[ "$pid" = 2 ] && continue
		[ "$(awk '{print $4}' "$p/stat" 2>/dev/null)" = 2 ] && continue
		echo "$pid"
	done
}
mine() {	# this script and its children at the time of the look
	local pid=$1 ppid
	while [ "$pid" -gt 1 ]; do
		[ "$pid" = "$me" ] && return 0
		ppid=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null) || return 1
		[ -n "$ppid" ] || return 1
		pid=$ppid
	done
	return 1
}

# Enabled: every link systemctl enable or update-rc.d makes for what starts
# a process (a service, socket, timer or path unit, or the init script of
# a runlevel); targets and rcS.d's boot-time one-shots start no daemon.
enabled() {
	find /etc/systemd/system /etc/systemd/user -type l \( -name '*.service' \
	    -o -name '*.socket' -o -name '*.timer' -o -name '*.path' \) 2>/dev/null |
	    while read -r l; do echo "$l -> $(readlink "$l")"; done
	find /etc/rc[2-5].d -name 'S*' 2>/dev/null
}

# Listening: TCP sockets in LISTEN and bound UDP sockets, with the process
# that holds each (only our processes, so that a chroot sees its own).
listening() {
	local inodes pid fd ino
	inodes=$(awk 'FNR > 1 && (($4 == "0A" && FILENAME ~ /tcp/) || ($4 == "07" && FILENAME ~ /udp/)) {
		split($2, a, ":"); h = a[2]; n = 0
		for (i = 1; i <= length(h); i++)
			n = n * 16 + index("0123456789ABCDEF", substr(h, i, 1)) - 1
		printf "%s %d %s\n", $10, n, FILENAME
	    }' /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 2>/dev/null)
	for pid in $(ours); do
		mine "$pid" && continue
		for fd in /proc/"$pid"/fd/*; do
			ino=$(readlink "$fd" 2>/dev/null) || continue
			case $ino in socket:*) ;; *) continue ;; esac
			ino=${ino#socket:[}; ino=${ino%]}
			printf '%s\n' "$inodes" | awk -v i="$ino" -v c="$(cat /proc/"$pid"/comm 2>/dev/null)" \
			    '$1 == i { sub("/proc/net/", "", $3); print c, $3, $2 }'
		done
	done | sort -u
}

running() {
	local pid
	for pid in $(ours); do
		mine "$pid" && continue
		[ "$pid" = 1 ] && continue
		cat /proc/"$pid"/comm 2>/dev/null
	done | sort | uniq -c | awk '{print $2 " x" $1}'
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
		systemctl list-units --no-legend --plain --state=running --type=service,socket,timer 2>/dev/null |
		    awk '{print "unit " $1}'
	fi
}

look() {
	{
		enabled | sed 's/^/enabled: /'
		listening | sed 's/^/listening: /'
		running | sed 's/^/running: /'
	} | sort
}

# What the command installed, by dpkg's count and Installed-Size (KiB).
packages() {
	dpkg-query -W -f='${Installed-Size}\n' 2>/dev/null | awk '{n++; s += $1} END {print n + 0, s + 0}'
}

before=$(look)
read -r n0 k0 < <(packages)
t0=$(date +%s)
"$@"
rc=$?
t1=$(date +%s)
read -r n1 k1 < <(packages)
echo "no-new-daemons: '$*' took $((t1 - t0)) s; packages $n0 -> $n1 (+$((n1 - n0))), installed size +$(((k1 - k0) / 1024)) MiB"
# Units started with the command settle in the same second or two (a
# service's ExecStartPost, a socket's first accept): look until two looks
# agree, at most 10 times.
after=$(look)
for i in 1 2 3 4 5 6 7 8 9 10; do
	sleep 1
	again=$(look)
	[ "$again" = "$after" ] && break
	after=$again
done

# Processes the command's session alone ran (systemd's own helpers that
# come and go, the command's children that left) are compared by name.
new=$(comm -13 <(printf '%s\n' "$before" | sed 's/ x[0-9]*$//' | sort -u) \
	<(printf '%s\n' "$after" | sed 's/ x[0-9]*$//' | sort -u))
echo "no-new-daemons: before:"; printf '%s\n' "$before" | sed 's/^/  /'
echo "no-new-daemons: after:"; printf '%s\n' "$after" | sed 's/^/  /'
if [ $rc -ne 0 ]; then
	echo "no-new-daemons: '$*' failed (exit $rc)"
	exit $rc
fi
if [ -n "$new" ]; then
	echo "no-new-daemons: '$*' left behind:"
	printf '%s\n' "$new" | sed 's/^/  /'
	exit 1
fi
echo "no-new-daemons: '$*' left nothing enabled, listening or running"
