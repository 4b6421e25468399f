#!/usr/bin/env bash
# The whole story on one machine: installs what it needs (install-deps.sh
# --demo, which leaves no daemon enabled or running), builds zkelect,
# starts a ZooKeeper on loopback and three agents, shows who leads and under
# which epoch, then stops the leader (graceful handover) and kills the next
# one (crash failover), showing the successor take over with a higher epoch.
set -euo pipefail
usage() {
	echo "usage: $0 [-h|--help]"
	echo "Runs the demo: installs packages (scripts/install-deps.sh --demo: a"
	echo "compiler, the libraries, ZooKeeper and a JRE; unless SKIP_INSTALL=1),"
	echo "builds into build/, starts ZooKeeper and three agents on loopback, shows"
	echo "a handover and a failover, and removes everything it started at the end."
}
case "${1:-}" in
"") ;;
-h|--help) usage; exit 0 ;;
*) echo "demo.sh: unknown argument '$1'" >&2; usage >&2; exit 1 ;;
esac
if [ $# -gt 0 ]; then
	echo "demo.sh: unexpected argument '$1'" >&2; usage >&2; exit 1
fi
cd "$(dirname "$0")/.."
top=$PWD

if [ "${SKIP_INSTALL:-}" != 1 ]; then
	scripts/install-deps.sh --demo
fi
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
zkelectd=$top/build/agent/zkelectd
ctl=$top/build/ctl/zkelectctl

work=$(mktemp -d /tmp/zkelect-demo.XXXXXX)
pids=()
# Killed processes are disowned first: bash would otherwise print a
# "Killed" job line for them, in the middle of the demo's output.
kill9() {	# kill9 PID...: SIGKILL, then wait until each one is gone
	local p
	for p in "$@"; do
		pids=($(for q in "${pids[@]}"; do [ "$q" = "$p" ] || echo "$q"; done))
		disown "$p" 2>/dev/null || true
		kill -9 "$p" 2>/dev/null || true
	done
	for p in "$@"; do	# gone, or a zombie that is no longer ours to reap
		while kill -0 "$p" 2>/dev/null &&
		    ! grep -q '^[0-9]* (.*) Z' "/proc/$p/stat" 2>/dev/null; do
			sleep 0.02
		done
	done
}
cleanup() {
	kill9 "${pids[@]}"
	rm -rf "$work"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
ms() { date +%s%3N; }

port=$(free_port)
echo "== starting ZooKeeper on 127.0.0.1:$port"
# zk-server.sh returns once ZooKeeper answers (or says why it did not).
zkpid=$(scripts/zk-server.sh "$work/zk" "$port")
pids+=("$zkpid")

declare -A agent_pid
for n in 1 2 3; do
	cat > "$work/agent$n.yaml" <<CFG
zookeeper:
  servers: "127.0.0.1:$port"
  session_timeout: 2s
election:
  path: /zkelect/demo
  id: agent$n
api:
  socket: $work/agent$n.sock
CFG
	"$zkelectd" -c "$work/agent$n.yaml" 2>"$work/agent$n.log" &
	agent_pid[$n]=$!
	pids+=("$!")
done
echo "== three agents started (session timeout 2s)"

leader_of() {	# prints the number of the agent that leads now, if any
	for n in "$@"; do
		if curl -sf --max-time 1 --unix-socket "$work/agent$n.sock" \
		    http://localhost/v1/leader >/dev/null 2>&1; then
			echo "$n"; return 0
		fi
	done
	return 1
}
wait_leader() {	# wait_leader N... : polls until one of them leads
	local deadline=$(( $(ms) + 30000 ))
	until leader_of "$@"; do
		[ "$(ms)" -lt "$deadline" ] || { echo "no leader"; exit 1; }
		sleep 0.02
	done
}
named_by_all() {	# named_by_all LEADER N...: each agent N names LEADER
	local lead=$1 n	# (followers read the claim from ZooKeeper every T/6)
	shift
	for n in "$@"; do
		curl -sf --max-time 1 --unix-socket "$work/agent$n.sock" \
		    http://localhost/v1/status 2>/dev/null |
		    grep -q "\"leader\":{\"id\":\"agent$lead\"" || return 1
	done
}
show() {	# show LEADER N...: the status of each agent, once all name LEADER
	local deadline=$(( $(ms) + 30000 ))
	until named_by_all "$@"; do
		[ "$(ms)" -lt "$deadline" ] || break	# show what they say anyway
		sleep 0.02
	done
	shift
	for n in "$@"; do "$ctl" --socket "$work/agent$n.sock" status; done
}

alive=(1 2 3)
first=$(wait_leader "${alive[@]}")
show "$first" "${alive[@]}"

echo
echo "== graceful handover: SIGTERM to agent$first"
t0=$(ms)
kill -TERM "${agent_pid[$first]}"
alive=($(for n in "${alive[@]}"; do [ "$n" = "$first" ] || echo "$n"; done))
second=$(wait_leader "${alive[@]}")
t1=$(ms)
wait "${agent_pid[$first]}" && echo "agent$first exited cleanly"
pids=($(for q in "${pids[@]}"; do [ "$q" = "${agent_pid[$first]}" ] || echo "$q"; done))
echo "agent$second leads $((t1 - t0)) ms after the SIGTERM"
show "$second" "${alive[@]}"

echo
echo "== crash failover: kill -9 agent$second (its session must expire first)"
t0=$(ms)
kill9 "${agent_pid[$second]}"
alive=($(for n in "${alive[@]}"; do [ "$n" = "$second" ] || echo "$n"; done))
third=$(wait_leader "${alive[@]}")
t1=$(ms)
echo "agent$third leads $((t1 - t0)) ms after the kill (session timeout 2000 ms)"
show "$third" "${alive[@]}"

echo
echo "== epochs only grow; the app sends its epoch with every write, and the"
echo "   resource refuses any write whose epoch is lower than one it has seen:"
echo "   UPDATE jobs SET ..., epoch = \$epoch WHERE id = ? AND epoch <= \$epoch"
