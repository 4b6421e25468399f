#!/usr/bin/env bash
# Starts a throw-away standalone ZooKeeper on loopback for demos:
#   scripts/zk-server.sh DIR PORT   (prints the PID; stop it with kill)
set -euo pipefail
dir=$1 port=$2
mkdir -p "$dir/data" "$dir/conf"
cat > "$dir/conf/zoo.cfg" <<CFG
tickTime=200
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr
minSessionTimeout=400
maxSessionTimeout=30000
CFG
cat > "$dir/conf/log4j.properties" <<CFG
log4j.rootLogger=WARN, F
log4j.appender.F=org.apache.log4j.FileAppender
log4j.appender.F.File=$dir/zookeeper.log
log4j.appender.F.layout=org.apache.log4j.PatternLayout
log4j.appender.F.layout.ConversionPattern=%d %p %c{1}: %m%n
CFG
java -Xmx256m -Dzookeeper.admin.enableServer=false \
	-cp "$dir/conf:/usr/share/java/zookeeper.jar" \
	org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/conf/zoo.cfg" \
	>"$dir/zookeeper.out" 2>&1 &
echo $!
