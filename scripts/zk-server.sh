#!/usr/bin/env bash
# Starts a throw-away standalone ZooKeeper (Debian's zookeeper package) on
# loopback, for the demo and for trying zkelect out:
#
#   scripts/zk-server.sh [--tick-time MS] DIR PORT
#
# --tick-time sets ZooKeeper's tickTime (default 200 ms, quick for tests; a
# production server uses 2000). Sessions may last from 2 ticks to 30 s (or
# 20 ticks, if longer), so an agent's session_timeout must be at least
# 3 ticks (zkelect assumes tickTime <= T/3).
#
# It returns once the server answers on 127.0.0.1:PORT, and prints its PID
# (stop it with `kill PID`). The server keeps its data and its log in DIR
# (DIR/zookeeper.log). If PORT is in use, or the server does not answer within
# ZK_START_TIMEOUT seconds (default 60), it says why on stderr, leaves nothing
# running and exits 1.
set -euo pipefail
usage() {
	echo "usage: $0 [--tick-time MS] DIR PORT"
	echo "Starts a throw-away ZooKeeper on 127.0.0.1:PORT with its data and log in"
	echo "DIR, and prints its pid once it answers. --tick-time: ZooKeeper's"
	echo "tickTime in ms (default 200; 2000 is ZooKeeper's own default)."
}
tick=200
while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--tick-time)
		[ $# -ge 2 ] || { echo "zk-server: --tick-time needs a value in ms" >&2; usage >&2; exit 1; }
		tick=$2; shift 2 ;;
	--tick-time=*) tick=${1#--tick-time=}; shift ;;
	--) shift; break ;;
	-*) echo "zk-server: unknown option '$1'" >&2; usage >&2; exit 1 ;;
	*) break ;;
	esac
done
if [ $# -ne 2 ]; then
	echo "zk-server: expected DIR and PORT, got $# argument(s)" >&2
	usage >&2
	exit 1
fi
if ! [[ "$tick" =~ ^[0-9]+$ ]] || [ "$tick" -lt 1 ] || [ "$tick" -gt 60000 ]; then
	echo "zk-server: invalid --tick-time '$tick' (milliseconds, 1..60000)" >&2
	exit 1
fi
dir=$1 port=$2
min_session=$((2 * tick))
max_session=$((20 * tick > 30000 ? 20 * tick : 30000))
timeout=${ZK_START_TIMEOUT:-60}
jar=/usr/share/java/zookeeper.jar
# Without an SLF4J binding ZooKeeper logs nothing at all: log4j 1.2 and its
# binding come with Debian's zookeeper package.
logjars=/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar

for f in "$jar" ${logjars//:/ }; do
	[ -r "$f" ] || { echo "zk-server: $f not found (scripts/install-deps.sh --demo installs zookeeper)" >&2; exit 1; }
done
command -v java >/dev/null || { echo "zk-server: java not found (scripts/install-deps.sh --demo installs a JRE)" >&2; exit 1; }

# answers CMD: true if the server on PORT answers the four-letter word srvr
# (a server that accepts but never answers counts as not answering).
answers() {
	timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && echo srvr >&3 && grep -q "^Mode:" <&3' \
		_ "$port" 2>/dev/null
}

if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
	echo "zk-server: 127.0.0.1:$port is already in use; pick another port" >&2
	exit 1
fi

dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
mkdir -p "$dir/data" "$dir/conf"
cat > "$dir/conf/zoo.cfg" <<CFG
tickTime=$tick
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr
minSessionTimeout=$min_session
maxSessionTimeout=$max_session
CFG
cat > "$dir/conf/log4j.properties" <<CFG
log4j.rootLogger=INFO, F
log4j.appender.F=org.apache.log4j.FileAppender
log4j.appender.F.File=$dir/zookeeper.log
log4j.appender.F.layout=org.apache.log4j.PatternLayout
log4j.appender.F.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] %m%n
CFG

java -Xmx256m -Dzookeeper.admin.enableServer=false \
	-Dlog4j.configuration="file:$dir/conf/log4j.properties" \
	-cp "$dir/conf:$jar:$logjars" \
	org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/conf/zoo.cfg" \
	</dev/null >"$dir/zookeeper.out" 2>&1 &
pid=$!

fail() {
	echo "zk-server: ZooKeeper did not start on 127.0.0.1:$port: $1" >&2
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	echo "zk-server: the end of $dir/zookeeper.log (and .out):" >&2
	tail -n 15 "$dir/zookeeper.log" "$dir/zookeeper.out" >&2 2>/dev/null || true
	exit 1
}

deadline=$((SECONDS + timeout))
until answers; do
	kill -0 "$pid" 2>/dev/null || fail "the server exited"
	[ "$SECONDS" -lt "$deadline" ] || fail "no answer within ${timeout}s"
	sleep 0.1
done
echo "$pid"
